/**
 * mount(2) and umount2(2) called in-process through libc (the koffi FFI), so mounting and
 * unmounting a container's rootfs costs well under a millisecond instead of a mount(8) process
 * (a fork of berthd plus util-linux's start-up: ~5-30 ms, and the fork stalls the event loop).
 * Both run on libuv's thread pool: an overlay mount takes a few hundred µs of kernel time (ten
 * containers starting together held the event loop ~3 ms with them), and unmounting an overlay syncs
 * its upper filesystem, which can take tens of ms on a busy disk. errno cannot be read there: a
 * failed mount is tried once more on the calling thread for its error. Where libc cannot be loaded (no
 * koffi build for the platform) mount(8) and umount(8) are used as before.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { loadLibc, syscallError } from '../lib/libc.js';

const run = promisify(execFile);
const MNT_DETACH = 2;

interface Libc {
  mount: (source: string, target: string, fstype: string, flags: number, data: string) => number;
  /** On a worker thread. */
  mountAsync: (source: string, target: string, fstype: string, flags: number, data: string) => Promise<number>;
  /** On a worker thread; errno is not readable there. */
  umount2: (target: string, flags: number) => Promise<number>;
  errno: () => number;
}

let libc: Libc | null | undefined;

function libcCalls(): Libc | null {
  if (libc !== undefined) return libc;
  const c = loadLibc();
  if (!c) return (libc = null);
  const umount2 = c.lib.func('int umount2(const char *target, int flags)');
  const mountFn = c.lib.func('int mount(const char *source, const char *target, const char *fstype, unsigned long flags, const char *data)');
  libc = {
    mount: mountFn,
    mountAsync: (source, target, fstype, flags, data) =>
      new Promise((resolve, reject) => mountFn.async(source, target, fstype, flags, data, (err: unknown, res: number) => (err ? reject(err) : resolve(res)))),
    umount2: (target, flags) =>
      new Promise((resolve, reject) => umount2.async(target, flags, (err: unknown, res: number) => (err ? reject(err) : resolve(res)))),
    errno: () => c.koffi.errno(),
  };
  return libc;
}

/** `mount -t <fstype> <source> -o <data> <target>`, without flags. */
export async function mount(source: string, target: string, fstype: string, data: string): Promise<void> {
  const c = libcCalls();
  if (!c) {
    await run('mount', ['-t', fstype, source, '-o', data, target]);
    return;
  }
  if ((await c.mountAsync(source, target, fstype, 0, data)) === 0) return;
  if (c.mount(source, target, fstype, 0, data) !== 0) throw syscallError('mount', target, c.errno());
}

/** `umount <target>`, or with `lazy` `umount -l <target>` (detached now, released when unused). */
export async function unmount(target: string, opts: { lazy?: boolean } = {}): Promise<void> {
  const c = libcCalls();
  if (!c) {
    await run('umount', opts.lazy ? ['-l', target] : [target]);
    return;
  }
  if ((await c.umount2(target, opts.lazy ? MNT_DETACH : 0)) !== 0) {
    const err: NodeJS.ErrnoException = new Error(`umount ${target} failed`);
    err.syscall = 'umount';
    throw err;
  }
}
