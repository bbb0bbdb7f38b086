// Device HBM as sparse 64 KiB pages; payload ranges can be kept without bytes (timing-only runs).
const PAGE = 65536;

export class DeviceMemory {
  private readonly pages = new Map<number, Uint8Array>();
  private readonly payload: { start: number; end: number }[] = [];
  /** False: payload ranges hold no bytes (reads give zeros, writes are dropped). */
  readonly storePayload: boolean;

  constructor(storePayload: boolean) {
    this.storePayload = storePayload;
  }

  addPayload(start: number, bytes: number): void {
    this.payload.push({ start, end: start + bytes });
  }

  /** True when [off, off+len) lies in a payload range whose bytes are not kept. */
  dropped(off: number, len: number): boolean {
    if (this.storePayload) return false;
    for (const r of this.payload) if (off < r.end && off + len > r.start) return true;
    return false;
  }

  read(off: number, len: number): Uint8Array {
    const out = new Uint8Array(len);
    if (this.dropped(off, len)) return out;
    let done = 0;
    while (done < len) {
      const a = off + done;
      const p = Math.floor(a / PAGE);
      const po = a - p * PAGE;
      const n = Math.min(len - done, PAGE - po);
      const page = this.pages.get(p);
      if (page) out.set(page.subarray(po, po + n), done);
      done += n;
    }
    return out;
  }

  write(off: number, bytes: Uint8Array): void {
    if (this.dropped(off, bytes.length)) return;
    let done = 0;
    while (done < bytes.length) {
      const a = off + done;
      const p = Math.floor(a / PAGE);
      const po = a - p * PAGE;
      const n = Math.min(bytes.length - done, PAGE - po);
      let page = this.pages.get(p);
      if (!page) {
        page = new Uint8Array(PAGE);
        this.pages.set(p, page);
      }
      page.set(bytes.subarray(done, done + n), po);
      done += n;
    }
  }
}
