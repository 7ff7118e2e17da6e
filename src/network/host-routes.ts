/**
 * What the host already uses, so a new network does not clash with it: every route in every table
 * (local-table entries cover the host's own addresses) except default routes, plus the host's nameservers.
 */
import { parseAddress, parseCidr, type Cidr, type Family } from './cidr.js';
import { dumpRoutes, parseRoute } from './netlink-messages.js';
import { NetlinkSocket } from './netlink-socket.js';
import { runTool } from './run-tool.js';
import type { RunTool } from './tool-shell.js';

interface RouteJson {
  dst?: string;
  type?: string;
}

export async function hostRoutePrefixes(ipPath = 'ip', run: RunTool = runTool): Promise<Cidr[]> {
  const [v4, v6] = await Promise.all([
    run(ipPath, ['-j', '-4', 'route', 'show', 'table', 'all']),
    run(ipPath, ['-j', '-6', 'route', 'show', 'table', 'all']),
  ]);
  const out: Cidr[] = [];
  for (const [text, family] of [[v4, 4], [v6, 6]] as [string, Family][]) {
    for (const r of JSON.parse(text || '[]') as RouteJson[]) {
      if (!r.dst || r.dst === 'default' || r.type === 'multicast') continue;
      const c = toCidr(r.dst, family);
      if (c) out.push(c);
    }
  }
  return out;
}

/** hostRoutePrefixes over rtnetlink (two dumps, no process). */
export async function hostRoutePrefixesByNetlink(): Promise<Cidr[]> {
  const [v4, v6] = await Promise.all(([4, 6] as const).map((f) => NetlinkSocket.open().dumpAndClose(dumpRoutes(f))));
  const out: Cidr[] = [];
  for (const r of [...v4!, ...v6!].map(parseRoute)) {
    if (!r || !r.dst || r.dstLen === 0 || r.multicast) continue;
    const c = parseCidr(`${r.dst}/${r.dstLen}`, false);
    if (c) out.push(c);
  }
  return out;
}

function toCidr(dst: string, family: Family): Cidr | null {
  if (dst.includes('/')) return parseCidr(dst, false);
  const a = parseAddress(dst);
  if (!a || a.family !== family) return null;
  return { family, base: a.value, prefix: family === 4 ? 32 : 128 };
}

export interface ResolvConf {
  nameservers: string[];
  search: string[];
  options: string[];
}

export function parseResolvConf(text: string): ResolvConf {
  const rc: ResolvConf = { nameservers: [], search: [], options: [] };
  for (const raw of text.split('\n')) {
    const line = raw.replace(/[#;].*$/, '').trim();
    const [key, ...rest] = line.split(/\s+/);
    if (key === 'nameserver' && rest[0]) rc.nameservers.push(rest[0]);
    else if (key === 'search' || key === 'domain') rc.search = rest;
    else if (key === 'options') rc.options.push(...rest);
  }
  return rc;
}
