/**
 * Bridge devices on the host: created with a fixed random MAC (otherwise the bridge takes its lowest
 * port's MAC and containers' ARP entries for the gateway go stale as ports come and go), the gateway
 * addresses and route_localnet=1 (so DNAT from the host's 127.0.0.1 to a container can route out).
 */
import { writeFile } from 'node:fs/promises';
import { randomMac } from './mac.js';
import { runTool, ToolError } from './run-tool.js';
import type { RunTool } from './tool-shell.js';

export interface BridgeSpec {
  name: string;
  mtu: number;
  /** `address/prefixLen` of each gateway. */
  addresses: string[];
}

/**
 * Creates the bridge, or adopts one of that name an earlier daemon left behind (as dockerd does):
 * its addresses are replaced by the spec's.
 */
export async function createBridge(ip: string, b: BridgeSpec, run: RunTool = runTool): Promise<void> {
  const setup = [...b.addresses.map((a) => (a.includes(':') ? `addr add ${a} dev ${b.name} nodad` : `addr add ${a} brd + dev ${b.name}`)), `link set ${b.name} up`];
  // One ip process: the batch stops at its first failing line, so a bridge that exists already
  // fails it before anything else is changed, and is then taken over with a second batch.
  const add = `link add name ${b.name} address ${randomMac()} mtu ${b.mtu} type bridge`;
  try {
    await run(ip, ['-batch', '-'], { input: [add, ...setup].join('\n') + '\n' });
  } catch (err) {
    if (!(err instanceof ToolError) || !/File exists/i.test(err.stderr) || (await listLinks(ip, run)).get(b.name)?.kind !== 'bridge') throw err;
    await run(ip, ['-batch', '-'], { input: [`addr flush dev ${b.name}`, `link set ${b.name} mtu ${b.mtu}`, ...setup].join('\n') + '\n' });
  }
  await writeFile(`/proc/sys/net/ipv4/conf/${b.name}/route_localnet`, '1');
}

/** Deletes a bridge; a missing one is fine. */
export async function deleteBridge(ip: string, name: string, run: RunTool = runTool): Promise<void> {
  try {
    await run(ip, ['link', 'del', 'dev', name]);
  } catch (err) {
    if (!(err instanceof ToolError) || !/Cannot find device|does not exist/i.test(err.stderr)) throw err;
  }
}

export interface LinkInfo {
  name: string;
  kind?: string;
  addresses: string[]; // address/prefixLen
}

/** Every interface of the host with its kind and addresses. */
export async function listLinks(ip: string, run: RunTool = runTool): Promise<Map<string, LinkInfo>> {
  const [addrs, details] = await Promise.all([run(ip, ['-j', 'addr', 'show']), run(ip, ['-j', '-d', 'link', 'show'])]);
  const out = new Map<string, LinkInfo>();
  for (const l of JSON.parse(details || '[]') as { ifname: string; linkinfo?: { info_kind?: string } }[]) {
    out.set(l.ifname, { name: l.ifname, kind: l.linkinfo?.info_kind, addresses: [] });
  }
  for (const l of JSON.parse(addrs || '[]') as { ifname: string; addr_info?: { local: string; prefixlen: number }[] }[]) {
    const info = out.get(l.ifname) ?? { name: l.ifname, addresses: [] };
    info.addresses = (l.addr_info ?? []).map((a) => `${a.local}/${a.prefixlen}`);
    out.set(l.ifname, info);
  }
  return out;
}

/**
 * Containers on bridges need IPv4 forwarding; this is host-wide and left on (as dockerd does). IPv6
 * forwarding is deliberately not touched: turning it on makes the host ignore router advertisements.
 */
export async function enableIPv4Forwarding(): Promise<void> {
  await writeFile('/proc/sys/net/ipv4/ip_forward', '1');
}
