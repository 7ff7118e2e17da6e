import { randomBytes } from 'node:crypto';
import { mustRun, runCommand } from '../lib/run-command.js';

/**
 * Host networking the other engines need for their default networks: a free /16 (never one a route
 * already covers, so Berth's and the test daemons' bridges are left alone), a bridge of our own for
 * dockerd, and the removal of the iptables chains podman's netavark leaves behind.
 */

const picked = new Set<number>();

function routes4(text: string): Array<{ base: number; bits: number }> {
  const out: Array<{ base: number; bits: number }> = [];
  for (const m of text.matchAll(/(\d+)\.(\d+)\.(\d+)\.(\d+)(?:\/(\d+))?/g)) {
    const base = ((Number(m[1]) << 24) | (Number(m[2]) << 16) | (Number(m[3]) << 8) | Number(m[4])) >>> 0;
    out.push({ base, bits: m[5] === undefined ? 32 : Number(m[5]) });
  }
  return out;
}

function overlaps(a: { base: number; bits: number }, b: { base: number; bits: number }): boolean {
  const bits = Math.min(a.bits, b.bits);
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  return ((a.base & mask) >>> 0) === ((b.base & mask) >>> 0);
}

/** A 172.N.0.0/16 that no route or address on this host touches, picked from the top down. */
export async function pickFreeSubnet(): Promise<{ subnet: string; gateway: string; second: number }> {
  const r = await mustRun('ip', ['-4', 'route', 'show', 'table', 'all']);
  const a = await mustRun('ip', ['-4', '-o', 'addr', 'show']);
  const taken = routes4(`${r.stdout}\n${a.stdout}`).filter((t) => t.base !== 0 || t.bits !== 0);
  for (let n = 31; n >= 20; n--) {
    if (picked.has(n)) continue;
    const cand = { base: ((172 << 24) | (n << 16)) >>> 0, bits: 16 };
    if (taken.some((t) => t.bits > 0 && overlaps(cand, t))) continue;
    picked.add(n);
    return { subnet: `172.${n}.0.0/16`, gateway: `172.${n}.0.1`, second: n };
  }
  throw new Error('no free 172.20-31.0.0/16 subnet on this host');
}

/** Creates an up bridge with the gateway address; returns its name and the undo. */
export async function createBridge(prefix: string, gatewayCidr: string): Promise<{ name: string; remove: () => Promise<void> }> {
  const name = `${prefix}${randomBytes(3).toString('hex')}`.slice(0, 15);
  await mustRun('ip', ['link', 'add', 'name', name, 'type', 'bridge']);
  try {
    await mustRun('ip', ['addr', 'add', gatewayCidr, 'dev', name]);
    await mustRun('ip', ['link', 'set', name, 'up']);
  } catch (err) {
    await runCommand('ip', ['link', 'del', name]);
    throw err;
  }
  return {
    name,
    async remove() {
      await runCommand('ip', ['link', 'del', name]);
    },
  };
}

export async function linkExists(name: string): Promise<boolean> {
  return (await runCommand('ip', ['link', 'show', name])).code === 0;
}

const TABLES = ['filter', 'nat', 'mangle'];
const TOOLS = ['iptables', 'ip6tables'];

export type ChainSnapshot = Map<string, Set<string>>;

/** The chains of every table now (key `tool:table`). */
export async function snapshotChains(): Promise<ChainSnapshot> {
  const snap: ChainSnapshot = new Map();
  for (const tool of TOOLS) {
    for (const table of TABLES) {
      const r = await runCommand(tool, ['-w', '-t', table, '-S']);
      if (r.code !== 0) continue;
      snap.set(`${tool}:${table}`, new Set(r.stdout.split('\n').filter((l) => l.startsWith('-N ')).map((l) => l.slice(3).trim())));
    }
  }
  return snap;
}

/** Splits an `iptables -S` rule line into arguments (double-quoted words kept whole). */
export function splitRule(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)) out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2]!);
  return out;
}

/**
 * Undoes what netavark left of one network in the firewall: every rule that mentions `subnet`, then
 * the chains matching `pattern` that were not in `before` and nothing jumps to any more. netavark's
 * shared chains (NETAVARK_FORWARD, NETAVARK-HOSTPORT-*: one set for every podman on the host) go only
 * when `keepShared` is false, i.e. when no other podman is running that may be using them.
 */
export async function removeNetavarkLeftovers(before: ChainSnapshot, subnet: string, pattern: RegExp, keepShared: boolean): Promise<string[]> {
  const removed: string[] = [];
  const isShared = (chain: string) => !/^NETAVARK-[0-9A-F]{8,}$/.test(chain);
  for (const tool of TOOLS) {
    for (const table of TABLES) {
      const list = async () => {
        const r = await runCommand(tool, ['-w', '-t', table, '-S']);
        return r.code === 0 ? r.stdout.split('\n') : [];
      };
      for (const line of await list()) {
        if (line.startsWith('-A ') && line.includes(subnet)) {
          if ((await runCommand(tool, ['-w', '-t', table, '-D', ...splitRule(line).slice(1)])).code === 0) removed.push(`${tool} -t ${table} rule ${line}`);
        }
      }
      const had = before.get(`${tool}:${table}`) ?? new Set<string>();
      const lines = await list();
      const fresh = lines
        .filter((l) => l.startsWith('-N '))
        .map((l) => l.slice(3).trim())
        .filter((c) => pattern.test(c) && !had.has(c) && !(keepShared && isShared(c)));
      const jumpsTo = (c: string) => lines.filter((l) => l.startsWith('-A ') && splitRule(l).includes(c) && splitRule(l)[1] !== c);
      for (const c of fresh) {
        const jumps = jumpsTo(c);
        // A per-network chain someone else still jumps to is theirs now; shared ones lose their jumps.
        if (!isShared(c) && jumps.length) continue;
        for (const j of jumps) await runCommand(tool, ['-w', '-t', table, '-D', ...splitRule(j).slice(1)]);
        await runCommand(tool, ['-w', '-t', table, '-F', c]);
        if ((await runCommand(tool, ['-w', '-t', table, '-X', c])).code === 0) removed.push(`${tool} -t ${table} chain ${c}`);
      }
    }
  }
  return removed;
}
