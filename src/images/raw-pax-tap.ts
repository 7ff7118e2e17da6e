import { Transform, type TransformCallback } from 'node:stream';
import { BLOCK, padding, parsePaxRecords } from './tar-format.js';

/**
 * A pass-through that walks the tar block structure beside tar-stream and keeps the raw bytes of
 * PAX `SCHILY.xattr.*` records, which tar-stream only hands out decoded as UTF-8 (lossy for binary
 * values like security.capability). Records are keyed by the byte offset of the entry's data,
 * which is what tar-stream reports as `header.byteOffset`, so the two parsers meet on an exact
 * key. If the walk ever meets a header it cannot read, it stops looking (the caller then falls
 * back to tar-stream's decoded values); tar-stream itself reports the broken archive.
 *
 * It also counts bytes for progress reports.
 */
export class RawPaxTap extends Transform {
  /** Data offset of an entry → its xattrs (name without the SCHILY.xattr. prefix → raw value). */
  readonly xattrs = new Map<number, Map<string, Buffer>>();
  bytes = 0;
  readonly #onProgress: ((bytes: number) => void) | undefined;

  #pos = 0; // absolute offset of the next byte to look at
  #skip = 0; // bytes of entry data (and padding) still to pass over
  #header = Buffer.alloc(BLOCK);
  #headerFill = 0;
  #long: { kind: 'pax' | 'global' | 'other'; need: number; pad: number; parts: Buffer[] } | undefined;
  #pax: Map<string, Buffer> | undefined; // PAX records waiting for their entry
  #global: Map<string, Buffer> | undefined;
  #lost = false;

  constructor(onProgress?: (bytes: number) => void) {
    super();
    this.#onProgress = onProgress;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    if (!this.#lost) this.#walk(chunk);
    this.#onProgress?.(this.bytes);
    cb(null, chunk);
  }

  #walk(chunk: Buffer): void {
    const base = this.#pos;
    let i = 0;
    while (i < chunk.length && !this.#lost) {
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, chunk.length - i);
        this.#skip -= n;
        i += n;
        continue;
      }
      const long = this.#long;
      if (long) {
        const n = Math.min(long.need, chunk.length - i);
        if (long.kind !== 'other') long.parts.push(chunk.subarray(i, i + n));
        long.need -= n;
        i += n;
        if (long.need === 0) {
          this.#long = undefined;
          this.#skip = long.pad;
          this.#endLong(long.kind, Buffer.concat(long.parts));
        }
        continue;
      }
      const n = Math.min(BLOCK - this.#headerFill, chunk.length - i);
      chunk.copy(this.#header, this.#headerFill, i, i + n);
      this.#headerFill += n;
      i += n;
      if (this.#headerFill === BLOCK) {
        this.#headerFill = 0;
        // The entry's data starts right after its header: where tar-stream's byteOffset points.
        this.#onHeader(this.#header, base + i);
      }
    }
    this.#pos += chunk.length;
  }

  #endLong(kind: 'pax' | 'global' | 'other', data: Buffer): void {
    if (kind === 'other') return;
    const records = parsePaxRecords(data);
    if (kind === 'global') this.#global = records;
    else this.#pax = this.#global ? new Map([...this.#global, ...records]) : records;
  }

  /** Mirrors tar-stream's reading of one header block (same types, same size rules). */
  #onHeader(h: Buffer, dataOffset: number): void {
    let sum = 8 * 32;
    for (let k = 0; k < 148; k++) sum += h[k]!;
    for (let k = 156; k < BLOCK; k++) sum += h[k]!;
    if (sum === 8 * 32) return; // a zero block: tar-stream skips these too
    if (sum !== readNumber(h, 148, 8)) {
      this.#lost = true;
      return;
    }
    let flag = h[156] === 0 ? 0 : h[156]! - 48;
    const size = readNumber(h, 124, 12);
    if (flag === 72 || flag === 55 || flag === 27 || flag === 28 || flag === 30) {
      const kind = flag === 72 ? 'pax' : flag === 55 ? 'global' : 'other';
      if (size > 4 * 1024 * 1024) {
        this.#lost = true;
        return;
      }
      this.#long = { kind, need: size, pad: padding(size), parts: [] };
      if (size === 0) {
        this.#long = undefined;
        this.#endLong(kind, Buffer.alloc(0));
      }
      return;
    }
    const nameEnd = h.indexOf(0, 0);
    const lastNameByte = h[(nameEnd < 0 || nameEnd > 100 ? 100 : nameEnd) - 1];
    if (flag === 0 && lastNameByte === 0x2f) flag = 5;
    const pax = this.#pax;
    this.#pax = undefined;
    let dataSize = size;
    const paxSize = pax?.get('size');
    if (paxSize) dataSize = Number.parseInt(paxSize.toString('latin1'), 10);
    if (pax) {
      let x: Map<string, Buffer> | undefined;
      for (const [key, value] of pax) {
        if (!key.startsWith('SCHILY.xattr.')) continue;
        (x ??= new Map()).set(key.slice('SCHILY.xattr.'.length), value);
      }
      if (x) this.xattrs.set(dataOffset, x);
    }
    if (!(dataSize >= 0)) {
      this.#lost = true;
      return;
    }
    // tar-stream reads no data for directories, whatever their size field says.
    if (flag !== 5) this.#skip = dataSize + padding(dataSize);
  }
}

/** tar numeric field: octal text, or base-256 when the high bit of the first byte is set. */
function readNumber(b: Buffer, off: number, len: number): number {
  if (b[off]! & 0x80) {
    let v = 0;
    for (let k = off + 1; k < off + len; k++) v = v * 256 + b[k]!;
    return b[off] === 0x80 ? v : -1; // negative numbers are never valid here
  }
  let s = off;
  const end = off + len;
  while (s < end && b[s] === 0x20) s++;
  while (s < end && b[s] === 0) s++;
  let e = s;
  while (e < end && b[e] !== 0x20 && b[e] !== 0) e++;
  if (e === s) return 0;
  return Number.parseInt(b.toString('latin1', s, e), 8);
}
