/**
 * Extract one uncompressed layer tar into an empty directory, in the form overlayfs stacks as a
 * lowerdir: OCI whiteouts become whiteout devices and opaque-dir xattrs.
 *
 * Safety: nothing is ever written outside `dir`. Names with ".." are refused, absolute names are
 * taken relative to the layer root, and no symlink is followed while creating: every parent
 * directory of an entry must be a real directory made by this extraction (tracked in a set, so
 * the check costs no syscall), hardlink targets must be files already extracted here, and device
 * nodes are refused. All refusals are BerthError invalid-argument naming the entry.
 *
 * Cost per entry (the common case of a new regular file): open(O_CREAT|O_EXCL) + write(s) +
 * fchown + fchmod + futimes + close, all on the descriptor, synchronously: a small file costs
 * microseconds and one input chunk holds few entries, so the event loop is never held for long.
 * Files over 1 MiB are written with async writes (batched into 1 MiB writevs) so a slow disk cannot
 * stall the loop. Directory mtimes, whiteouts (one batched mknod run) and xattrs (one batched
 * setfattr run) are applied at the end, in that order, so nothing disturbs them afterwards.
 */
import fs from 'node:fs';
import { contentHasher } from '../lib/content-digest.js';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tarStream from 'tar-stream';
import { BerthError, invalidArgument } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { makeFifo, makeWhiteouts, setXattrs, isWritableXattrName, type XattrItem } from './fs-special.js';
import { RawPaxTap } from './raw-pax-tap.js';
import { writeBatched } from '../lib/batched-write.js';

export interface UnpackOptions {
  /** Called with the number of tar bytes read so far. */
  onProgress?: (bytes: number) => void;
  /**
   * Called for each regular file written, with its final stat and the content digest (hex,
   * lib/content-digest.ts) of its content, hashed as it streams by: a caller that needs the digests
   * (the build context) need not read the files again.
   */
  onFileDigest?: (st: fs.Stats, digest: string) => void;
}

export interface UnpackResult {
  /** Sum of the sizes of the regular files written (hardlinks counted once). */
  size: number;
}

/** tar-stream's header, with the two fields its types leave out. */
type Header = Omit<tarStream.Header, 'pax' | 'type'> & {
  type: tarStream.Header['type'] | null;
  pax?: Record<string, string> | null;
  byteOffset?: number;
};
/** tar-stream's entry stream (a streamx Readable): all this module uses of it. */
type EntryData = AsyncIterable<Buffer> & { resume(): unknown };

const WHITEOUT_PREFIX = '.wh.';
const OPAQUE_MARKER = '.wh..wh..opq';
const ASYNC_WRITE_OVER = 1024 * 1024;
const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

/**
 * Read the tar from `src` to its end and extract it into `dir`, an existing empty directory.
 * On error the caller removes `dir`: a half-written tree is never usable.
 */
export async function unpackLayer(src: Readable, dir: string, opts: UnpackOptions = {}): Promise<UnpackResult> {
  const tap = new RawPaxTap(opts.onProgress);
  // Like Go's reader, accept old (pre-POSIX) tar headers too; checksums are still verified.
  const extract = tarStream.extract({ allowUnknownFormat: true } as Parameters<typeof tarStream.extract>[0]);
  const fed = pipeline(src, tap, extract as unknown as NodeJS.WritableStream);
  fed.catch(() => {}); // awaited below; this only keeps an early failure from counting as unhandled
  const x = new Extraction(dir, tap, opts.onFileDigest);
  try {
    for await (const entry of extract) await x.entry(entry.header as Header, entry as unknown as EntryData);
    await fed;
  } catch (err) {
    // Stops the source too: the pipeline tears every stage down.
    extract.destroy();
    await fed.catch(() => {});
    throw asTarError(err);
  }
  await x.finish();
  return { size: x.size };
}

/** tar-stream's complaints about a malformed archive are the layer's fault: invalid-argument. */
function asTarError(err: unknown): unknown {
  if (err instanceof Error && !(err instanceof BerthError) && TAR_STREAM_ERRORS.test(err.message)) {
    return invalidArgument(`invalid layer tar: ${err.message}`, err);
  }
  return err;
}
const TAR_STREAM_ERRORS = /^(Invalid tar header|Unexpected end of data|Header exceeds max size|Invalid header)/;

function refuse(name: string, why: string): Error {
  return invalidArgument(`refusing layer entry ${JSON.stringify(name)}: ${why}`);
}

/** Split a tar name into clean components. "/a" is "a"; "." and empty components go away. */
function components(name: string): string[] {
  if (name.includes('\0')) throw refuse(name, 'name contains a NUL byte');
  const parts: string[] = [];
  for (const p of name.split('/')) {
    if (p === '' || p === '.') continue;
    if (p === '..') throw refuse(name, 'path contains ".." and could escape the layer');
    parts.push(p);
  }
  return parts;
}

function isCode(err: unknown, code: string): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === code;
}

class Extraction {
  size = 0;
  readonly #root: string;
  readonly #tap: RawPaxTap;
  /** Relative paths known to be real directories made by this extraction ('' is the root). */
  readonly #dirs = new Set<string>(['']);
  readonly #dirTimes = new Map<string, number>();
  readonly #whiteouts = new Set<string>();
  readonly #opaque = new Set<string>();
  readonly #xattrs = new Map<string, [string, Buffer][]>();

  readonly #onFileDigest: UnpackOptions['onFileDigest'];

  constructor(root: string, tap: RawPaxTap, onFileDigest?: UnpackOptions['onFileDigest']) {
    this.#root = root;
    this.#tap = tap;
    this.#onFileDigest = onFileDigest;
  }

  #abs(rel: string): string {
    return rel === '' ? this.#root : `${this.#root}/${rel}`;
  }

  async entry(h: Header, data: EntryData): Promise<void> {
    const name = h.name;
    const parts = components(name);
    const rel = parts.join('/');
    const base = parts[parts.length - 1] ?? '';
    const raw = h.byteOffset === undefined ? undefined : this.#tap.xattrs.get(h.byteOffset);
    if (raw) this.#tap.xattrs.delete(h.byteOffset!);

    if (base.startsWith(WHITEOUT_PREFIX)) {
      data.resume();
      this.#whiteout(name, parts);
      return;
    }
    this.#whiteouts.delete(rel); // a later entry wins over an earlier whiteout of the same name

    const uid = paxNumber(h, 'uid') ?? h.uid ?? 0;
    const gid = paxNumber(h, 'gid') ?? h.gid ?? 0;
    const mode = (h.mode ?? 0o644) & 0o7777;
    const mtime = paxNumber(h, 'mtime') ?? (h.mtime ? h.mtime.getTime() / 1000 : 0);

    switch (h.type) {
      case 'directory': {
        data.resume();
        if (rel !== '') {
          this.#parents(name, parts);
          this.#create(rel, true, () => fs.mkdirSync(this.#abs(rel), 0o700));
          this.#dirs.add(rel);
        }
        const abs = this.#abs(rel);
        fs.lchownSync(abs, uid, gid);
        fs.chmodSync(abs, mode);
        this.#dirTimes.set(rel, mtime);
        break;
      }
      case 'file':
      case 'contiguous-file': {
        if (rel === '') throw refuse(name, 'a file cannot replace the layer root');
        this.#parents(name, parts);
        const abs = this.#abs(rel);
        let fd = -1;
        this.#create(rel, false, () => {
          fd = fs.openSync(abs, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
        });
        const hash = this.#onFileDigest ? contentHasher() : undefined;
        try {
          if ((h.size ?? 0) > ASYNC_WRITE_OVER) {
            await writeBatched(fd, data, hash && ((chunk) => hash.update(chunk)));
          } else {
            for await (const chunk of data) {
              writeAllSync(fd, chunk);
              hash?.update(chunk);
            }
          }
          // chown first: it clears setuid/setgid bits that chmod then sets.
          fs.fchownSync(fd, uid, gid);
          fs.fchmodSync(fd, mode);
          fs.futimesSync(fd, mtime, mtime);
          if (hash) this.#onFileDigest!(fs.fstatSync(fd), hash.digest('hex'));
        } finally {
          fs.closeSync(fd);
        }
        this.size += h.size ?? 0;
        break;
      }
      case 'symlink': {
        data.resume();
        if (rel === '') throw refuse(name, 'a symlink cannot replace the layer root');
        if (!h.linkname) throw refuse(name, 'symlink has no target');
        this.#parents(name, parts);
        const abs = this.#abs(rel);
        // The target is stored as text and never followed here: it may point anywhere.
        await this.#createAsync(rel, () => fs.promises.symlink(h.linkname!, abs));
        fs.lchownSync(abs, uid, gid);
        fs.lutimesSync(abs, mtime, mtime);
        break;
      }
      case 'link': {
        data.resume();
        if (rel === '') throw refuse(name, 'a hardlink cannot replace the layer root');
        const target = components(h.linkname ?? '');
        const trel = target.join('/');
        if (trel === rel) return;
        const tparent = target.slice(0, -1).join('/');
        const notHere = `hardlink target ${JSON.stringify(h.linkname)} is not a file extracted from this layer`;
        // The target's directory must be one made here: that rules out symlinked paths too.
        if (trel === '' || !this.#dirs.has(tparent)) throw refuse(name, notHere);
        let st: fs.Stats;
        try {
          st = fs.lstatSync(this.#abs(trel));
        } catch (err) {
          if (isCode(err, 'ENOENT')) throw refuse(name, notHere);
          throw err;
        }
        if (st.isDirectory()) throw refuse(name, 'hardlink to a directory');
        this.#parents(name, parts);
        // link(2) does not follow a symlink target: a link to a symlink links the symlink itself.
        this.#create(rel, false, () => fs.linkSync(this.#abs(trel), this.#abs(rel)));
        return; // the inode already has its owner, mode, times and xattrs
      }
      case 'fifo': {
        data.resume();
        if (rel === '') throw refuse(name, 'a fifo cannot replace the layer root');
        this.#parents(name, parts);
        const abs = this.#abs(rel);
        if (lstatOrUndefined(abs)) this.#remove(rel);
        await makeFifo(abs);
        fs.lchownSync(abs, uid, gid);
        fs.chmodSync(abs, mode);
        fs.lutimesSync(abs, mtime, mtime);
        break;
      }
      case 'character-device':
      case 'block-device':
        throw refuse(name, 'device nodes are not allowed in layers');
      default:
        throw refuse(name, `unsupported tar entry type ${JSON.stringify(h.type ?? 'unknown')}`);
    }
    this.#queueXattrs(name, rel, h, raw);
  }

  #whiteout(name: string, parts: string[]): void {
    const base = parts[parts.length - 1]!;
    this.#parents(name, parts);
    const dirRel = parts.slice(0, -1).join('/');
    if (base === OPAQUE_MARKER) {
      this.#opaque.add(dirRel);
      return;
    }
    if (base.startsWith(WHITEOUT_PREFIX + WHITEOUT_PREFIX)) return; // other AUFS metadata: not needed
    const hidden = base.slice(WHITEOUT_PREFIX.length);
    if (hidden === '' || hidden === '.' || hidden === '..') throw refuse(name, 'invalid whiteout name');
    const rel = dirRel === '' ? hidden : `${dirRel}/${hidden}`;
    if (lstatOrUndefined(this.#abs(rel))) this.#remove(rel);
    this.#whiteouts.add(rel);
  }

  /** Make sure every parent of the entry is a real directory of this extraction, creating missing ones. */
  #parents(name: string, parts: string[]): void {
    if (this.#dirs.has(parts.slice(0, -1).join('/'))) return; // ancestors of a known dir are known
    let rel = '';
    for (let i = 0; i < parts.length - 1; i++) {
      rel = rel === '' ? parts[i]! : `${rel}/${parts[i]}`;
      if (this.#dirs.has(rel)) continue;
      const st = lstatOrUndefined(this.#abs(rel));
      if (!st) {
        fs.mkdirSync(this.#abs(rel), 0o755);
        this.#whiteouts.delete(rel); // an entry under a name whited out earlier brings it back
      } else if (st.isSymbolicLink()) {
        throw refuse(name, `its parent ${JSON.stringify(rel)} is a symlink, which is never followed during extraction`);
      } else if (!st.isDirectory()) {
        throw refuse(name, `its parent ${JSON.stringify(rel)} is not a directory`);
      }
      this.#dirs.add(rel);
    }
  }

  /**
   * Run a create that fails with EEXIST when the name is taken. Tar semantics: a later entry
   * replaces an earlier one, except that a directory over a directory keeps it.
   */
  #create(rel: string, isDir: boolean, make: () => void): void {
    try {
      make();
      return;
    } catch (err) {
      if (!isCode(err, 'EEXIST')) throw err;
    }
    if (this.#makeRoom(rel, isDir)) make();
  }

  /**
   * #create for a make that runs in the thread pool. Symlinks use it: busybox-like layers hold
   * hundreds, and creating an inode right after many were deleted (an image removed, then pulled
   * again) can take a few hundred microseconds on ext4, which must not stall the other layers.
   */
  async #createAsync(rel: string, make: () => Promise<void>): Promise<void> {
    try {
      await make();
      return;
    } catch (err) {
      if (!isCode(err, 'EEXIST')) throw err;
    }
    if (this.#makeRoom(rel, false)) await make();
  }

  /** The name is taken: keep an existing directory for a directory (false), else remove what is there. */
  #makeRoom(rel: string, isDir: boolean): boolean {
    const st = fs.lstatSync(this.#abs(rel));
    if (isDir && st.isDirectory()) return false;
    if (st.isFile() && st.nlink === 1) this.size -= st.size; // it no longer takes space
    this.#remove(rel);
    return true;
  }

  /** Delete an extracted path and forget everything pending under it. */
  #remove(rel: string): void {
    fs.rmSync(this.#abs(rel), { recursive: true, force: true });
    const under = (k: string) => k === rel || k.startsWith(rel + '/');
    for (const set of [this.#dirs, this.#whiteouts, this.#opaque]) for (const k of set) if (under(k)) set.delete(k);
    for (const map of [this.#dirTimes, this.#xattrs]) for (const k of map.keys()) if (under(k)) map.delete(k);
  }

  #queueXattrs(name: string, rel: string, h: Header, raw: Map<string, Buffer> | undefined): void {
    let list: [string, Buffer][] | undefined;
    const add = (key: string, value: Buffer) => {
      // overlay's own attributes would change how the stack is read: only whiteouts may set them.
      if (key.startsWith('trusted.overlay.') || key.startsWith('user.overlay.')) return;
      if (!isWritableXattrName(key)) throw refuse(name, `invalid xattr name ${JSON.stringify(key)}`);
      (list ??= []).push([key, value]);
    };
    if (raw) {
      for (const [key, value] of raw) add(key, value);
    } else if (h.pax) {
      for (const [key, value] of Object.entries(h.pax)) {
        if (key.startsWith('SCHILY.xattr.')) add(key.slice('SCHILY.xattr.'.length), Buffer.from(value, 'utf8'));
      }
    }
    if (list) this.#xattrs.set(rel, list);
    else this.#xattrs.delete(rel);
  }

  /** Apply what had to wait for the whole tree: whiteouts, xattrs, then directory times. */
  async finish(): Promise<void> {
    await makeWhiteouts([...this.#whiteouts].map((rel) => this.#abs(rel)));
    const opaque: XattrItem[] = [...this.#opaque].map((rel) => ({
      path: this.#abs(rel),
      name: 'trusted.overlay.opaque',
      value: Buffer.from('y'),
    }));
    await setXattrs(opaque, { bestEffort: false });
    const items: XattrItem[] = [];
    for (const [rel, list] of this.#xattrs) for (const [name, value] of list) items.push({ path: this.#abs(rel), name, value });
    const problems = await setXattrs(items, { bestEffort: true });
    if (problems.length) log.warn('some xattrs from a layer could not be set', { dir: this.#root, problems: problems.slice(0, 20) });
    for (const [rel, t] of this.#dirTimes) fs.lutimesSync(this.#abs(rel), t, t);
  }
}

function paxNumber(h: Header, key: string): number | undefined {
  const v = h.pax?.[key];
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

function lstatOrUndefined(path: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(path);
  } catch (err) {
    if (isCode(err, 'ENOENT')) return undefined;
    throw err;
  }
}

function writeAllSync(fd: number, buf: Buffer): void {
  for (let off = 0; off < buf.length; ) off += fs.writeSync(fd, buf, off, buf.length - off);
}

