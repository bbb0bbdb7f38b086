// A strict reader over parsed JSON: every access names its field path; unknown keys are errors.
import { ScenarioError } from "../ir/errors.ts";

/** Entries an array may have when nothing smaller bounds it. */
export const MAX_ITEMS = 65536;

export class Reader {
  readonly file: string;
  readonly path: string;
  readonly value: unknown;

  constructor(file: string, path: string, value: unknown) {
    this.file = file;
    this.path = path;
    this.value = value;
  }

  fail(code: string, message: string, value: unknown = this.value, path = this.path): never {
    throw new ScenarioError(code, message, { file: this.file, path: path || "(top level)", value });
  }

  private child(key: string | number): string {
    return typeof key === "number" ? `${this.path}[${key}]` : this.path ? `${this.path}.${key}` : key;
  }

  object(): Record<string, unknown> {
    if (typeof this.value !== "object" || this.value === null || Array.isArray(this.value)) this.fail("SCN1003", "expected an object");
    return this.value as Record<string, unknown>;
  }

  /** Fail on any key not in `allowed`. */
  keys(allowed: readonly string[]): void {
    for (const k of Object.keys(this.object())) {
      if (!allowed.includes(k)) this.fail("SCN1002", `unknown key "${k}" (allowed: ${allowed.join(", ")})`, k, this.child(k));
    }
  }

  has(key: string): boolean {
    return Object.prototype.hasOwnProperty.call(this.object(), key);
  }

  get(key: string): Reader {
    const o = this.object();
    if (!this.has(key)) this.fail("SCN1004", `missing required key "${key}"`, undefined, this.child(key));
    return new Reader(this.file, this.child(key), o[key]);
  }

  opt(key: string): Reader | undefined {
    return this.has(key) ? new Reader(this.file, this.child(key), this.object()[key]) : undefined;
  }

  /** The entries of an array, refused before any is read when there are more than `max`. */
  items(max = MAX_ITEMS): Reader[] {
    if (!Array.isArray(this.value)) this.fail("SCN1003", "expected an array");
    const a = this.value as unknown[];
    if (a.length > max) this.fail("SCN1009", `has ${a.length} entries; at most ${max}`, `[${a.length} entries]`);
    return a.map((v, i) => new Reader(this.file, this.child(i), v));
  }

  string(): string {
    if (typeof this.value !== "string") this.fail("SCN1003", "expected a string");
    return this.value as string;
  }

  boolean(): boolean {
    if (typeof this.value !== "boolean") this.fail("SCN1003", "expected true or false");
    return this.value as boolean;
  }

  oneOf<T extends string>(choices: readonly T[]): T {
    const s = this.string();
    if (!(choices as readonly string[]).includes(s)) this.fail("SCN1007", `unknown value "${s}" (expected one of: ${choices.join(", ")})`);
    return s as T;
  }

  /** A safe integer within [min, max]. */
  int(min = 0, max = Number.MAX_SAFE_INTEGER): number {
    const v = this.value;
    if (typeof v !== "number" || !Number.isFinite(v)) this.fail("SCN1003", "expected a number");
    const n = v as number;
    if (!Number.isSafeInteger(n)) this.fail("SCN1003", "expected an integer");
    if (n < min || n > max) this.fail("SCN1005", `must be between ${min} and ${max}`);
    return n;
  }

  /** A non-negative number (integer or not) within [min, max]. */
  number(min = 0, max = Number.MAX_SAFE_INTEGER): number {
    const v = this.value;
    if (typeof v !== "number" || !Number.isFinite(v)) this.fail("SCN1003", "expected a number");
    const n = v as number;
    if (n < min || n > max) this.fail("SCN1005", `must be between ${min} and ${max}`);
    return n;
  }
}

/** Parse JSON text, turning a syntax error into a ScenarioError naming the file. */
export function parseJson(file: string, text: string): unknown {
  try {
    // (A byte-order mark, as some Windows editors write before UTF-8 text, is not JSON's: read past it.)
    return JSON.parse(text.replace(/^\uFEFF/, ""));
  } catch (e) {
    throw new ScenarioError("SCN1001", `not valid JSON: ${(e as Error).message}`, { file });
  }
}
