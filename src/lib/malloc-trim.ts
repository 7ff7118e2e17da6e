/**
 * Hands memory the C heap holds but no longer uses back to the system (glibc's malloc_trim(0),
 * through the koffi FFI). After a burst of large buffers (a pull's layers in worker threads, whose
 * malloc arenas outlive them) glibc keeps the freed pages mapped, and a daemon's resident memory
 * stays at its peak. Does nothing where libc cannot be called.
 */
import { loadLibc } from './libc.js';

let trim: (() => void) | null | undefined;

function load(): (() => void) | null {
  if (trim !== undefined) return trim;
  const c = loadLibc();
  const fn = c?.lib.func('int malloc_trim(size_t pad)');
  trim = fn ? () => void fn(0) : null;
  return trim;
}

export function releaseFreedMemory(): void {
  load()?.();
}
