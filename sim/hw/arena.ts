// Short-lived byte buffers (a packet's payload, from its start to its landing) cut from shared
// slabs. A typed array of more than a few dozen bytes gets a backing store of its own outside the
// JavaScript heap: allocating one per packet zeroed it, registered it with the garbage collector
// and counted it as external memory, which set off collections of its own. A view of a slab is one
// small heap object; a slab is freed when the last view into it is.

/** Bytes a slab holds. */
const SLAB_BYTES = 1 << 20;
/** Requests above this get an allocation of their own (a slab serves at least 16 of them). */
const MAX_CUT = SLAB_BYTES >> 4;

let slab = new Uint8Array(0);
let at = 0;

/** `len` zeroed bytes, for the caller alone (a view of a slab, or an allocation of its own when large). */
export function takeBytes(len: number): Uint8Array {
  if (len > MAX_CUT) return new Uint8Array(len);
  if (at + len > slab.length) {
    slab = new Uint8Array(SLAB_BYTES);
    at = 0;
  }
  const out = slab.subarray(at, at + len);
  at += len;
  return out;
}

/** A copy of `bytes` (see `takeBytes`). */
export function copyBytes(bytes: Uint8Array): Uint8Array {
  const out = takeBytes(bytes.length);
  out.set(bytes);
  return out;
}
