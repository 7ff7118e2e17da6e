/**
 * The fast way to turn an overlay upper dir into a stored layer (`docker commit`): copy the tree
 * straight into the new layer dir while hashing the layer tar it stands for (diffTar's bytes,
 * never assembled), instead of writing that tar and unpacking it again.
 *
 * The result on disk is what unpackLayer makes of diffTar(upper): same files, owners, modes,
 * whole-second times, xattrs (overlay's own left out), hardlinks, whiteouts as 0/0 devices and
 * opaque dirs as trusted.overlay.opaque=y; the layer size counts the same bytes. Large files are
 * copied by the kernel (fs.copyFile: a reflink where the file system has them, else
 * copy_file_range) on the thread pool, while the event loop hashes the same bytes; small files
 * are read once and written from that buffer.
 *
 * The tree must hold still (container paused or stopped): each file is hashed and copied through
 * one descriptor, and a file whose ctime or size moved meanwhile fails the copy rather than
 * store a layer that differs from its diffID. What only a tar round trip would interpret the same
 * way (names starting with ".wh.", xattr names unpacking refuses) throws NotCopyable, so the
 * caller can take the tar path instead.
 */
import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import type { Digest } from '../lib/digest.js';
import { conflict } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { makeFifo, makeWhiteouts, setXattrs, isWritableXattrName, type XattrItem } from './fs-special.js';
import { diffEntries, tarMtime, type DiffEntry, type DiffTarOptions } from './layer-diff.js';
import { END_OF_ARCHIVE, padding } from './tar-format.js';

/** The tree holds something only the tar path handles as unpacking would. */
export class NotCopyable extends Error {}

const CHUNK = 1024 * 1024;
/** Files this big or more are copied by the kernel; smaller ones through the hashing buffer. */
const KERNEL_COPY_FROM = 128 * 1024;
/** Kernel copies in flight: each holds a thread-pool thread, and reads for the hash need one. */
const COPIES_IN_FLIGHT = 2;
const ZEROS = Buffer.alloc(512);
const { O_RDONLY, O_NOFOLLOW, O_WRONLY, O_CREAT, O_EXCL, COPYFILE_EXCL, COPYFILE_FICLONE } = fs.constants;

export interface CopiedLayer {
  diffId: Digest;
  /** Bytes of the layer tar. */
  tarSize: number;
  /** Bytes of the regular files (hardlinks once), as unpackLayer counts them. */
  size: number;
}

/** Copy the diff of `upper` into `dest`, an existing empty directory. On error the caller removes `dest`. */
export async function copyUpperToLayer(upper: string, dest: string, opts: DiffTarOptions = {}): Promise<CopiedLayer> {
  const c = new Copy(dest);
  try {
    for await (const e of diffEntries(upper, opts)) await c.entry(e);
    c.hashBytes(END_OF_ARCHIVE);
    await c.drain();
  } catch (err) {
    await c.drain().catch(() => undefined); // no copy may still write once the caller cleans up
    throw err;
  } finally {
    c.closeAll();
  }
  await c.finish();
  return { diffId: `sha256:${c.hash.digest('hex')}`, tarSize: c.tarSize, size: c.size };
}

class Copy {
  readonly hash: Hash = createHash('sha256');
  tarSize = 0;
  size = 0;
  readonly #dest: string;
  /** Two buffers: one is hashed while the next chunk is read into the other. */
  readonly #bufs = [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)] as const;
  /** Kernel copies in flight by relative path (a hardlink to one waits for it). */
  readonly #copies = new Map<string, Promise<void>>();
  readonly #fds = new Set<number>();
  readonly #dirTimes: [string, number][] = [];
  readonly #whiteouts: string[] = [];
  readonly #opaque: string[] = [];
  readonly #xattrs: XattrItem[] = [];

  constructor(dest: string) {
    this.#dest = dest;
  }

  #abs(rel: string): string {
    return rel === '' ? this.#dest : `${this.#dest}/${rel}`;
  }

  hashBytes(b: Buffer): void {
    this.hash.update(b);
    this.tarSize += b.length;
  }

  async entry(e: DiffEntry): Promise<void> {
    if (needsTarPath(e)) throw new NotCopyable(`${e.rel}: only the tar path handles it as unpacking would`);
    this.hashBytes(e.header);
    const abs = this.#abs(e.rel);
    switch (e.kind) {
      case 'directory': {
        fs.mkdirSync(abs, 0o700);
        fs.lchownSync(abs, Number(e.st.uid), Number(e.st.gid));
        fs.chmodSync(abs, mode(e.st));
        this.#dirTimes.push([abs, tarMtime(e.st)]);
        break;
      }
      case 'symlink':
        fs.symlinkSync(e.target, abs);
        fs.lchownSync(abs, Number(e.st.uid), Number(e.st.gid));
        fs.lutimesSync(abs, tarMtime(e.st), tarMtime(e.st));
        break;
      case 'fifo':
        await makeFifo(abs);
        fs.lchownSync(abs, Number(e.st.uid), Number(e.st.gid));
        fs.chmodSync(abs, mode(e.st));
        fs.lutimesSync(abs, tarMtime(e.st), tarMtime(e.st));
        break;
      case 'file':
        await this.#file(e, abs);
        this.size += e.size;
        break;
      case 'link':
        await this.#copies.get(e.target);
        fs.linkSync(this.#abs(e.target), abs);
        return;
      case 'whiteout':
        this.#whiteouts.push(abs);
        return;
      case 'opaque':
        this.#opaque.push(abs);
        return;
    }
    for (const [name, value] of e.xattrs) this.#xattrs.push({ path: abs, name, value });
  }

  async #file(e: DiffEntry & { kind: 'file' }, abs: string): Promise<void> {
    const fd = fs.openSync(e.abs, O_RDONLY | O_NOFOLLOW);
    this.#fds.add(fd);
    const before = fs.fstatSync(fd, { bigint: true });
    if (before.ino !== e.st.ino || before.size !== e.st.size) throw changed(e.rel);
    if (e.size < KERNEL_COPY_FROM) {
      const data = await this.#readSmall(fd, e.size, e.rel);
      const out = fs.openSync(abs, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
      try {
        for (let off = 0; off < data.length; ) off += fs.writeSync(out, data, off, data.length - off);
        // chown first: it clears setuid/setgid bits that chmod then sets.
        fs.fchownSync(out, Number(e.st.uid), Number(e.st.gid));
        fs.fchmodSync(out, mode(e.st));
        fs.futimesSync(out, tarMtime(e.st), tarMtime(e.st));
      } finally {
        fs.closeSync(out);
      }
      this.#checkUnchanged(fd, before, e.rel);
      this.#close(fd);
      return;
    }
    while (this.#copies.size >= COPIES_IN_FLIGHT) await Promise.race(this.#copies.values());
    // The kernel copies from this very descriptor's file (its /proc link reopens the inode, not
    // the path), so what is copied is what is hashed.
    const copy = fs.promises
      .copyFile(`/proc/self/fd/${fd}`, abs, COPYFILE_EXCL | COPYFILE_FICLONE)
      .then(() => {
        fs.lchownSync(abs, Number(e.st.uid), Number(e.st.gid));
        fs.chmodSync(abs, mode(e.st));
        fs.utimesSync(abs, tarMtime(e.st), tarMtime(e.st));
      });
    const hashed = this.#hashLarge(fd, e.size, e.rel);
    // The descriptor stays open until both are over: the copy may not have opened its link yet.
    const done = Promise.allSettled([copy, hashed]).then((results) => {
      this.#copies.delete(e.rel);
      try {
        for (const r of results) if (r.status === 'rejected') throw r.reason;
        this.#checkUnchanged(fd, before, e.rel);
        if (fs.statSync(abs).size !== e.size) throw changed(e.rel);
      } finally {
        this.#close(fd);
      }
    });
    done.catch(() => undefined); // awaited by drain() or a later entry; never unhandled
    this.#copies.set(e.rel, done);
    // The archive's next bytes are this file's: hashing must finish before the next entry.
    await hashed;
  }

  /** Read a small file whole into the first buffer and hash it with its tar padding. */
  async #readSmall(fd: number, size: number, rel: string): Promise<Buffer> {
    const buf = this.#bufs[0];
    for (let pos = 0; pos < size; ) {
      const n = await readAt(fd, buf, pos, size - pos, pos);
      if (n === 0) throw changed(rel); // shrank under us
      pos += n;
    }
    const data = buf.subarray(0, size);
    this.hashBytes(data);
    this.#hashPadding(size);
    return data;
  }

  /** Hash `size` bytes of the file with its tar padding, reading one chunk ahead of the hash. */
  async #hashLarge(fd: number, size: number, rel: string): Promise<void> {
    let cur = 0;
    let pos = 0;
    let next: Promise<number> | undefined = readAt(fd, this.#bufs[cur], 0, Math.min(CHUNK, size), 0);
    while (next) {
      const n = await next;
      if (n === 0) throw changed(rel);
      const buf = this.#bufs[cur];
      pos += n;
      cur ^= 1;
      next = pos < size ? readAt(fd, this.#bufs[cur], 0, Math.min(CHUNK, size - pos), pos) : undefined;
      this.hashBytes(buf.subarray(0, n));
    }
    this.#hashPadding(size);
  }

  #hashPadding(size: number): void {
    const pad = padding(size);
    if (pad) this.hashBytes(ZEROS.subarray(0, pad));
  }

  #checkUnchanged(fd: number, before: fs.BigIntStats, rel: string): void {
    const after = fs.fstatSync(fd, { bigint: true });
    if (after.ctimeNs !== before.ctimeNs || after.size !== before.size) throw changed(rel);
  }

  #close(fd: number): void {
    if (this.#fds.delete(fd)) fs.closeSync(fd);
  }

  /** Wait for every kernel copy; throws the first failure. */
  async drain(): Promise<void> {
    const results = await Promise.allSettled([...this.#copies.values()]);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  closeAll(): void {
    for (const fd of this.#fds) this.#close(fd);
  }

  /** What unpacking applies once the tree is there, in the same order: whiteouts, xattrs, directory times. */
  async finish(): Promise<void> {
    await makeWhiteouts(this.#whiteouts);
    await setXattrs(
      this.#opaque.map((path) => ({ path, name: 'trusted.overlay.opaque', value: Buffer.from('y') })),
      { bestEffort: false },
    );
    const problems = await setXattrs(this.#xattrs, { bestEffort: true });
    if (problems.length) log.warn('some xattrs of a committed layer could not be set', { dir: this.#dest, problems: problems.slice(0, 20) });
    for (const [abs, t] of this.#dirTimes) fs.lutimesSync(abs, t, t);
  }
}

/**
 * A name unpacking would read as a whiteout (a file really called ".wh.x" in the upper dir), or
 * an xattr name it refuses: copying would not give what the diffID's tar unpacks to.
 */
function needsTarPath(e: DiffEntry): boolean {
  if (e.kind === 'whiteout' || e.kind === 'opaque') return false;
  if (e.rel.slice(e.rel.lastIndexOf('/') + 1).startsWith('.wh.')) return true;
  return 'xattrs' in e && e.xattrs.some(([name]) => !isWritableXattrName(name));
}

function mode(st: fs.BigIntStats): number {
  return Number(st.mode) & 0o7777;
}

function changed(rel: string): Error {
  return conflict(`${rel} changed while the container was being committed; pause the container or try again`);
}

function readAt(fd: number, buf: Buffer, offset: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => fs.read(fd, buf, offset, length, position, (err, n) => (err ? reject(err) : resolve(n))));
}
