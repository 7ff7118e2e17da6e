/**
 * libc functions called in-process through the koffi FFI, for the few syscalls Node has no binding
 * for (mount, mkfifo, malloc_trim): a call costs microseconds where a helper process costs a fork of
 * the daemon. Loaded once; null where koffi or libc cannot be loaded, and callers fall back.
 */
import { createRequire } from 'node:module';
import { log } from './log.js';

export interface Libc {
  koffi: typeof import('koffi');
  lib: ReturnType<typeof import('koffi').load>;
}

let loaded: Libc | null | undefined;

export function loadLibc(): Libc | null {
  if (loaded !== undefined) return loaded;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    loaded = { koffi, lib: koffi.load('libc.so.6') };
  } catch (err) {
    log.warn('libc not callable through koffi: falling back to helper processes', { err });
    loaded = null;
  }
  return loaded;
}
