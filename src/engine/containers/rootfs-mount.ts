/**
 * A container's root filesystem: an overlay of the image's layer directories (read-only) under a
 * per-container upper directory, mounted at start and unmounted after the exit.
 */
import { mkdir, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { mount, unmount } from '../../runtime/mount-syscall.js';

export interface RootfsPaths {
  dir: string;
  upper: string;
  work: string;
  merged: string;
}

export function rootfsPaths(containerDir: string): RootfsPaths {
  return { dir: containerDir, upper: join(containerDir, 'upper'), work: join(containerDir, 'work'), merged: join(containerDir, 'merged') };
}

/**
 * Whether an overlay is mounted on `path`: an overlay has a device number of its own, so the
 * directory and its parent differ. Two stats instead of reading and parsing /proc/self/mountinfo,
 * which holds every mount of the host (160 KB, 1000+ lines on a busy test machine).
 */
export async function isMounted(path: string): Promise<boolean> {
  try {
    const [self, parent] = await Promise.all([stat(path), stat(dirname(path))]);
    return self.dev !== parent.dev;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    // Unreadable (a broken mount...): ask the mount table.
    const mounts = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
    return mounts.split('\n').some((l) => l.split(' ')[4] === path);
  }
}

/**
 * Merged dirs this process unmounted and has not mounted since: a second unmount (remove after the
 * exit's cleanup) needs no read of mountinfo. Only this module mounts there.
 */
const unmounted = new Set<string>();

/**
 * Mounts the overlay; lowerDirs top layer first. Idempotent. `volatile` (for containers whose upper
 * dir is deleted at exit: AutoRemove): the overlay skips syncing its upper filesystem, also when
 * unmounted, which otherwise makes the unmount wait for a sync of the whole host filesystem.
 */
export async function mountRootfs(p: RootfsPaths, lowerDirs: string[], opts: { volatile?: boolean } = {}): Promise<void> {
  const [, , madeMerged] = await Promise.all([mkdir(p.upper, { recursive: true }), mkdir(p.work, { recursive: true }), mkdir(p.merged, { recursive: true })]);
  // A merged dir created just now cannot have anything mounted on it: skip reading mountinfo.
  if (madeMerged === undefined && (await isMounted(p.merged))) return;
  unmounted.delete(p.merged);
  if (lowerDirs.length === 0) {
    // An image without layers: overlay needs a lower dir, so use an empty one.
    const empty = join(p.dir, 'empty');
    await mkdir(empty, { recursive: true });
    lowerDirs = [empty];
  }
  // redirect_dir and metacopy off: the upper dir must stay a plain diff that commit can turn into a layer.
  const data = `lowerdir=${lowerDirs.join(':')},upperdir=${p.upper},workdir=${p.work},redirect_dir=off,metacopy=off`;
  if (opts.volatile) {
    // Kernels before 5.10 do not know the option (EINVAL): mount as usual then.
    const done = await mount('overlay', p.merged, 'overlay', `${data},volatile`).then(() => true, () => false);
    if (done) return;
  }
  await mount('overlay', p.merged, 'overlay', data);
}

export async function unmountRootfs(p: RootfsPaths): Promise<void> {
  if (unmounted.has(p.merged)) return;
  if (!(await isMounted(p.merged))) return;
  try {
    await unmount(p.merged);
  } catch {
    const lazy = await unmount(p.merged, { lazy: true }).then(() => true, () => false);
    if (!lazy) return;
  }
  unmounted.add(p.merged);
}

/** Drops what unmountRootfs remembers of a container's rootfs (once its directory is gone). */
export function forgetRootfs(p: RootfsPaths): void {
  unmounted.delete(p.merged);
}
