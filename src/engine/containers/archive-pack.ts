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
import { closeSync, constants, fstatSync, lstatSync, open, openSync, readSync, type Stats } from 'node:fs';
import fsp from 'node:fs/promises';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { at, fstatPath, type ContainerView, type ResolvedPath } from '../../lib/in-root-fs.js';
import { encodeEntryHeader, END_OF_ARCHIVE, padding, type TarHeader } from '../../images/tar-format.js';
import { sizedData } from '../../images/layer-diff.js';

const openFd = promisify(open) as (path: string, flags: number, mode?: number) => Promise<number>;
const O_PATH = 0o10000000;
const CHUNK = 256 * 1024;
/** Files up to this size are read synchronously in the rootfs, header and all in one buffer. */
const SYNC_READ_MAX = 256 * 1024;

/** What a pack walks from: the resolved path (its descriptor is taken over) and its tar name. */
export interface PackSource {
  start: ResolvedPath;
  /** The name the top entry gets: the base name of the path, `.` for `dir/.`, '' for `/`. */
  rebase: string;
  /** The top entry's link text, when it is a symlink. */
  linkTarget?: string;
}

export function packPath(view: ContainerView, src: PackSource): Readable {
  const gen = entries(view, src);
  return Readable.from(gen, { objectMode: false, highWaterMark: 4 * CHUNK });
}

async function* entries(view: ContainerView, src: PackSource): AsyncGenerator<Buffer> {
  const links = new Map<string, string>();
  try {
    const st = fstatPath(src.start.fd);
    if (st.isDirectory()) {
      yield* dirTree(view, src.start.fd, src.start.path, src.rebase, st, links, !src.start.mount);
    } else {
      yield* oneEntry(src.start.fd, src.rebase, st, links, async () => src.linkTarget ?? '', !src.start.mount);
    }
    yield END_OF_ARCHIVE;
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
async function* dirTree(view: ContainerView, dirFd: number, cpath: string, name: string, st: Stats, links: Map<string, string>, local: boolean): AsyncGenerator<Buffer> {
  yield header(`${name}/`, st, 'directory');
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
      let lst: Stats;
      try {
        lst = local ? lstatSync(at(dirFd, child)) : await fsp.lstat(at(dirFd, child));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // removed meanwhile
        throw err;
      }
      if (lst.isSocket()) continue; // tar has no sockets
      fd = local ? openSync(at(dirFd, child), O_PATH | constants.O_NOFOLLOW) : await openFd(at(dirFd, child), O_PATH | constants.O_NOFOLLOW);
      cst = fstatSync(fd);
      if (cst.ino !== lst.ino || cst.dev !== lst.dev) {
        closeSync(fd);
        throw new Error(`${childCpath} changed while it was being archived`);
      }
    }
    try {
      const childLocal = local && !mount;
      if (cst.isDirectory()) yield* dirTree(view, fd, childCpath, childName, cst, links, childLocal);
      else yield* oneEntry(fd, childName, cst, links, () => fsp.readlink(at(dirFd, child)), childLocal);
    } finally {
      closeSync(fd);
    }
  }
}

/** One non-directory entry; `fd` is an O_PATH descriptor of it. */
async function* oneEntry(fd: number, name: string, st: Stats, links: Map<string, string>, readLink: () => Promise<string>, local: boolean): AsyncGenerator<Buffer> {
  if (st.isSymbolicLink()) {
    // By name in its directory: the link text is only text, whatever a swap makes it.
    yield header(name, st, 'symlink', { linkname: await readLink() });
    return;
  }
  if (st.isFIFO()) {
    yield header(name, st, 'fifo');
    return;
  }
  if (st.isCharacterDevice() || st.isBlockDevice()) {
    const rdev = BigInt(st.rdev);
    const devmajor = Number(((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & ~0xfffn));
    const devminor = Number((rdev & 0xffn) | ((rdev >> 12n) & ~0xffn));
    yield header(name, st, st.isCharacterDevice() ? 'char' : 'block', { devmajor, devminor });
    return;
  }
  if (!st.isFile()) return;
  if (st.nlink > 1) {
    const key = `${st.dev}:${st.ino}`;
    const first = links.get(key);
    if (first !== undefined) {
      yield header(name, st, 'link', { linkname: first });
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
    if (local && size <= SYNC_READ_MAX) {
      // Header, data and padding in one buffer, read synchronously.
      const head = header(name, fst, 'file', { size });
      const buf = Buffer.alloc(head.length + size + padding(size));
      head.copy(buf);
      let done = 0;
      while (done < size) {
        const n = readSync(rfd, buf, head.length + done, size - done, done);
        if (n === 0) break; // shrank meanwhile: the rest stays zero
        done += n;
      }
      yield buf;
      return;
    }
    yield header(name, fst, 'file', { size });
    yield* sizedData(rfd, size);
  } finally {
    closeSync(rfd);
  }
}
