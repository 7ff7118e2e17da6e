/**
 * A plumbing plan (endpoint-plumbing.ts) carried out over rtnetlink from berthd itself, no process:
 * the same steps as its two `ip -batch` runs, in two rounds of two requests each.
 *   1. in the container's namespace: each veth pair made there, its host end put into berthd's
 *      namespace; then every interface the plan names looked up (their indexes);
 *      meanwhile in berthd's: the bridges looked up;
 *   2. in the container's namespace: addresses, loopback and interfaces up, default routes and the
 *      embedded-DNS route (with route_localnet, a sysctl written through /proc/sys of that namespace);
 *      meanwhile in berthd's: each host end onto its bridge, up, hairpin on.
 */
import { closeSync, writeSync } from 'node:fs';
import { EMBEDDED_DNS_IP, type PlumbPlan } from './endpoint-plumbing.js';
import { addAddress, addVeth, deleteRoute, getLink, LOOPBACK_INDEX, replaceRoute, RT_TABLE_LOCAL, setHairpin, setLinkUp, type NetlinkRequest } from './netlink-messages.js';
import { NetlinkError, NetlinkSocket, type NetlinkReply } from './netlink-socket.js';
import { openInNamespace, ownNamespaceFd } from './ns-calls.js';

const ROUTE_LOCALNET = '/proc/sys/net/ipv4/conf/all/route_localnet';

/** Applies `plan` inside the namespace of `netnsPath` and on the host side. */
export async function plumbByNetlink(netnsPath: string, plan: PlumbPlan): Promise<void> {
  const inside = NetlinkSocket.open(netnsPath);
  let host: NetlinkSocket | undefined;
  try {
    // Only interfaces have a host side (a namespace made ahead with loopback alone has none).
    host = plan.add.length ? NetlinkSocket.open() : undefined;
    const names = [...new Set([...plan.add.map((e) => e.ifName), ...(plan.routes ? [plan.routes.ifName] : []), ...(plan.dns ? [plan.dns.ifName] : [])])];
    const bridges = [...new Set(plan.add.map((e) => e.bridge))];
    const made = plan.add.map((e) => addVeth({ name: e.ifName, mac: e.mac, mtu: e.mtu, peer: e.hostVeth, peerNsFd: ownNamespaceFd() }));
    const [own, theirs] = await Promise.all([inside.request([...made, ...names.map(getLink)]), host?.request(bridges.map(getLink)) ?? []]);
    const index = indexes(own, made.length, names);
    const bridgeIndex = indexes(theirs, 0, bridges);

    const ns: NetlinkRequest[] = [];
    for (const e of plan.add) {
      if (e.ipv4) ns.push(addAddress(index(e.ifName), e.ipv4.address, e.ipv4.prefixLen));
      if (e.ipv6) ns.push(addAddress(index(e.ifName), e.ipv6.address, e.ipv6.prefixLen));
    }
    if (plan.loopbackUp) ns.push(setLinkUp({ index: LOOPBACK_INDEX }));
    for (const e of plan.add) ns.push(setLinkUp({ index: index(e.ifName) }));
    const r = plan.routes;
    if (r?.gateway4) ns.push(replaceRoute({ gateway: r.gateway4, oif: index(r.ifName) }));
    if (r?.gateway6) ns.push(replaceRoute({ gateway: r.gateway6, oif: index(r.ifName) }));
    if (plan.dns) ns.push(replaceRoute({ dst: EMBEDDED_DNS_IP, dstLen: 32, gateway: plan.dns.gateway, oif: index(plan.dns.ifName), src: plan.dns.source, table: RT_TABLE_LOCAL }));
    else if (plan.dns === null) ns.push(deleteRoute(EMBEDDED_DNS_IP, 32, RT_TABLE_LOCAL));
    const hostSide = plan.add.flatMap((e) => [setLinkUp({ name: e.hostVeth }, bridgeIndex(e.bridge)), setHairpin(e.hostVeth)]);
    if (plan.dns) {
      // The route sends 127.0.0.11 out through the interface; the namespace must let a loopback address leave.
      const fd = openInNamespace(netnsPath, ROUTE_LOCALNET);
      try {
        writeSync(fd, '1');
      } finally {
        closeSync(fd);
      }
    }
    await Promise.all([ns.length ? inside.request(ns) : undefined, hostSide.length ? host?.request(hostSide) : undefined]);
  } finally {
    inside.close();
    host?.close();
  }
}

/** The indexes from GETLINK replies (their requests after the first `skip`), by name. */
function indexes(replies: NetlinkReply[], skip: number, names: string[]): (name: string) => number {
  const byName = new Map<string, number>();
  for (const r of replies) if (r.index !== undefined) byName.set(names[r.request - skip]!, r.index);
  return (name) => {
    const i = byName.get(name);
    if (i === undefined) throw new NetlinkError(`no link ${name}`);
    return i;
  };
}
