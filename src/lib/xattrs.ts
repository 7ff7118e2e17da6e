/**
 * Extended attributes read in-process through libc (llistxattr/lgetxattr over the koffi FFI), so a
 * `docker commit`, a build step's layer or a `docker diff` does not fork the daemon for getfattr: a
 * fork write-protects berthd's whole memory, and the next requests pay for it in page faults.
 *
 * Never follows symlinks (the l* calls); names and values are the raw bytes the kernel gives (trusted.*
 * as the caller's privileges show them). The tree walk reads directories asynchronously and makes the
 * (microsecond) xattr calls synchronously in slices of a few milliseconds, yielding to the event loop
 * between slices, so a big tree never holds it long. Where libc cannot be loaded, xattrsAvailable()
 * is false and callers use the attr tools instead.
 */
import { constants } from 'node:os';
import { opendir } from 'node:fs/promises';
import { lstatSync } from 'node:fs';
import { libcBinding, syscallError } from './libc.js';

interface Calls {
  list: (path: string, buf: Buffer | null, size: number) => number;
  get: (path: string, name: string, buf: Buffer | null, size: number) => number;
  errno: () => number;
}

const libcCalls = libcBinding<Calls>((c) => ({
  list: c.lib.func('intptr_t llistxattr(const char *path, _Out_ uint8_t *list, size_t size)'),
  get: c.lib.func('intptr_t lgetxattr(const char *path, const char *name, _Out_ uint8_t *value, size_t size)'),
  errno: () => c.koffi.errno(),
}), 'xattrs not readable through libc: using getfattr');

/** Whether the in-process reader works here (false: use getfattr). */
export function xattrsAvailable(): boolean {
  return libcCalls() !== null;
}

const { ENODATA, ENOTSUP, ERANGE } = constants.errno;
// Reused between calls (everything here is synchronous); grown on ERANGE.
let scratch = Buffer.alloc(64 * 1024);

/** Calls `fn` with the scratch buffer until it fits; the result's length, or -errno. */
function withScratch(c: Calls, fn: (buf: Buffer) => number): number {
  for (let i = 0; i < 4; i++) {
    const n = fn(scratch);
    if (n >= 0) return n;
    const errno = c.errno();
    if (errno !== ERANGE) return -errno;
    scratch = Buffer.alloc(scratch.length * 4); // the kernel caps a value and a list at 64 KiB: this is rare
  }
  return -ERANGE;
}

/**
 * One path's xattrs (the link itself for a symlink) whose names pass `keep`, in name order. Missing
 * xattr support in the file system reads as none; other errors (no such file...) throw.
 */
export function readXattrsSync(path: string, keep: (name: string) => boolean = () => true): [string, Buffer][] {
  const c = libcCalls();
  if (!c) throw new Error('xattrs: libc is not callable');
  const len = withScratch(c, (buf) => c.list(path, buf, buf.length));
  if (len === -ENOTSUP) return [];
  if (len < 0) throw syscallError('llistxattr', path, -len);
  if (len === 0) return [];
  const names = scratch.toString('utf8', 0, len - 1).split('\0').filter((n) => n !== '' && keep(n));
  const out: [string, Buffer][] = [];
  for (const name of names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    const n = withScratch(c, (buf) => c.get(path, name, buf, buf.length));
    if (n === -ENODATA) continue; // removed since it was listed
    if (n < 0) throw syscallError('lgetxattr', path, -n);
    out.push([name, Buffer.from(scratch.subarray(0, n))]);
  }
  return out;
}

/** One xattr's value, or undefined when the path, the attribute or xattr support is missing. */
export function readXattrSync(path: string, name: string): Buffer | undefined {
  const c = libcCalls();
  if (!c) throw new Error('xattrs: libc is not callable');
  const n = withScratch(c, (buf) => c.get(path, name, buf, buf.length));
  return n < 0 ? undefined : Buffer.from(scratch.subarray(0, n));
}

const SLICE_MS = 3;
const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Calls `visit(path, isDirectory)` for `root` and everything under it, depth first, never following
 * symlinks. Synchronous visits run in slices of a few milliseconds between yields to the event loop.
 */
export async function walkTree(root: string, visit: (path: string, isDirectory: boolean) => void): Promise<void> {
  let sliceStart = performance.now();
  const step = async (path: string, isDir: boolean): Promise<void> => {
    if (performance.now() - sliceStart > SLICE_MS) {
      await yieldToLoop();
      sliceStart = performance.now();
    }
    visit(path, isDir);
    if (!isDir) return;
    const children: [string, boolean][] = [];
    for await (const d of await opendir(path, { bufferSize: 256 })) children.push([`${path}/${d.name}`, d.isDirectory()]);
    for (const [p, dir] of children) await step(p, dir);
  };
  await step(root, lstatSync(root).isDirectory());
}

/**
 * Every xattr under `root` (itself included) whose name passes `keep`: path → [name, value] in name
 * order, paths without any left out. Paths are `root` joined with names by "/", as getfattr -R gives.
 */
export async function readXattrsUnder(root: string, keep: (name: string) => boolean): Promise<Map<string, [string, Buffer][]>> {
  const out = new Map<string, [string, Buffer][]>();
  await walkTree(root, (path) => {
    const list = readXattrsSync(path, keep);
    if (list.length > 0) out.set(path, list);
  });
  return out;
}
