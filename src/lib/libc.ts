/**
 * libc functions called in-process through the koffi FFI, for the few syscalls Node has no binding
 * for (mount, mkfifo, malloc_trim, xattrs): a call costs microseconds where a helper process costs a fork of
 * the daemon. Loaded once; null where koffi or libc cannot be loaded, and callers fall back.
 */
import { createRequire } from 'node:module';
import { constants } from 'node:os';
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

/**
 * A set of libc functions bound once, at first use: `bind` declares them on the loaded library. Null
 * where libc cannot be loaded or `bind` throws (a function this libc lacks); `onFail` says which
 * fallback the caller takes.
 */
export function libcBinding<T>(bind: (c: Libc) => T, onFail: string): () => T | null {
  let bound: T | null | undefined;
  return () => {
    if (bound !== undefined) return bound;
    const c = loadLibc();
    if (!c) return (bound = null);
    try {
      bound = bind(c);
    } catch (err) {
      log.warn(onFail, { err });
      bound = null;
    }
    return bound;
  };
}

const ERRNO_NAMES = new Map(Object.entries(constants.errno).map(([name, n]) => [n, name]));

/** The name of an errno value ("ENOENT"), or "errno N" for one Node does not know. */
export const errnoName = (n: number): string => ERRNO_NAMES.get(n) ?? `errno ${n}`;

/** The error a failed libc call stands for, shaped like Node's own (code "ENOENT", errno, syscall). */
export function syscallError(call: string, target: string, errno: number): NodeJS.ErrnoException {
  const code = errnoName(errno);
  const err: NodeJS.ErrnoException = new Error(`${call} ${target}: ${code}`);
  err.code = code;
  err.errno = errno;
  err.syscall = call;
  err.path = target;
  return err;
}
