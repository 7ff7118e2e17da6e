/**
 * Bridge devices on the host: created with a fixed random MAC (otherwise the bridge takes its lowest
 * port's MAC and containers' ARP entries for the gateway go stale as ports come and go), the gateway
 * addresses and route_localnet=1 (so DNAT from the host's 127.0.0.1 to a container can route out).
 */
import { writeFile } from 'node:fs/promises';
import { randomMac } from './mac.js';
import { addAddress, addBridge, deleteAddress, deleteLink, dumpAddresses, dumpLinks, getLink, parseAddr, parseLink, setLinkUp, setMtu } from './netlink-messages.js';
import { NetlinkError, NetlinkSocket } from './netlink-socket.js';
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

/** createBridge from berthd itself over rtnetlink: no process. */
export async function createBridgeByNetlink(b: BridgeSpec): Promise<void> {
  const s = NetlinkSocket.open();
  try {
    let index: number | undefined;
    try {
      index = (await s.request([addBridge(b.name, randomMac(), b.mtu), getLink(b.name)]))[0]?.index;
    } catch (err) {
      if (!(err instanceof NetlinkError && err.code === 'EEXIST')) throw err;
      const link = (await s.dump(dumpLinks())).map(parseLink).find((l) => l?.name === b.name);
      if (link?.kind !== 'bridge') throw err;
      index = link.index;
      const old = (await s.dump(dumpAddresses())).map(parseAddr).filter((a) => a?.index === index);
      await s.request([...old.map((a) => deleteAddress(a!.index, a!.address, a!.prefixLen)), setMtu(b.name, b.mtu)]);
    }
    if (index === undefined) throw new NetlinkError(`no link ${b.name}`);
    const at = index;
    await s.request([
      ...b.addresses.map((a) => {
        const [ip, len] = a.split('/');
        return addAddress(at, ip!, Number(len));
      }),
      setLinkUp({ index: at }),
    ]);
  } finally {
    s.close();
  }
  await writeFile(`/proc/sys/net/ipv4/conf/${b.name}/route_localnet`, '1');
}

/** deleteBridge over rtnetlink. */
export async function deleteBridgeByNetlink(name: string): Promise<void> {
  const s = NetlinkSocket.open();
  try {
    await s.request([deleteLink(name)]);
  } catch (err) {
    if (!(err instanceof NetlinkError && err.code === 'ENODEV')) throw err;
  } finally {
    s.close();
  }
}

/** listLinks over rtnetlink: two dumps, no process. */
export async function listLinksByNetlink(): Promise<Map<string, LinkInfo>> {
  const s = NetlinkSocket.open();
  try {
    const [links, addrs] = await Promise.all([s.dump(dumpLinks()), NetlinkSocket.open().dumpAndClose(dumpAddresses())]);
    const out = new Map<string, LinkInfo>();
    const byIndex = new Map<number, LinkInfo>();
    for (const l of links.map(parseLink)) {
      if (!l) continue;
      const info: LinkInfo = { name: l.name, kind: l.kind, addresses: [] };
      out.set(l.name, info);
      byIndex.set(l.index, info);
    }
    for (const a of addrs.map(parseAddr)) if (a) byIndex.get(a.index)?.addresses.push(`${a.address}/${a.prefixLen}`);
    return out;
  } finally {
    s.close();
  }
}

/** Whether a device of that name exists, over rtnetlink. */
export async function linkExists(name: string): Promise<boolean> {
  const s = NetlinkSocket.open();
  try {
    await s.request([getLink(name)]);
    return true;
  } catch (err) {
    if (err instanceof NetlinkError && err.code === 'ENODEV') return false;
    throw err;
  } finally {
    s.close();
  }
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
