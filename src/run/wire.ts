// Results as JSON text and back, exactly: what a shard writes to its partial file and a merge
// reads again. JSON alone would lose what a run's results hold beyond plain data (Maps, Sets,
// BigInts, typed arrays, undefined in arrays, NaN / Infinity / -0), so those travel as objects
// tagged by a first key that starts with "$"; a plain object with such a key travels escaped.

/** What fromWire cannot read back: why, and where in the data. */
export class WireError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}

type Tagged = { readonly [tag: string]: unknown };

const TYPED = {
  Uint8Array,
  Int8Array,
  Uint16Array,
  Int16Array,
  Uint32Array,
  Int32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
} as const;
type TypedName = keyof typeof TYPED;

/** A value as JSON-safe data (see fromWire). */
export function toWire(v: unknown): unknown {
  if (v === undefined) return { $undefined: 1 };
  if (v === null || typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "number") {
    if (Number.isNaN(v) || !Number.isFinite(v) || Object.is(v, -0)) return { $number: Object.is(v, -0) ? "-0" : String(v) };
    return v;
  }
  if (typeof v === "bigint") return { $bigint: v.toString() };
  if (Array.isArray(v)) return v.map(toWire);
  if (v instanceof Map) return { $map: [...v.entries()].map(([k, x]) => [toWire(k), toWire(x)]) };
  if (v instanceof Set) return { $set: [...v].map(toWire) };
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
    const name = v.constructor.name as TypedName;
    if (!(name in TYPED)) throw new TypeError(`toWire: ${name} is not carried`);
    return { $typed: name, bytes: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") };
  }
  if (typeof v === "object") {
    // (Own properties built by fromEntries: a "__proto__" key stays a key, not the prototype.)
    // An absent optional field and one set to undefined read alike: leave it out.
    const out: Record<string, unknown> = Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => [k, toWire(x)]));
    // A plain object with a "$" key would read as a tag: it travels escaped.
    return Object.keys(out).some((k) => k.startsWith("$")) ? { $object: out } : out;
  }
  throw new TypeError(`toWire: a ${typeof v} is not carried`);
}

/** What toWire made, back as it was; a malformed tag is a WireError naming its path. */
export function fromWire(v: unknown, path = ""): unknown {
  const bad = (why: string): never => {
    throw new WireError(`${why}${path ? ` at ${path}` : ""}`, path);
  };
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map((x, i) => fromWire(x, `${path}[${i}]`));
  const keys = Object.keys(v);
  const t = v as Tagged;
  if (keys.length >= 1 && keys[0]!.startsWith("$")) {
    switch (keys[0]) {
      case "$undefined":
        return undefined;
      case "$number": {
        const s = t["$number"];
        return s === "-0" ? -0 : s === "NaN" ? NaN : s === "Infinity" ? Infinity : s === "-Infinity" ? -Infinity : bad(`not a number tag: ${String(s)}`);
      }
      case "$bigint":
        return typeof t["$bigint"] === "string" && /^-?\d+$/.test(t["$bigint"]) ? BigInt(t["$bigint"]) : bad("not a bigint tag");
      case "$map":
        return Array.isArray(t["$map"]) ? new Map((t["$map"] as unknown[][]).map((e, i) => [fromWire(e[0], `${path}.$map[${i}]`), fromWire(e[1], `${path}.$map[${i}]`)])) : bad("not a map tag");
      case "$set":
        return Array.isArray(t["$set"]) ? new Set((t["$set"] as unknown[]).map((x, i) => fromWire(x, `${path}.$set[${i}]`))) : bad("not a set tag");
      case "$typed": {
        const name = t["$typed"] as TypedName;
        if (!(name in TYPED) || typeof t["bytes"] !== "string") return bad("not a typed-array tag");
        const buf = Buffer.from(t["bytes"], "base64");
        const Ctor = TYPED[name];
        const copy = new Uint8Array(buf.byteLength);
        copy.set(buf);
        if (copy.byteLength % Ctor.BYTES_PER_ELEMENT !== 0) return bad(`a ${name} of ${copy.byteLength} bytes`);
        return new Ctor(copy.buffer, 0, copy.byteLength / Ctor.BYTES_PER_ELEMENT);
      }
      case "$object": {
        const o = t["$object"];
        if (o === null || typeof o !== "object" || Array.isArray(o)) return bad("not an object tag");
        return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, fromWire(x, path ? `${path}.${k}` : k)]));
      }
      default:
        return bad(`unknown tag ${keys[0]}`);
    }
  }
  return Object.fromEntries(keys.map((k) => [k, fromWire(t[k], path ? `${path}.${k}` : k)]));
}
