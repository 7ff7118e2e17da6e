/**
 * The /dev/shm of an IpcMode `shareable` container: a tmpfs on the host in the container's dir
 * (as dockerd keeps it), bound into the container and into those that join its IPC namespace, so
 * POSIX shared memory is shared along with the namespace. Mounted at start, unmounted at cleanup.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { mount, unmount } from '../../runtime/mount-syscall.js';
import { isMounted } from './rootfs-mount.js';
import { DEFAULT_SHM_SIZE } from '../../runtime/build-spec.js';

export const shmPath = (containerDir: string) => join(containerDir, 'shm');

export async function mountShareableShm(containerDir: string, sizeBytes: number): Promise<void> {
  const dir = shmPath(containerDir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (await isMounted(dir)) return;
  await mount('shm', dir, 'tmpfs', `mode=1777,size=${sizeBytes > 0 ? sizeBytes : DEFAULT_SHM_SIZE}`);
}

/** Lazy: containers that joined keep their bind until they end. A missing mount is fine. */
export async function unmountShareableShm(containerDir: string): Promise<void> {
  const dir = shmPath(containerDir);
  if (await isMounted(dir)) await unmount(dir, { lazy: true });
}
