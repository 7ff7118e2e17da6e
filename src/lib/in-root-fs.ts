/**
 * Access to files an image or a container controls (its /etc/passwd, WORKDIR, whatever `docker cp`
 * names), resolved the way the container sees them and never outside its root:
 *
 * - Paths resolve inside `root`: symlinks (absolute or relative) and `..` stay within it, as
 *   openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) does. Where openat2 or libc is missing, an
 *   equivalent walk one component at a time from directory descriptors, each step checked.
 * - Resolution yields an O_PATH descriptor: nothing is opened for reading yet, so a FIFO, a device
 *   or a socket is never opened at all. fstat decides; only regular files (and directories, where
 *   asked) are reopened, through the descriptor itself (/proc/self/fd/N), O_NONBLOCK.
 * - Reads are capped: a huge /etc/group is an error for that container, not a daemon's memory.
 *
 * Nothing here can wait on hostile content: the resolution is one syscall on the calling thread
 * (or short lookups on libuv's pool), and no open or read ever touches a FIFO or device. Later
 * single-name operations go through `at(dirFd, name)` paths, so a swapped symlink in a parent
 * directory never redirects them.
 */
import { closeSync, constants, fstatSync, open, openSync, promises as fsp, read, type Stats } from 'node:fs';
import { promisify } from 'node:util';
import { loadLibc } from './libc.js';

const O_PATH = 0o10000000;
const RESOLVE_NO_MAGICLINKS = 0x02;
const RESOLVE_IN_ROOT = 0x10;
/** The same number on every architecture Linux unified its syscall table for (x86_64, arm64...). */
const SYS_OPENAT2 = 437;
const MAX_SYMLINKS = 40;
const ENOSYS = 38;
const EAGAIN = 11;
const E2BIG = 7;
const EPERM = 1;

const ERRNO_CODES: Record<number, string> = { 2: 'ENOENT', 13: 'EACCES', 20: 'ENOTDIR', 21: 'EISDIR', 40: 'ELOOP', 18: 'EXDEV', 36: 'ENAMETOOLONG', 1: 'EPERM', 24: 'EMFILE' };

/** An error about a path inside a root; `path` is the path as the container names it. */
export class InRootError extends Error {
  constructor(
    readonly code: string,
    readonly path: string,
    message: string,
  ) {
    super(message);
    this.name = 'InRootError';
  }
}

const describe: Record<string, string> = {
  ENOENT: 'no such file or directory',
  ENOTDIR: 'not a directory',
  ELOOP: 'too many levels of symbolic links',
  EACCES: 'permission denied',
  ENAMETOOLONG: 'file name too long',
  ENOTREG: 'not a regular file',
  EFBIG: 'file too large',
  EXDEV: 'path escapes the root',
};

function inRootError(code: string, path: string, what = describe[code] ?? code): InRootError {
  return new InRootError(code, path, `${path}: ${what}`);
}

/** True for "the path is not there" (a missing entry, or a file where a directory was needed). */
export function isMissing(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** The path of `name` inside the directory `dirFd` refers to: lookups start at that directory itself. */
export function at(dirFd: number, name?: string): string {
  return name === undefined ? `/proc/self/fd/${dirFd}` : `/proc/self/fd/${dirFd}/${name}`;
}

type Openat2 = (root: number, path: string, how: Buffer) => number;
let openat2: Openat2 | null | undefined;

function loadOpenat2(): Openat2 | null {
  if (openat2 !== undefined) return openat2;
  const c = loadLibc();
  if (!c) return (openat2 = null);
  try {
    const syscall = c.lib.func('long syscall(long n, ...)') as (...args: unknown[]) => number;
    openat2 = (root, path, how) => Number(syscall(SYS_OPENAT2, 'int', root, 'str', path, 'uint8_t *', how, 'size_t', how.length));
  } catch {
    openat2 = null;
  }
  return openat2;
}

/** Tests force the portable walk with this. */
export function useOpenat2ForTests(on: boolean): void {
  openat2 = on ? undefined : null;
}

/**
 * Resolves `path` (as the container names it; relative paths start at the root) inside `root` to an
 * O_PATH descriptor the caller closes. `followLast: false` leaves a final symlink unresolved (the
 * descriptor then refers to the link itself).
 */
export async function resolveInRoot(root: string, path: string, opts: { followLast?: boolean } = {}): Promise<number> {
  const followLast = opts.followLast ?? true;
  const rootFd = openSync(root, O_PATH | constants.O_DIRECTORY);
  try {
    const fn = loadOpenat2();
    if (fn) {
      const r = viaOpenat2(fn, rootFd, path, followLast);
      if (r !== 'unsupported') return r;
      openat2 = null; // not available here: every later call walks
    }
    return await walk(rootFd, path, followLast);
  } finally {
    closeSync(rootFd);
  }
}

function viaOpenat2(fn: Openat2, rootFd: number, path: string, followLast: boolean): number | 'unsupported' {
  const how = Buffer.alloc(24);
  how.writeBigUInt64LE(BigInt(O_PATH | (followLast ? 0 : constants.O_NOFOLLOW)), 0);
  how.writeBigUInt64LE(BigInt(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), 16);
  const rel = path.replace(/^\/+/, '') || '.';
  // EAGAIN: a rename raced with a `..` lookup; the kernel asks the caller to try again.
  for (let attempt = 0; attempt < 8; attempt++) {
    const fd = fn(rootFd, rel, how);
    if (fd >= 0) return fd;
    const errno = loadLibc()!.koffi.errno();
    // ENOSYS: a kernel before 5.6; EPERM: a seccomp profile (berthd itself in a container) that
    // refuses the syscall it does not know, as older ones do (O_PATH opens never fail so otherwise).
    if (errno === ENOSYS || errno === E2BIG || errno === EPERM) return 'unsupported';
    if (errno !== EAGAIN) throw inRootError(ERRNO_CODES[errno] ?? `E${errno}`, path);
  }
  throw inRootError('EAGAIN', path, 'resolution kept racing with renames');
}

/**
 * The portable equivalent: one component at a time from directory descriptors (a stack, so `..`
 * never climbs above the root), symlinks read and expanded in place, absolute ones from the root.
 * Each step is lstat then open(O_PATH | O_NOFOLLOW) of that one name, and the two must agree (same
 * inode), so a name swapped in between is an error rather than a way out.
 */
async function walk(rootFd: number, path: string, followLast: boolean): Promise<number> {
  return (await walkMounts(rootFd, path, followLast, new Map())).fd;
}

/** A mount of a container: what the container sees at `destination` is the host's `source`. */
export interface RootMount {
  source: string;
  destination: string;
  rw: boolean;
}

interface Step {
  fd: number;
  /** The container path this descriptor is at, symlinks resolved. */
  path: string;
  /** The innermost mount the path is in, if any. */
  mount?: RootMount;
}

/** A path resolved inside a container: the O_PATH descriptor (the caller closes it), where it is, and through which mount. */
export interface ResolvedPath {
  fd: number;
  path: string;
  mount?: RootMount;
}

const childPath = (dir: string, name: string) => (dir === '/' ? `/${name}` : `${dir}/${name}`);

/**
 * The walk, aware of mounts: when the container path reached is a mount's destination, the walk
 * goes on in the mount's source (a host directory the container's owner named, so opened as it
 * is), and `..` from there returns to the directory holding the destination, as in the container.
 */
async function walkMounts(rootFd: number, path: string, followLast: boolean, mounts: Map<string, RootMount>): Promise<Step> {
  const stack: Step[] = [{ fd: await openFd(at(rootFd), O_PATH | constants.O_DIRECTORY), path: '/' }];
  const queue = path.split('/').filter((p) => p !== '' && p !== '.');
  let links = 0;
  try {
    while (queue.length > 0) {
      const name = queue.shift()!;
      const top = stack[stack.length - 1]!;
      if (name === '..') {
        if (stack.length > 1) closeSync(stack.pop()!.fd);
        continue;
      }
      const last = queue.length === 0;
      const here = childPath(top.path, name);
      const mount = mounts.get(here);
      if (mount) {
        const fd = await openFd(mount.source, O_PATH);
        if (!last && !fstatSync(fd).isDirectory()) {
          closeSync(fd);
          throw inRootError('ENOTDIR', path);
        }
        stack.push({ fd, path: here, mount });
        continue;
      }
      const p = at(top.fd, name);
      const st = await fsp.lstat(p).catch((err: NodeJS.ErrnoException) => {
        throw inRootError(err.code ?? 'ENOENT', path);
      });
      if (st.isSymbolicLink() && (!last || followLast)) {
        if (++links > MAX_SYMLINKS) throw inRootError('ELOOP', path);
        const target = await fsp.readlink(p);
        if (target.startsWith('/')) while (stack.length > 1) closeSync(stack.pop()!.fd);
        queue.unshift(...target.split('/').filter((x) => x !== '' && x !== '.'));
        continue;
      }
      if (!last && !st.isDirectory()) throw inRootError('ENOTDIR', path);
      const fd = await reopenPath(p);
      const got = fstatSync(fd);
      if (got.ino !== st.ino || got.dev !== st.dev) {
        closeSync(fd);
        throw inRootError('EAGAIN', path, 'changed while it was being resolved');
      }
      stack.push({ fd, path: here, mount: top.mount });
    }
    return stack.pop()!;
  } finally {
    for (const s of stack) closeSync(s.fd);
  }
}

/**
 * A container's file system as the container sees it: `root` (its rootfs), and its mounts. Paths
 * resolve inside the root, symlinks followed within it, and a path that reaches a mount's
 * destination continues in the mount's source. Mount destinations are resolved first (the runtime
 * mounts at a destination's resolved place); later mounts win. Without mounts, resolution is
 * resolveInRoot's (openat2 where the kernel has it). Close it when done.
 */
export class ContainerView {
  private constructor(
    readonly root: string,
    private readonly rootFd: number,
    private readonly byDest: Map<string, RootMount>,
  ) {}

  static async open(root: string, mounts: RootMount[] = []): Promise<ContainerView> {
    const rootFd = openSync(root, O_PATH | constants.O_DIRECTORY);
    const byDest = new Map<string, RootMount>();
    try {
      for (const m of mounts) {
        let dest = cleanPath(m.destination);
        try {
          const r = await walkMounts(rootFd, dest, true, byDest);
          closeSync(r.fd);
          dest = r.path;
        } catch {
          // Not there yet (the runtime creates it): the mount sits at the path as written.
        }
        byDest.set(dest, m);
      }
    } catch (err) {
      closeSync(rootFd);
      throw err;
    }
    return new ContainerView(root, rootFd, byDest);
  }

  /** The mount whose destination is exactly this (resolved) container path. */
  mountAt(path: string): RootMount | undefined {
    return this.byDest.get(path);
  }

  async resolve(path: string, opts: { followLast?: boolean } = {}): Promise<ResolvedPath> {
    const followLast = opts.followLast ?? true;
    if (this.byDest.size === 0) {
      const fd = await resolveInRoot(this.root, path, { followLast });
      return { fd, path: await containerPathOf(this.root, fd) };
    }
    return walkMounts(this.rootFd, path, followLast, this.byDest);
  }

  close(): void {
    closeSync(this.rootFd);
  }
}

/** Where a descriptor resolved inside `root` is, as a container path. */
async function containerPathOf(root: string, fd: number): Promise<string> {
  const [real, target] = await Promise.all([fsp.realpath(root), fsp.readlink(at(fd))]);
  if (target === real) return '/';
  return target.startsWith(`${real}/`) ? target.slice(real.length) : '/';
}

/** The lexically clean absolute form of a container path (no `.`, `..` or doubled slashes). */
export function cleanPath(path: string): string {
  const out: string[] = [];
  for (const p of path.split('/')) {
    if (p === '' || p === '.') continue;
    if (p === '..') out.pop();
    else out.push(p);
  }
  return `/${out.join('/')}`;
}

/** open(2) returning the bare number (a FileHandle would close it when collected). */
const openFd = promisify(open) as (path: string, flags: number, mode?: number) => Promise<number>;

function reopenPath(p: string): Promise<number> {
  return openFd(p, O_PATH | constants.O_NOFOLLOW);
}

/**
 * chmod of `name` in a directory descriptor without following a link there (the name may have been
 * swapped for one since it was created): through an O_PATH descriptor of the name itself. Links
 * are left alone (their mode means nothing).
 */
export async function chmodAt(dirFd: number, name: string, mode: number): Promise<void> {
  const fd = await reopenPath(at(dirFd, name));
  try {
    if (!fstatSync(fd).isSymbolicLink()) await fsp.chmod(at(fd), mode);
  } finally {
    closeSync(fd);
  }
}

/** lstat-like for a resolved descriptor (fstat of an O_PATH descriptor sees what it refers to). */
export function fstatPath(fd: number): Stats {
  return fstatSync(fd);
}

/**
 * Opens a resolved O_PATH descriptor for real I/O, only if it refers to a regular file (or a
 * directory, with `dir`): the reopen goes through the descriptor, so it is the same inode.
 */
export async function reopen(fd: number, path: string, flags: number, kind: 'file' | 'dir' = 'file'): Promise<number> {
  const st = fstatSync(fd);
  if (kind === 'file' && !st.isFile()) throw inRootError(st.isDirectory() ? 'EISDIR' : 'ENOTREG', path, st.isDirectory() ? 'is a directory' : 'not a regular file');
  if (kind === 'dir' && !st.isDirectory()) throw inRootError('ENOTDIR', path);
  return openFd(at(fd), flags | constants.O_NONBLOCK);
}

/** Default cap for small configuration files an image ships (passwd, group...). */
export const SMALL_FILE_CAP = 4 * 1024 * 1024;

/**
 * A regular file inside the root, whole, at most `maxBytes` (else EFBIG); undefined when the path
 * does not exist. A FIFO, device, socket or directory at the path is an InRootError (ENOTREG...).
 */
export async function readFileInRoot(root: string, path: string, opts: { maxBytes?: number } = {}): Promise<Buffer | undefined> {
  const max = opts.maxBytes ?? SMALL_FILE_CAP;
  let pathFd: number;
  try {
    pathFd = await resolveInRoot(root, path);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  let fd: number | undefined;
  try {
    fd = await reopen(pathFd, path, constants.O_RDONLY);
    const size = fstatSync(fd).size;
    if (size > max) throw inRootError('EFBIG', path, `larger than ${max} bytes`);
    // Read one byte past the cap: a file that grows while being read is still caught.
    const buf = Buffer.allocUnsafe(Math.min(size, max) + 1);
    let len = 0;
    for (;;) {
      const { bytesRead } = await readAt(fd, buf, len);
      if (bytesRead === 0) break;
      len += bytesRead;
      if (len > max) throw inRootError('EFBIG', path, `larger than ${max} bytes`);
      if (len === buf.length) break;
    }
    return buf.subarray(0, len);
  } finally {
    closeSync(pathFd);
    if (fd !== undefined) closeSync(fd);
  }
}

function readAt(fd: number, buf: Buffer, offset: number): Promise<{ bytesRead: number }> {
  return new Promise((resolve, reject) => read(fd, buf, offset, buf.length - offset, offset, (err, bytesRead) => (err ? reject(err) : resolve({ bytesRead }))));
}

/** stat (follow) or lstat (`followLast: false`) of a path inside the root; undefined when missing. */
export async function statInRoot(root: string, path: string, opts: { followLast?: boolean } = {}): Promise<Stats | undefined> {
  let fd: number;
  try {
    fd = await resolveInRoot(root, path, opts);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  try {
    return fstatSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * `mkdir -p` inside the root (dockerd's WORKDIR creation): missing directories are created with
 * `mode` and owned by uid:gid; existing symlinks are followed within the root; a non-directory in
 * the way is ENOTDIR. Returns nothing; the created tree is the container's.
 */
export async function mkdirAllInRoot(root: string, path: string, opts: { mode?: number; uid?: number; gid?: number } = {}, links = 0): Promise<void> {
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  let prefix = '';
  for (let i = 0; i < parts.length; i++) {
    const name = parts[i]!;
    const parent = prefix || '/';
    prefix = `${prefix}/${name}`;
    if (name === '..') continue;
    let fd: number | undefined;
    try {
      fd = await resolveInRoot(root, prefix);
    } catch (err) {
      if ((err as InRootError).code !== 'ENOENT') throw err;
    }
    if (fd === undefined) {
      const dirFd = await resolveInRoot(root, parent);
      try {
        if (!fstatSync(dirFd).isDirectory()) throw inRootError('ENOTDIR', parent);
        const made = await fsp.mkdir(at(dirFd, name), opts.mode ?? 0o755).then(
          () => true,
          (err: NodeJS.ErrnoException) => {
            if (err.code !== 'EEXIST') throw inRootError(err.code ?? 'EIO', prefix);
            return false;
          },
        );
        if (!made) {
          // A dangling symlink: create what it names, inside the root, then go on from there.
          const target = await fsp.readlink(at(dirFd, name)).catch(() => {
            throw inRootError('EEXIST', prefix, 'file exists');
          });
          if (++links > MAX_SYMLINKS) throw inRootError('ELOOP', prefix);
          const rest = parts.slice(i + 1).join('/');
          const next = target.startsWith('/') ? target : `${parent}/${target}`;
          return mkdirAllInRoot(root, `${next}/${rest}`, opts, links);
        }
        if (opts.mode !== undefined) await chmodAt(dirFd, name, opts.mode); // past the umask
        if (opts.uid !== undefined || opts.gid !== undefined) await fsp.lchown(at(dirFd, name), opts.uid ?? 0, opts.gid ?? 0);
      } finally {
        closeSync(dirFd);
      }
      fd = await resolveInRoot(root, prefix);
    }
    try {
      if (!fstatSync(fd).isDirectory()) throw inRootError('ENOTDIR', prefix);
    } finally {
      closeSync(fd);
    }
  }
}
