/**
 * Deleting a removed container's directory off the request path. The directory (upper layer, log,
 * bundle...) is renamed into a trash folder on the same filesystem, one syscall, and deleted in
 * the background; whatever a stopped daemon left there is deleted at the next start.
 */
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { randomHex } from '../../lib/random-hex.js';
import { log } from '../../lib/log.js';

export class Trash {
  #made: Promise<unknown> | undefined;

  constructor(readonly dir: string) {}

  /** Makes `path` disappear at once; its contents are deleted later. A missing path is fine. */
  async discard(path: string): Promise<void> {
    this.#made ??= mkdir(this.dir, { recursive: true });
    await this.#made;
    const dest = join(this.dir, `${basename(path)}-${randomHex(4)}`);
    try {
      await rename(path, dest);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      // Not renameable (another filesystem...): delete in place, as before.
      await rm(path, { recursive: true, force: true });
      return;
    }
    this.#delete(dest);
  }

  /** Deletes what an earlier daemon left in the trash, in the background. */
  empty(): void {
    readdir(this.dir).then(
      (names) => names.forEach((n) => this.#delete(join(this.dir, n))),
      () => undefined, // no trash yet
    );
  }

  #delete(path: string): void {
    rm(path, { recursive: true, force: true }).catch((err) => log.warn('deleting a removed container directory failed', { path, err }));
  }
}
