/**
 * When aardvark-dns really serves. Debian's aardvark-dns 1.4 tells its starter "ready" before it has
 * set up its SIGHUP handling or bound a socket, and on each SIGHUP it closes every listener and binds
 * new ones, with a window in which a further SIGHUP is lost (and, before the first set-up, one kills
 * it). So a start or reload counts as done only once its UDP listeners on the wanted addresses exist
 * and, after a reload, none of the sockets from before it is left: then a name just written is
 * answered and the next SIGHUP is heard. Read from /proc: the process's socket inodes and the
 * kernel's UDP table of its network namespace.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/** Inodes of the UDP sockets the process holds that are bound to `port`, with their IPv4 addresses ('' for IPv6). */
export async function udpListeners(pid: number, port: number): Promise<Map<string, string>> {
  const held = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
    const m = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''));
    if (m) held.add(m[1]!);
  }
  const out = new Map<string, string>();
  const portHex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const [file, v6] of [['udp', false], ['udp6', true]] as const) {
    const table = await readFile(`/proc/${pid}/net/${file}`, 'utf8').catch(() => '');
    for (const line of table.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const [addr, p] = f[1]!.split(':');
      const inode = f[9]!;
      if (p !== portHex || !held.has(inode)) continue;
      out.set(inode, v6 ? '' : ipv4FromProcHex(addr!));
    }
  }
  return out;
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
  for (let wait = 1; ; wait = Math.min(wait * 2, 20)) {
    const now = await udpListeners(pid, port);
    const bound = new Set(now.values());
    if (now.size > 0 && ![...now.keys()].some((i) => before.has(i)) && ipv4.every((ip) => bound.has(ip))) return true;
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
