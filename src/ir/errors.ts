// Typed errors: a stable code, a field path and the offending value. Bugs are plain Error / InternalError.

export type ErrorKind = "ScenarioError" | "CompileError" | "EncodeError" | "SimError";

export class CcsimError extends Error {
  readonly code: string;
  readonly path: string;
  readonly value: unknown;
  readonly file: string | undefined;
  constructor(kind: ErrorKind, code: string, message: string, opts: { path?: string; value?: unknown; file?: string } = {}) {
    super(message);
    this.name = kind;
    this.code = code;
    this.path = opts.path ?? "";
    this.value = opts.value;
    this.file = opts.file;
  }
  /** One line for a user: `file: path: message (value: v) [CODE]`. */
  render(): string {
    const where = [this.file, this.path].filter((s) => s !== undefined && s !== "").join(": ");
    const val = this.value === undefined ? "" : ` (value: ${safeJson(this.value)})`;
    return `${where ? where + ": " : ""}${this.message}${val} [${this.code}]`;
  }
}

export class ScenarioError extends CcsimError {
  constructor(code: string, message: string, opts: { path?: string; value?: unknown; file?: string } = {}) {
    super("ScenarioError", code, message, opts);
  }
}
export class CompileError extends CcsimError {
  constructor(code: string, message: string, opts: { path?: string; value?: unknown; file?: string } = {}) {
    super("CompileError", code, message, opts);
  }
}
export class EncodeError extends CcsimError {
  constructor(code: string, message: string, opts: { path?: string; value?: unknown } = {}) {
    super("EncodeError", code, message, opts);
  }
}
export class SimError extends CcsimError {
  constructor(code: string, message: string, opts: { path?: string; value?: unknown } = {}) {
    super("SimError", code, message, opts);
  }
}

/** An internal invariant failed: a bug in ccsim, exit code 2. */
/** A command line that cannot run (a flag, its value, a missing argument): exit 1, with --help pointed at. */
export class UsageError extends Error {}

export class InternalError extends Error {
  constructor(message: string) {
    super(`internal error: ${message}`);
    this.name = "InternalError";
  }
}

export function assert(cond: unknown, message: string): asserts cond {
  if (!cond) throw new InternalError(message);
}

/** A short rendering of a value for a message: at most 120 characters, whatever its size or depth. */
function safeJson(v: unknown): string {
  const s = brief(v, 4);
  return s.length > 120 ? s.slice(0, 117) + "..." : s;
}

/** JSON-like text of `v`, nested values below `depth` elided, long arrays and objects cut short. */
function brief(v: unknown, depth: number): string {
  if (v === null || typeof v !== "object") {
    if (typeof v === "bigint") return v.toString();
    const s = JSON.stringify(v);
    return s === undefined ? String(v) : s.length > 120 ? s.slice(0, 117) + "...\"" : s;
  }
  if (depth === 0) return Array.isArray(v) ? "[...]" : "{...}";
  if (Array.isArray(v)) {
    const items = v.slice(0, 16).map((x) => brief(x, depth - 1));
    return `[${items.join(",")}${v.length > 16 ? ",..." : ""}]`;
  }
  const keys = Object.keys(v).slice(0, 16);
  const body = keys.map((k) => `${JSON.stringify(k)}:${brief((v as Record<string, unknown>)[k], depth - 1)}`);
  return `{${body.join(",")}${Object.keys(v).length > 16 ? ",..." : ""}}`;
}
