/**
 * The layer tar of an overlayfs upper directory, for `docker commit`: every file, directory,
 * symlink, hardlink and fifo with owner, mode, mtime and xattrs; overlay whiteouts (character
 * devices 0/0) become `.wh.<name>` entries and opaque directories (trusted.overlay.opaque=y)
 * get a `<dir>/.wh..wh..opq` entry. Entries come in sorted order, so the same tree always
 * gives the same bytes (and so the same diffID). Streamed, with backpressure: file data is read
 * only as fast as the consumer takes it.
 *
 * Left out: overlay's own xattrs (trusted.overlay.*, user.overlay.*) and security.selinux (a
 * label of this host, not of the image); sockets (tar cannot hold them); device nodes other
 * than whiteouts, which Berth refuses when unpacking, so an image holding them could not run.
 * Whole-second mtimes, numeric ids only, as dockerd writes them.
 */
import { constants, read, type BigIntStats } from 'node:fs';
import fs from 'node:fs/promises';
import { Readable } from 'node:stream';
import { internal } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { readXattrsTree } from './fs-special.js';
import { END_OF_ARCHIVE, encodeEntryHeader, padding, type TarHeader } from './tar-format.js';

const CHUNK = 256 * 1024;
const OPAQUE_XATTR = 'trusted.overlay.opaque';

// Upper dirs written with these features do not hold the full change (a renamed dir keeps its
// content in the lower layer; a metacopy file has no data): the runtime must mount overlays
// with redirect_dir=off,metacopy=off, and a diff of such a dir fails rather than lie.
const UNSUPPORTED_XATTRS = ['trusted.overlay.redirect', 'trusted.overlay.metacopy'];

/** Which xattrs getfattr results are kept: the ones written out plus the ones only read here. */
function keepXattr(name: string): boolean {
  if (readOnlyXattr(name)) return true;
  return !name.startsWith('trusted.overlay.') && !name.startsWith('user.overlay.') && name !== 'security.selinux';
}

export interface DiffTarOptions {
  /** Paths (relative, no leading slash) to leave out with everything under them. */
  skip?: (relPath: string) => boolean;
  /** The upper dir's xattrs when the caller already read them (readUpperXattrs). */
  xattrs?: UpperXattrs;
}

/** Absolute path → the xattrs a diff looks at, in name order. */
export type UpperXattrs = Map<string, [string, Buffer][]>;

/** Every xattr of the tree that matters to its diff, in one getfattr run. */
export function readUpperXattrs(upperDir: string): Promise<UpperXattrs> {
  return readXattrsTree(upperDir.replace(/\/+$/, ''), keepXattr);
}

/** Whether `absPath` (as listed by readUpperXattrs) is an opaque directory. */
export function isOpaqueIn(xattrs: UpperXattrs, absPath: string): boolean {
  return isOpaque(xattrs.get(absPath));
}

/**
 * One entry of the diff, in archive order: its encoded tar header (PAX records included) and
 * what it stands for, so a consumer can rebuild it elsewhere as well as archive it.
 */
export type DiffEntry =
  | (DiffNode & { kind: 'directory' | 'fifo' })
  | (DiffNode & { kind: 'symlink'; target: string })
  /** A regular file: `size` bytes of data and their padding follow the header in the archive. */
  | (DiffNode & { kind: 'file'; size: number })
  /** A second name of a file already in the diff under `target`. */
  | { kind: 'link'; rel: string; target: string; header: Buffer }
  /** `rel` was deleted (its `.wh.` entry), or directory `rel` ('' for the root) is opaque. */
  | { kind: 'whiteout' | 'opaque'; rel: string; header: Buffer };

interface DiffNode {
  rel: string;
  abs: string;
  st: BigIntStats;
  header: Buffer;
  /** The xattrs written out (as SCHILY.xattr.* records), in name order. */
  xattrs: [string, Buffer][];
}

export function diffTar(upperDir: string, opts: DiffTarOptions = {}): Readable {
  return Readable.from(generate(upperDir, opts), { objectMode: false, highWaterMark: CHUNK });
}

async function* generate(upperDir: string, opts: DiffTarOptions): AsyncGenerator<Buffer> {
  for await (const e of diffEntries(upperDir, opts)) {
    yield e.header;
    if (e.kind === 'file') yield* fileData(e.abs, e.size);
  }
  yield END_OF_ARCHIVE;
}

interface Walk {
  xattrs: Map<string, [string, Buffer][]>;
  /** dev:ino of files with several links → the name the first one was written under */
  links: Map<string, string>;
  skip?: (relPath: string) => boolean;
}

/** The entries of the diff of `upperDir`, in archive order (the archive ends with END_OF_ARCHIVE). */
export async function* diffEntries(upperDir: string, opts: DiffTarOptions = {}): AsyncGenerator<DiffEntry> {
  const root = upperDir.replace(/\/+$/, '');
  const w: Walk = { xattrs: opts.xattrs ?? (await readUpperXattrs(root)), links: new Map(), skip: opts.skip };
  const rootStat = await fs.lstat(root, { bigint: true });
  if (isOpaque(w.xattrs.get(root))) yield { kind: 'opaque', rel: '', header: opaqueMarker('', rootStat) };
  yield* walk(w, root, '');
}

async function* walk(w: Walk, absDir: string, relDir: string): AsyncGenerator<DiffEntry> {
  const names = (await fs.readdir(absDir)).sort(byteOrder);
  for (const name of names) {
    const abs = `${absDir}/${name}`;
    const rel = relDir ? `${relDir}/${name}` : name;
    if (w.skip?.(rel)) continue;
    const st = await fs.lstat(abs, { bigint: true });
    const x = w.xattrs.get(abs);
    const odd = x?.find(([k]) => UNSUPPORTED_XATTRS.includes(k));
    if (odd) throw internal(`cannot diff ${rel}: it carries ${odd[0]} (overlay mounted with redirect_dir or metacopy on)`);
    const xattrs = (x ?? []).filter(([k]) => !readOnlyXattr(k));
    const extra: [string, Buffer][] = xattrs.map(([k, v]) => [`SCHILY.xattr.${k}`, v]);
    const base = meta(st);
    if (st.isDirectory()) {
      yield { kind: 'directory', rel, abs, st, xattrs, header: encodeEntryHeader({ ...base, name: `${rel}/`, type: 'directory', size: 0 }, extra) };
      if (isOpaque(x)) yield { kind: 'opaque', rel, header: opaqueMarker(rel, st) };
      yield* walk(w, abs, rel);
    } else if (st.isCharacterDevice() && st.rdev === 0n) {
      const wh = relDir ? `${relDir}/.wh.${name}` : `.wh.${name}`;
      yield { kind: 'whiteout', rel, header: encodeEntryHeader({ ...base, name: wh, type: 'file', mode: 0o600, size: 0 }) };
    } else if (st.isSymbolicLink()) {
      const target = await fs.readlink(abs);
      yield { kind: 'symlink', rel, abs, st, xattrs, target, header: encodeEntryHeader({ ...base, name: rel, type: 'symlink', size: 0, linkname: target }, extra) };
    } else if (st.isFIFO()) {
      yield { kind: 'fifo', rel, abs, st, xattrs, header: encodeEntryHeader({ ...base, name: rel, type: 'fifo', size: 0 }, extra) };
    } else if (st.isFile()) {
      if (st.nlink > 1n) {
        const key = `${st.dev}:${st.ino}`;
        const first = w.links.get(key);
        if (first !== undefined) {
          yield { kind: 'link', rel, target: first, header: encodeEntryHeader({ ...base, name: rel, type: 'link', size: 0, linkname: first }) };
          continue;
        }
        w.links.set(key, rel);
      }
      const size = Number(st.size);
      yield { kind: 'file', rel, abs, st, xattrs, size, header: encodeEntryHeader({ ...base, name: rel, type: 'file', size }, extra) };
    } else {
      log.warn('commit: skipping a file tar cannot hold or Berth will not unpack', { path: rel, mode: Number(st.mode) });
    }
  }
}

/** The tar mtime of a file: whole seconds, as dockerd writes them. */
export function tarMtime(st: BigIntStats): number {
  return Number(st.mtimeMs / 1000n);
}

function meta(st: BigIntStats): Omit<TarHeader, 'name' | 'type' | 'size'> {
  return {
    mode: Number(st.mode) & 0o7777,
    uid: Number(st.uid),
    gid: Number(st.gid),
    mtime: tarMtime(st),
  };
}

function readOnlyXattr(name: string): boolean {
  return name === OPAQUE_XATTR || UNSUPPORTED_XATTRS.includes(name);
}

function isOpaque(x: [string, Buffer][] | undefined): boolean {
  return x?.some(([k, v]) => k === OPAQUE_XATTR && v.toString('latin1') === 'y') ?? false;
}

/** `<dir>/.wh..wh..opq`: an empty file with the directory's owner, permissions and time. */
function opaqueMarker(rel: string, dir: BigIntStats): Buffer {
  const m = meta(dir);
  return encodeEntryHeader({ ...m, mode: m.mode & 0o777, name: rel ? `${rel}/.wh..wh..opq` : '.wh..wh..opq', type: 'file', size: 0 });
}

/** Exactly `size` bytes of the file plus padding; a file that shrank meanwhile is zero-filled. */
async function* fileData(abs: string, size: number): AsyncGenerator<Buffer> {
  // O_NONBLOCK: a running container (commit with pause=false) may have swapped the file for a FIFO
  // since it was listed; opening that must not wait for a writer, and fstat then refuses it.
  const fh = await fs.open(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    if (!(await fh.stat()).isFile()) throw new Error(`${abs}: changed to a non-regular file while being packed`);
    yield* sizedData(fh.fd, size);
  } finally {
    await fh.close();
  }
}

const readAt = (fd: number, buf: Buffer, pos: number) =>
  new Promise<number>((resolve, reject) => read(fd, buf, 0, buf.length, pos, (err, n) => (err ? reject(err) : resolve(n))));

/**
 * A tar entry's data from an open file: exactly `size` bytes (a file that shrank meanwhile is
 * zero-filled, one that grew is cut) and the padding.
 */
export async function* sizedData(fd: number, size: number): AsyncGenerator<Buffer> {
  let done = 0;
  while (done < size) {
    const buf = Buffer.allocUnsafe(Math.min(CHUNK, size - done));
    const n = await readAt(fd, buf, done);
    if (n === 0) {
      buf.fill(0);
      done += buf.length;
      yield buf;
      continue;
    }
    done += n;
    yield buf.subarray(0, n);
  }
  const pad = padding(size);
  if (pad) yield Buffer.alloc(pad);
}

/** Sort names by their UTF-8 bytes, as Go's tar tooling does. */
function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
