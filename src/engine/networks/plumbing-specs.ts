/**
 * Records turned into what the bridge driver applies (bridge devices, veth plans, firewall rules, DNS
 * tables) and into what the engine shows (endpoint info, published ports). Pure functions.
 */
import type { BridgeSpec } from '../../network/bridge-device.js';
import type { DnsNetwork, DnsRecord } from '../../network/aardvark.js';
import { parseCidr } from '../../network/cidr.js';
import type { DnsRoute, PlumbEndpoint, PlumbPlan } from '../../network/endpoint-plumbing.js';
import type { FirewallNetwork, FirewallPort } from '../../network/firewall.js';
import type { Protocol } from '../../network/host-ports.js';
import type { StoredPort } from '../../state/network-records.js';
import { bridgeSettings, type NetworkRecord } from './network-record.js';
import type { Endpoint, EndpointInfo, PublishedPort } from './network-types.js';

export function bridgeSpec(n: NetworkRecord): BridgeSpec {
  const addrs = [`${n.gateway}/${parseCidr(n.subnet)!.prefix}`];
  if (n.enableIPv6 && n.subnet6 && n.gateway6) addrs.push(`${n.gateway6}/${parseCidr(n.subnet6)!.prefix}`);
  return { name: n.bridgeName, mtu: bridgeSettings(n).mtu, addresses: addrs };
}

export function firewallNetwork(n: NetworkRecord, dnsPort: number): FirewallNetwork {
  const s = bridgeSettings(n);
  return {
    id: n.id,
    bridge: n.bridgeName,
    subnet4: n.subnet || undefined,
    subnet6: n.enableIPv6 ? n.subnet6 : undefined,
    dnsGateway: n.dnsEnabled ? n.gateway : undefined,
    dnsPort,
    internal: n.internal,
    masquerade: s.masquerade,
    icc: s.icc,
  };
}

export function plumbEndpoint(e: Endpoint, n: NetworkRecord): PlumbEndpoint {
  return {
    ifName: e.ifName,
    hostVeth: e.hostVeth,
    bridge: n.bridgeName,
    mac: e.mac,
    mtu: bridgeSettings(n).mtu,
    ipv4: e.ipv4 ? { address: e.ipv4, prefixLen: e.ipv4PrefixLen } : undefined,
    ipv6: e.ipv6 ? { address: e.ipv6, prefixLen: e.ipv6PrefixLen } : undefined,
  };
}

/** The default routes through an endpoint's interface. */
export function routesVia(e: Endpoint, n: NetworkRecord): PlumbPlan['routes'] {
  return { ifName: e.ifName, gateway4: n.gateway, gateway6: e.ipv6 && n.gateway6 ? n.gateway6 : undefined };
}

/** How the container's 127.0.0.11 reaches the network's aardvark-dns. */
export function dnsRoute(e: Endpoint, n: NetworkRecord): DnsRoute {
  return { ifName: e.ifName, gateway: n.gateway, source: e.ipv4 };
}

/** Every name an endpoint answers to: the container's name, its aliases and short id. */
export function dnsNames(e: Endpoint): string[] {
  return [...new Set([e.containerName, ...e.aliases, e.containerId.slice(0, 12)].filter((x) => !!x))];
}

/** A network's DNS table from the endpoints on it, plus names answered for elsewhere (`extra`: a swarm's VIPs and other nodes' tasks). */
export function dnsNetwork(n: NetworkRecord, endpoints: Iterable<Map<string, Endpoint>>, extra: readonly DnsRecord[] = []): DnsNetwork {
  const records: DnsRecord[] = [];
  for (const eps of endpoints) {
    const e = eps.get(n.id);
    if (!e) continue;
    records.push({ containerId: e.containerId, ipv4: e.ipv4 || undefined, ipv6: e.ipv6 || undefined, names: dnsNames(e), dnsServers: e.dnsServers });
  }
  records.push(...extra);
  return { id: n.id, listen: [n.gateway, ...(n.enableIPv6 && n.gateway6 ? [n.gateway6] : [])], records };
}

export function endpointInfo(e: Endpoint, n: NetworkRecord): EndpointInfo {
  return {
    networkId: n.id,
    networkName: n.name,
    endpointId: e.endpointId,
    ipAddress: e.ipv4,
    ipPrefixLen: e.ipv4 ? e.ipv4PrefixLen : 0,
    gateway: n.gateway,
    ipv6Address: e.ipv6,
    ipv6PrefixLen: e.ipv6 ? e.ipv6PrefixLen : 0,
    ipv6Gateway: e.ipv6 ? n.gateway6 ?? '' : '',
    macAddress: e.mac,
    aliases: e.aliases,
    dnsNames: n.dnsEnabled ? dnsNames(e) : [],
    ifName: e.ifName,
  };
}

export function toFirewallPort(p: StoredPort): FirewallPort {
  return { protocol: p.protocol, hostIp: p.hostIp, hostPort: p.hostPort, containerIp: p.containerIp, containerPort: p.containerPort };
}

export function toPublished(p: StoredPort): PublishedPort {
  return { containerPort: p.containerPort, protocol: p.protocol as Protocol, hostIp: p.hostIp, hostPort: p.hostPort };
}
