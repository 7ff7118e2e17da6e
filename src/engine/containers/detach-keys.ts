/**
 * Detach keys: a key sequence in an attach client's input that ends the attach and leaves the
 * process running. Written as Docker writes them: comma-separated keys, each one character or
 * `ctrl-<c>` with c one of @ a-z [ \ ] ^ _ (default "ctrl-p,ctrl-q").
 */
import { invalidArgument } from '../../lib/errors.js';

export const DEFAULT_DETACH_KEYS = 'ctrl-p,ctrl-q';

const CTRL_NAMES = '@abcdefghijklmnopqrstuvwxyz[\\]^_';

/** The byte sequence for a detach-keys string; throws invalid-argument for an unknown key. */
export function parseDetachKeys(keys: string): Buffer {
  const codes: number[] = [];
  for (const key of keys.split(',')) {
    if (key.length === 1) {
      codes.push(key.charCodeAt(0));
      continue;
    }
    const m = /^ctrl-(.)$/.exec(key);
    const idx = m ? CTRL_NAMES.indexOf(m[1]!) : -1;
    if (idx < 0) throw invalidArgument(`Invalid detach keys (${keys}) provided`);
    codes.push(idx);
  }
  return Buffer.from(codes);
}

/**
 * Watches input for the sequence. Bytes that might start it are held back until the sequence
 * either completes (they are dropped: the process never sees the detach keys) or breaks (they
 * are passed on with what follows).
 */
export class DetachKeyScanner {
  readonly #keys: Buffer;
  #matched = 0;

  constructor(keys: Buffer) {
    this.#keys = keys;
  }

  /** The bytes to pass on, and whether the sequence completed (bytes after it are dropped). */
  push(chunk: Buffer): { out: Buffer; detached: boolean } {
    if (this.#keys.length === 0) return { out: chunk, detached: false };
    if (this.#matched === 0 && !chunk.includes(this.#keys[0]!)) return { out: chunk, detached: false };
    const out: number[] = [];
    for (const byte of chunk) {
      if (byte === this.#keys[this.#matched]) {
        this.#matched++;
        if (this.#matched === this.#keys.length) return { out: Buffer.from(out), detached: true };
        continue;
      }
      // Broken sequence: the held bytes were ordinary input after all.
      for (let i = 0; i < this.#matched; i++) out.push(this.#keys[i]!);
      this.#matched = 0;
      if (byte === this.#keys[0]) this.#matched = 1;
      else out.push(byte);
    }
    return { out: Buffer.from(out), detached: false };
  }
}
