/**
 * Network namespaces from berthd itself, through libc (the koffi FFI): entering one for a moment to
 * make a socket or open a file there, and making a new one bound to a file, without a process.
 * `unshare --net=<file>` costs a fork and an exec of a dynamically linked binary (~1-3 ms of CPU each
 * on the test VM, where glibc's start-up alone runs dozens of trapping CPUID instructions), and a
 * namespace also needs a command run inside it.
 *
 * setns(2) and unshare(2) move only the calling thread: the main thread (berthd's JS) enters,
 * does its synchronous work and returns before anything else can run on it. What is made there keeps
 * the namespace it was made in: a socket, a /proc/sys/net file, a bind mount of the namespace.
 */
import { closeSync, openSync } from 'node:fs';
import { errnoName, libcBinding } from '../lib/libc.js';
import { log } from '../lib/log.js';

const CLONE_NEWNET = 0x40000000;
const MS_BIND = 4096;

export interface NsCalls {
  setns: (fd: number, nstype: number) => number;
  unshare: (flags: number) => number;
  mount: (source: string, target: string, fstype: string | null, flags: number, data: string | null) => number;
  errno: () => number;
}

/** berthd's own network namespace (the main thread's), opened with the calls. */
let own: number | undefined;

/** The calls, or null where libc cannot be called here (callers then use processes). */
export const nsCalls = libcBinding<NsCalls>((c) => {
  const calls: NsCalls = {
    setns: c.lib.func('int setns(int fd, int nstype)'),
    unshare: c.lib.func('int unshare(int flags)'),
    mount: c.lib.func('int mount(const char *source, const char *target, const char *fstype, unsigned long flags, const char *data)'),
    errno: () => c.koffi.errno(),
  };
  own = openSync('/proc/thread-self/ns/net', 'r');
  return calls;
}, 'namespaces not reachable through libc: interfaces are set up by ip');

/** The fd of berthd's own network namespace (where a veth's host end goes). */
export function ownNamespaceFd(): number {
  if (!nsCalls()) throw new Error('namespace calls are not available');
  return own!;
}

/**
 * A path naming berthd's own network namespace for other processes (`ip ... netns <path>`).
 * /proc/<pid>/ns/net names the namespace the main thread is in at the moment it is opened, which
 * for a few hundred microseconds at a time is a container's (inNamespace, createNamespace): an `ip`
 * opening it then would put a veth's host end into that container. The fd opened at start names
 * berthd's own for good. Without the calls, the main thread never leaves it.
 */
export function ownNamespacePath(): string {
  return nsCalls() ? `/proc/${process.pid}/fd/${own!}` : `/proc/${process.pid}/ns/net`;
}


function mustCalls(): NsCalls {
  const c = nsCalls();
  if (!c) throw new Error('namespace calls are not available');
  return c;
}

/**
 * Back to berthd's own namespace. A thread that could not return would make every later socket of the
 * daemon in a container's namespace: that ends the daemon.
 */
function returnHome(c: NsCalls): void {
  if (c.setns(own!, CLONE_NEWNET) !== 0) {
    log.error("could not return to the daemon's network namespace; exiting", { errno: errnoName(c.errno()) });
    process.exit(70);
  }
}

/** Runs `fn` (synchronous) on the main thread inside the network namespace of `nsPath`. */
export function inNamespace<T>(nsPath: string, fn: () => T): T {
  const c = mustCalls();
  const fd = openSync(nsPath, 'r');
  try {
    if (c.setns(fd, CLONE_NEWNET) !== 0) throw new Error(`setns ${nsPath}: ${errnoName(c.errno())}`);
    try {
      return fn();
    } finally {
      returnHome(c);
    }
  } finally {
    closeSync(fd);
  }
}

/** Opens `path` for writing inside the namespace of `nsPath`: a sysctl of that namespace under /proc/sys/net. */
export function openInNamespace(nsPath: string, path: string): number {
  return inNamespace(nsPath, () => openSync(path, 'w'));
}

/**
 * A new network namespace, bound to the existing (empty) file `path` as `unshare --net=<path>` does,
 * and `fn` run inside it before returning. Costs the kernel's making of a namespace, ~0.3-0.5 ms here.
 */
export function createNamespace<T>(path: string, fn: () => T): T {
  const c = mustCalls();
  if (c.unshare(CLONE_NEWNET) !== 0) throw new Error(`unshare: ${errnoName(c.errno())}`);
  try {
    if (c.mount('/proc/thread-self/ns/net', path, null, MS_BIND, null) !== 0) throw new Error(`bind ${path}: ${errnoName(c.errno())}`);
    return fn();
  } finally {
    returnHome(c);
  }
}
