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
export class InternalError extends Error {
  constructor(message: string) {
    super(`internal error: ${message}`);
    this.name = "InternalError";
  }
}

export function assert(cond: unknown, message: string): asserts cond {
  if (!cond) throw new InternalError(message);
}

export function assertNever(x: never, what: string): never {
  throw new InternalError(`unexpected ${what}: ${safeJson(x)}`);
}

function safeJson(v: unknown): string {
  try {
    const s = JSON.stringify(v);
    if (s === undefined) return String(v);
    return s.length > 120 ? s.slice(0, 117) + "..." : s;
  } catch {
    return String(v);
  }
}
