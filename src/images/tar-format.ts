/**
 * The few pieces of the tar wire format Berth handles itself: PAX records (binary-safe, because
 * xattr values such as security.capability are raw bytes and tar-stream decodes and encodes PAX
 * values as UTF-8 text) and ustar headers for the layer diffs Berth writes.
 */

export const BLOCK = 512;

/** Bytes of zero padding that follow `size` bytes of entry data. */
export function padding(size: number): number {
  const rest = size % BLOCK;
  return rest === 0 ? 0 : BLOCK - rest;
}

/** PAX extended header records: "<len> <key>=<value>\n", values kept as raw bytes. */
export function parsePaxRecords(buf: Buffer): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  let pos = 0;
  while (pos < buf.length) {
    const space = buf.indexOf(0x20, pos);
    if (space < 0) break;
    const len = Number.parseInt(buf.toString('latin1', pos, space), 10);
    if (!Number.isSafeInteger(len) || len <= space - pos || pos + len > buf.length) break;
    const end = pos + len - 1; // the record's trailing "\n"
    const eq = buf.indexOf(0x3d, space + 1);
    if (eq < 0 || eq > end) break;
    out.set(buf.toString('utf8', space + 1, eq), buf.subarray(eq + 1, end));
    pos += len;
  }
  return out;
}

export function encodePaxRecords(records: Iterable<[string, Buffer | string]>): Buffer {
  const parts: Buffer[] = [];
  for (const [key, value] of records) {
    const body = Buffer.concat([Buffer.from(` ${key}=`), Buffer.isBuffer(value) ? value : Buffer.from(value), Buffer.from('\n')]);
    // The length prefix counts its own digits.
    let len = body.length + 1;
    while (String(len).length + body.length !== len) len = String(len).length + body.length;
    parts.push(Buffer.from(String(len)), body);
  }
  return Buffer.concat(parts);
}

export type TarType = 'file' | 'link' | 'symlink' | 'char' | 'block' | 'directory' | 'fifo' | 'pax';
const TYPEFLAG: Record<TarType, string> = {
  file: '0',
  link: '1',
  symlink: '2',
  char: '3',
  block: '4',
  directory: '5',
  fifo: '6',
  pax: 'x',
};

export interface TarHeader {
  name: string;
  type: TarType;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number; // seconds
  linkname?: string;
  devmajor?: number;
  devminor?: number;
}

const MAX_OCTAL_8 = 0o7777777; // 7 digits + NUL
const MAX_OCTAL_12 = 0o77777777777; // 11 digits + NUL
const ASCII_RE = /^[\x20-\x7e]*$/;

/**
 * Encode one entry as ustar header blocks, preceded by a PAX header when the entry needs one
 * (long or non-ASCII names, big ids or sizes, extra records such as xattrs). When a PAX header is
 * written it carries every such field, so readers never see two competing PAX headers.
 */
export function encodeEntryHeader(h: TarHeader, extra: [string, Buffer][] = []): Buffer {
  const pax: [string, Buffer | string][] = [];
  let name = h.name;
  let prefix = '';
  const split = splitUstarName(h.name);
  if (split) [prefix, name] = split;
  else pax.push(['path', h.name]);
  let linkname = h.linkname ?? '';
  if (!ASCII_RE.test(linkname) || linkname.length > 100) {
    pax.push(['linkpath', linkname]);
    linkname = '';
  }
  // Numbers that do not fit their octal field travel in the PAX header; the field holds 0.
  const fit = (key: string, value: number, max: number): number => {
    if (value >= 0 && value <= max) return value;
    pax.push([key, String(value)]);
    return 0;
  };
  const uid = fit('uid', h.uid, MAX_OCTAL_8);
  const gid = fit('gid', h.gid, MAX_OCTAL_8);
  const size = fit('size', h.size, MAX_OCTAL_12);
  const mtime = fit('mtime', h.mtime, MAX_OCTAL_12);
  pax.push(...extra);
  const ustar = ustarBlock(
    { ...h, uid, gid, size, mtime, linkname, name: split ? name : placeholder(h.name) },
    split ? prefix : '',
  );
  if (pax.length === 0) return ustar;
  const records = encodePaxRecords(pax);
  const paxHead = ustarBlock({ name: 'PaxHeader', type: 'pax', mode: 0o644, uid: 0, gid: 0, size: records.length, mtime: 0 }, '');
  return Buffer.concat([paxHead, records, Buffer.alloc(padding(records.length)), ustar]);
}

/** ustar keeps a 155-byte prefix and a 100-byte name, split at a "/". ASCII only here. */
function splitUstarName(full: string): [string, string] | undefined {
  if (!ASCII_RE.test(full)) return undefined;
  if (full.length <= 100) return ['', full];
  for (let i = full.indexOf('/'); i >= 0; i = full.indexOf('/', i + 1)) {
    if (i > 155) break;
    if (full.length - i - 1 <= 100 && i > 0 && i < full.length - 1) return [full.slice(0, i), full.slice(i + 1)];
  }
  return undefined;
}

/** An ASCII stand-in for the ustar name field when the real name travels in the PAX header. */
function placeholder(full: string): string {
  const base = full.replace(/\/+$/, '').split('/').pop() ?? '';
  const safe = base.replace(/[^\x20-\x7e]/g, '_').slice(0, 90);
  return `PaxHeaders/${safe}`.slice(0, 99);
}

function ustarBlock(h: TarHeader, prefix: string): Buffer {
  const b = Buffer.alloc(BLOCK);
  b.write(h.name, 0, 100, 'utf8');
  octal(b, 100, 8, h.mode & 0o7777);
  octal(b, 108, 8, h.uid);
  octal(b, 116, 8, h.gid);
  octal(b, 124, 12, h.size);
  octal(b, 136, 12, h.mtime);
  b.write(TYPEFLAG[h.type], 156, 1, 'latin1');
  if (h.linkname) b.write(h.linkname, 157, 100, 'utf8');
  b.write('ustar\x0000', 257, 8, 'latin1');
  octal(b, 329, 8, h.devmajor ?? 0);
  octal(b, 337, 8, h.devminor ?? 0);
  if (prefix) b.write(prefix, 345, 155, 'utf8');
  // The checksum is computed with its own field read as eight spaces.
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += b[i]!;
  b.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8, 'latin1');
  return b;
}

function octal(b: Buffer, off: number, width: number, value: number): void {
  b.write(Math.trunc(value).toString(8).padStart(width - 1, '0') + '\0', off, width, 'latin1');
}

/** The two zero blocks that end an archive. */
export const END_OF_ARCHIVE = Buffer.alloc(2 * BLOCK);
