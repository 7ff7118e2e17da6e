/** Making renames and written trees survive a crash. */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import { internal } from '../lib/errors.js';

/** fsync a directory, so a rename or create inside it is on disk. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await fs.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Flush the whole file system holding `path` (syncfs(2), through coreutils `sync -f`: Node has
 * no binding). One call after writing a layer's thousands of files costs far less than an
 * fsync per file.
 */
export function syncFilesystem(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('sync', ['-f', path], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (err) => reject(internal(`cannot run sync: ${err.message}`, err)));
    child.on('close', (code) => (code === 0 ? resolve() : reject(internal(`sync -f ${path} failed: ${stderr.trim()}`))));
  });
}
