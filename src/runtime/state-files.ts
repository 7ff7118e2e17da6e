/** Small file operations on the runtime's state dirs, with as few syscalls as each case allows. */
import { lstatSync } from 'node:fs';
import { access, readdir, rename, rm, rmdir, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** rm -f of a file or symlink: one unlink, where fs.rm adds an lstat. */
export async function removeFile(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/**
 * removeFile of those of `paths` that are there. A first start has none of the files a run leaves:
 * one lstat each on the main thread (microseconds, no error object) instead of a failing unlink each
 * through the thread pool.
 */
export async function removeFilesPresent(paths: readonly string[]): Promise<void> {
  await Promise.all(paths.filter((p) => lstatSync(p, { throwIfNoEntry: false }) !== undefined).map(removeFile));
}

/** Whether anything is at `path` (lstat on the main thread: for paths whose absence is the usual case). */
export function presentSync(path: string): boolean {
  return lstatSync(path, { throwIfNoEntry: false }) !== undefined;
}

/**
 * rm -rf of a directory of plain files (the runtime's state dirs): a readdir, an unlink per file
 * side by side and an rmdir, about half of fs.rm's calls. Subdirectories: fs.rm does it.
 */
export async function removeFlatDir(path: string): Promise<void> {
  let entries;
  try {
    entries = await readdir(path, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (entries.some((e) => e.isDirectory())) return rm(path, { recursive: true, force: true });
  await Promise.all(entries.map((e) => removeFile(join(path, e.name))));
  try {
    await rmdir(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    // Something appeared meanwhile (conmon writing late): remove it all.
    if (code === 'ENOTEMPTY') return rm(path, { recursive: true, force: true });
    throw err;
  }
}

export async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

export async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.tmp`;
  await writeFile(tmp, JSON.stringify(value));
  await rename(tmp, path);
}
