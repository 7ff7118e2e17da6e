/**
 * Content digests (lib/content-digest.ts) of the build context's regular files, taken while the context was unpacked, so
 * that a COPY's cache key needs no second read of the files. An entry is used only while the
 * file's inode, size and mtime are still the ones hashed; anything else is read and hashed afresh.
 */
import type { Stats } from 'node:fs';

interface Entry {
  size: number;
  mtimeMs: number;
  digest: string;
}

export class ContextDigests {
  readonly #byInode = new Map<string, Entry>();

  /** Records a file as unpacked (unpackLayer's onFileDigest). */
  add(st: Stats, digest: string): void {
    this.#byInode.set(`${st.dev}:${st.ino}`, { size: st.size, mtimeMs: st.mtimeMs, digest });
  }

  /** The content digest of the file `st` describes, if it is one recorded and unchanged. */
  get(st: Stats): string | undefined {
    const e = this.#byInode.get(`${st.dev}:${st.ino}`);
    return e && e.size === st.size && e.mtimeMs === st.mtimeMs ? e.digest : undefined;
  }
}
