import { mkdtempSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh directory under the system temp dir; every harness dir starts with `berth-` so leftovers are easy to spot. */
export function makeTempDir(what: string): string {
  return mkdtempSync(join(tmpdir(), `berth-${what}-`));
}

/** Removes a directory tree, retrying briefly because a just-killed process may still hold files open. */
export async function removeDir(dir: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await rm(dir, { recursive: true, force: true, maxRetries: 3 });
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 100 * (attempt + 1)));
    }
  }
}

export function removeDirSync(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}
