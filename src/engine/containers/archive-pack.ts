/**
 * The tar of a path inside a container, streamed (GET /containers/{id}/archive), named as dockerd
 * names it: a directory's entries under the path's base name (`dir/`, `dir/a`...), or `./` ones
 * for a path ending in `/.`; anything else one entry named after the path. Symlinks are archived
 * as links, never followed; a directory that is a mount's destination is archived from the
 * mount's source, as the container sees it.
 *
 * Every step goes through descriptors: a directory is listed through its own descriptor, each
 * name in it is lstat'ed, then opened with O_NOFOLLOW (O_NONBLOCK for files) and checked to be the
 * same inode, so a running container that swaps a name for a link meanwhile gets an error, never
 * a read outside its root. FIFOs and devices are archived as such, never opened.
 */
import { closeSync, constants, fstatSync, open, openSync, read, readSync, type Stats } from 'node:fs';
import fsp from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { promisify } from 'node:util';
import { at, fstatPath, type ContainerView, type ResolvedPath } from '../../lib/in-root-fs.js';
import { encodeEntryHeader, END_OF_ARCHIVE, padding, type TarHeader } from '../../images/tar-format.js';

const openFd = promisify(open) as (path: string, flags: number, mode?: number) => Promise<number>;
const O_PATH = 0o10000000;
/** Reads of large files, and the size of what the stream hands on (small entries are gathered). */
const CHUNK = 1024 * 1024;
/** Buffers a pack may have out at once (read ahead or in the socket's queue). */
const POOL_MAX = 6;
/** Files up to this size are read synchronously in the rootfs, straight into the output batch. */
const SYNC_READ_MAX = 256 * 1024;

/**
 * The buffers the tar is written in, given back once the socket has taken them: a 100 MB tree
 * would otherwise allocate 100 MB of fresh ArrayBuffers, and V8 answers that much external memory
 * with a full GC every few tens of MB (half a dozen per `docker cp` out of 100 MB). At most
 * POOL_MAX exist, so the pool is also the stream's backpressure.
 */
class BufferPool {
  readonly #free: Buffer[] = [];
  readonly #mine = new WeakSet<ArrayBufferLike>();
  #waiting: (() => void) | undefined;
  #made = 0;
  #closed = false;

  async take(): Promise<Buffer> {
    for (;;) {
      if (this.#closed) throw new Error('the connection closed before the archive was sent');
      const b = this.#free.pop();
      if (b) return b;
      if (this.#made < POOL_MAX) {
        this.#made++;
        // One padding block more than CHUNK: a large file's last read carries its padding.
        const fresh = Buffer.allocUnsafeSlow(CHUNK + 512);
        this.#mine.add(fresh.buffer);
        return fresh;
      }
      await new Promise<void>((resolve) => (this.#waiting = resolve));
    }
  }

  /** The output is gone: a take() waiting for a buffer it still holds fails instead. */
  close(): void {
    this.#closed = true;
    const w = this.#waiting;
    this.#waiting = undefined;
    w?.();
  }

  /** `b` (or a view of one of the pool's buffers) is no longer in use. */
  give(b: Buffer): void {
    if (!this.#mine.has(b.buffer)) return;
    this.#free.push(Buffer.from(b.buffer, 0, CHUNK + 512));
    const w = this.#waiting;
    this.#waiting = undefined;
    w?.();
  }
}

/**
 * Output gathered into CHUNK-sized buffers: a tree of small files is thousands of entries of a few
 * KiB, and handing each on alone costs a generator step and a socket write apiece.
 */
class Batch {
  #buf: Buffer | undefined;
  #len = 0;

  constructor(readonly pool: BufferPool) {}

  /** The buffer to fill, taken from the pool when there is none. */
  async buffer(): Promise<Buffer> {
    this.#buf ??= await this.pool.take();
    return this.#buf;
  }

  /** Room for `n` more bytes in the current buffer (see buffer()), or false (take() first). */
  fits(n: number): boolean {
    return this.#len + n <= CHUNK;
  }

  get length(): number {
    return this.#len;
  }

  /** Marks `n` bytes written at the old length. */
  advance(n: number): void {
    this.#len += n;
  }

  /** What was gathered; undefined when empty. */
  take(): Buffer | undefined {
    if (this.#len === 0 || !this.#buf) return undefined;
    const out = this.#buf.subarray(0, this.#len);
    this.#buf = undefined;
    this.#len = 0;
    return out;
  }

  /** `b` appended, flushing first when it does not fit; yields what must go out now. */
  async *push(b: Buffer): AsyncGenerator<Buffer> {
    if (!this.fits(b.length)) {
      const out = this.take();
      if (out) yield out;
    }
    if (b.length >= CHUNK) {
      yield b; // not the pool's: give() passes it by
      return;
    }
    b.copy(await this.buffer(), this.#len);
    this.#len += b.length;
  }
}

/** What a pack walks from: the resolved path (its descriptor is taken over) and its tar name. */
export interface PackSource {
  start: ResolvedPath;
  /** The name the top entry gets: the base name of the path, `.` for `dir/.`, '' for `/`. */
  rebase: string;
  /** The top entry's link text, when it is a symlink. */
  linkTarget?: string;
}

/** A pack ready to be written: `writeTo` streams it into `out` (ending it) and settles when done. */
export interface Pack {
  writeTo(out: Writable): Promise<void>;
}

export function packPath(view: ContainerView, src: PackSource): Pack {
  return {
    async writeTo(out: Writable): Promise<void> {
      const pool = new BufferPool();
      const closed = () => pool.close();
      out.once('close', closed);
      try {
        for await (const chunk of entries(view, src, pool)) {
          if (out.destroyed) throw new Error('the connection closed before the archive was sent');
          // The callback comes when the socket has the bytes (or has failed): the buffer is free.
          if (!out.write(chunk, () => pool.give(chunk))) await drained(out);
        }
        out.end();
        await finished(out); // rejects when the connection closes first
      } finally {
        out.off('close', closed);
      }
    },
  };
}

function drained(out: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      out.off('drain', onDrain);
      out.off('close', onClose);
      if (err) reject(err);
      else resolve();
    };
    const onDrain = () => done();
    const onClose = () => done(new Error('the connection closed before the archive was sent'));
    out.on('drain', onDrain);
    out.on('close', onClose);
  });
}

async function* entries(view: ContainerView, src: PackSource, pool: BufferPool): AsyncGenerator<Buffer> {
  const links = new Map<string, string>();
  const out = new Batch(pool);
  try {
    const st = fstatPath(src.start.fd);
    if (st.isDirectory()) {
      yield* dirTree(view, src.start.fd, src.start.path, src.rebase, st, links, !src.start.mount, out);
    } else {
      yield* oneEntry(src.start.fd, src.rebase, st, links, async () => src.linkTarget ?? '', !src.start.mount, out);
    }
    yield* out.push(END_OF_ARCHIVE);
    const rest = out.take();
    if (rest) yield rest;
  } finally {
    closeSync(src.start.fd);
  }
}

function header(name: string, st: Stats, type: TarHeader['type'], extra: Partial<TarHeader> = {}): Buffer {
  return encodeEntryHeader({ name, type, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid, size: 0, mtime: Math.floor(st.mtimeMs / 1000), ...extra });
}

/** A directory (its descriptor O_PATH) and everything under it, names sorted as Go's walk sorts them. */
/**
 * `local`: in the rootfs (an overlay, where nothing can make a call wait), so the per-entry steps
 * run synchronously (microseconds each, instead of a pool round trip each); in a mount's source
 * (possibly a network file system) they stay asynchronous.
 */
async function* dirTree(view: ContainerView, dirFd: number, cpath: string, name: string, st: Stats, links: Map<string, string>, local: boolean, out: Batch): AsyncGenerator<Buffer> {
  yield* out.push(header(`${name}/`, st, 'directory'));
  const names = (await fsp.readdir(at(dirFd))).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const child of names) {
    const childCpath = cpath === '/' ? `/${child}` : `${cpath}/${child}`;
    const childName = `${name}/${child}`;
    const mount = view.mountAt(childCpath);
    let fd: number;
    let cst: Stats;
    if (mount) {
      fd = await openFd(mount.source, O_PATH);
      cst = fstatSync(fd);
    } else {
      // O_PATH opens nothing for real (a FIFO or device stays untouched) and O_NOFOLLOW takes a
      // link as itself: fstat of this descriptor is what gets archived, whatever the name is later.
      try {
        fd = local ? openSync(at(dirFd, child), O_PATH | constants.O_NOFOLLOW) : await openFd(at(dirFd, child), O_PATH | constants.O_NOFOLLOW);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // removed meanwhile
        throw err;
      }
      cst = fstatSync(fd);
      if (cst.isSocket()) {
        closeSync(fd);
        continue; // tar has no sockets
      }
    }
    try {
      const childLocal = local && !mount;
      if (cst.isDirectory()) yield* dirTree(view, fd, childCpath, childName, cst, links, childLocal, out);
      else yield* oneEntry(fd, childName, cst, links, () => fsp.readlink(at(dirFd, child)), childLocal, out);
    } finally {
      closeSync(fd);
    }
  }
}

/** One non-directory entry; `fd` is an O_PATH descriptor of it. */
async function* oneEntry(fd: number, name: string, st: Stats, links: Map<string, string>, readLink: () => Promise<string>, local: boolean, out: Batch): AsyncGenerator<Buffer> {
  if (st.isSymbolicLink()) {
    // By name in its directory: the link text is only text, whatever a swap makes it.
    yield* out.push(header(name, st, 'symlink', { linkname: await readLink() }));
    return;
  }
  if (st.isFIFO()) {
    yield* out.push(header(name, st, 'fifo'));
    return;
  }
  if (st.isCharacterDevice() || st.isBlockDevice()) {
    const rdev = BigInt(st.rdev);
    const devmajor = Number(((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & ~0xfffn));
    const devminor = Number((rdev & 0xffn) | ((rdev >> 12n) & ~0xffn));
    yield* out.push(header(name, st, st.isCharacterDevice() ? 'char' : 'block', { devmajor, devminor }));
    return;
  }
  if (!st.isFile()) return;
  if (st.nlink > 1) {
    const key = `${st.dev}:${st.ino}`;
    const first = links.get(key);
    if (first !== undefined) {
      yield* out.push(header(name, st, 'link', { linkname: first }));
      return;
    }
    links.set(key, name);
  }
  // Reopened through the descriptor: the same inode that was checked, read without blocking.
  const rflags = constants.O_RDONLY | constants.O_NONBLOCK;
  const rfd = local ? openSync(at(fd), rflags) : await openFd(at(fd), rflags);
  try {
    const fst = fstatSync(rfd);
    if (!fst.isFile() || fst.ino !== st.ino) throw new Error(`${name} changed while it was being archived`);
    const size = fst.size;
    const head = header(name, fst, 'file', { size });
    if (local && size <= SYNC_READ_MAX) {
      // Header, data and padding straight into the batch, read synchronously.
      const total = head.length + size + padding(size);
      if (!out.fits(total)) {
        const full = out.take();
        if (full) yield full;
      }
      const buf = await out.buffer();
      const start = out.length;
      head.copy(buf, start);
      const data = start + head.length;
      let done = 0;
      while (done < size) {
        const n = readSync(rfd, buf, data + done, size - done, done);
        if (n === 0) break; // shrank meanwhile: the rest is zeros
        done += n;
      }
      buf.fill(0, data + done, start + total);
      out.advance(total);
      return;
    }
    yield* out.push(head);
    const full = out.take();
    if (full) yield full;
    yield* fileData(rfd, size, out.pool);
  } finally {
    closeSync(rfd);
  }
}

const readAt = (fd: number, buf: Buffer, pos: number) =>
  new Promise<number>((resolve, reject) => read(fd, buf, 0, buf.length, pos, (err, n) => (err ? reject(err) : resolve(n))));

/**
 * A large file's data in CHUNK reads off the loop: exactly `size` bytes (a file that shrank
 * meanwhile is zero-filled, one that grew is cut), the padding in the last buffer; the buffers
 * are the pool's.
 */
async function* fileData(fd: number, size: number, pool: BufferPool): AsyncGenerator<Buffer> {
  const pad = padding(size);
  let done = 0;
  while (done < size) {
    const want = Math.min(CHUNK, size - done);
    const last = done + want === size;
    const buf = (await pool.take()).subarray(0, want + (last ? pad : 0));
    let got = 0;
    while (got < want) {
      const n = await readAt(fd, buf.subarray(got, want), done + got);
      if (n === 0) break;
      got += n;
    }
    buf.fill(0, got);
    done += want;
    yield buf;
  }
}
