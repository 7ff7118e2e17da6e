/**
 * When aardvark-dns really serves. Debian's aardvark-dns 1.4 tells its starter "ready" before it has
 * set up its SIGHUP handling or bound a socket, and on each SIGHUP it closes every listener and binds
 * new ones, with a window in which a further SIGHUP is lost (and, before the first set-up, one kills
 * it). So a start or reload counts as done only once its UDP listeners on the wanted addresses exist
 * and, after a reload, none of the sockets from before it is left: then a name just written is
 * answered and the next SIGHUP is heard. Read from /proc: the process's socket inodes and the
 * kernel's UDP table of its network namespace.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/** Inodes of the UDP sockets the process holds that are bound to `port`, with their IPv4 addresses ('' for IPv6). */
export async function udpListeners(pid: number, port: number): Promise<Map<string, string>> {
  const held = new Set<string>();
  for (const fd of procSync(() => readdirSync(`/proc/${pid}/fd`), [] as string[])) {
    const m = /^socket:\[(\d+)\]$/.exec(procSync(() => readlinkSync(`/proc/${pid}/fd/${fd}`), ''));
    if (m) held.add(m[1]!);
  }
  const out = udpTable(pid, port);
  for (const inode of out.keys()) if (!held.has(inode)) out.delete(inode);
  return out;
}

/**
 * Every UDP socket bound to `port` in the process's network namespace, whoever holds it: the kernel's
 * table alone (two reads), without the readlink of each of the process's fds that udpListeners needs.
 */
function udpTable(pid: number, port: number): Map<string, string> {
  const out = new Map<string, string>();
  const portHex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const [file, v6] of [['udp', false], ['udp6', true]] as const) {
    const table = procSync(() => readFileSync(`/proc/${pid}/net/${file}`, 'utf8'), '');
    for (const line of table.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const [addr, p] = f[1]!.split(':');
      if (p !== portHex) continue;
      out.set(f[9]!, v6 ? '' : ipv4FromProcHex(addr!));
    }
  }
  return out;
}

/**
 * A read of /proc, synchronous: the kernel makes these files in memory in microseconds, while through
 * libuv's pool each waits behind whatever file work is queued (containers starting together).
 * `fallback` when the process or file is gone.
 */
function procSync<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}

/** /proc/net/udp writes an IPv4 address as the hex of its 32-bit value in host (little-endian) order. */
function ipv4FromProcHex(hex: string): string {
  const n = parseInt(hex, 16);
  return [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, n >>> 24].join('.');
}

/**
 * Waits, bounded, until the process listens on every address of `ipv4` (and on something at all) on
 * `port`, with no socket of `before` left. Answers whether it got there in time.
 */
export async function awaitListeners(pid: number, port: number, ipv4: string[], before: ReadonlySet<string> = new Set(), timeoutMs = 3000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  // A reload takes aardvark ~2 ms on a quiet machine; the polls are cheap, so the wait after it is short.
  for (let wait = 1; ; wait = Math.min(wait * 2, 4)) {
    // Polled in the kernel's table, which says when the old sockets are gone and new ones are bound;
    // only then is it checked, once, that the process holds them (and not another server).
    const table = udpTable(pid, port);
    const fresh = [...table].filter(([inode]) => !before.has(inode)).map(([, ip]) => ip);
    if (fresh.length > 0 && ![...table.keys()].some((i) => before.has(i)) && ipv4.every((ip) => fresh.includes(ip))) {
      const now = await udpListeners(pid, port);
      const bound = new Set(now.values());
      if (now.size > 0 && ![...now.keys()].some((i) => before.has(i)) && ipv4.every((ip) => bound.has(ip))) return true;
    }
    if (Date.now() > deadline) return false;
    await sleep(wait);
  }
}

/** Every aardvark-dns process on the host but `except`, with the config directory it serves. */
export async function aardvarkProcesses(except: number | null): Promise<{ pid: number; configDir: string }[]> {
  const out: { pid: number; configDir: string }[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === except || pid === process.pid) continue;
    const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (args[0]?.endsWith('aardvark-dns')) out.push({ pid, configDir: args[args.indexOf('--config') + 1] ?? '' });
  }
  return out;
}

/**
 * Other aardvark-dns processes bound to any of `ipv4` on `port`: servers of a daemon that is gone,
 * whose bridge (and so the address) went with a stray-device sweep and came back on a new network.
 */
export async function otherHolders(ipv4: string[], port: number, except: number): Promise<number[]> {
  const out: number[] = [];
  for (const { pid } of await aardvarkProcesses(except)) {
    const bound = new Set((await udpListeners(pid, port)).values());
    if (ipv4.some((ip) => bound.has(ip))) out.push(pid);
  }
  return out;
}
