/**
 * Copy-up: the first mount of an empty volume gets the image's content at the mount's destination,
 * owners, modes, timestamps, xattrs and symlinks kept (dockerd's behaviour unless `nocopy`).
 *
 * The source path is walked with lstat one component at a time from the container's rootfs: if any
 * component is a symlink (which could point outside the root) or the target is not a directory,
 * nothing is copied. The tree itself is copied by coreutils' `cp -a`, which never dereferences a
 * symlink inside the tree and recreates FIFOs and devices with mknod instead of opening them. The
 * container's process has not started yet, so nothing inside the rootfs changes meanwhile.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { internal } from '../../lib/errors.js';

const run = promisify(execFile);

export async function copyUp(rootfs: string, destination: string, volumeDir: string): Promise<boolean> {
  let cur = rootfs;
  for (const part of destination.split('/').filter(Boolean)) {
    if (part === '..' || part === '.') return false;
    cur = join(cur, part);
    const st = await lstat(cur).catch(() => undefined);
    if (!st || st.isSymbolicLink()) return false;
  }
  if (!(await lstat(cur)).isDirectory()) return false;
  try {
    await run('cp', ['-a', '--no-dereference', '--', `${cur}/.`, volumeDir]);
  } catch (err) {
    throw internal(`copying image content into the volume at ${destination} failed: ${String((err as { stderr?: string }).stderr ?? err).trim()}`);
  }
  return true;
}
