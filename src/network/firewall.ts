/**
 * The host firewall: one nftables table per daemon (`inet <prefix>`), never anyone else's chains.
 * Deleting it removes every rule Berth ever made, and parallel daemons with different prefixes never
 * collide.
 *
 * Shape: base chains dispatch through maps keyed by bridge name or subnet into small per-network chains,
 * and published ports are plain map elements (host ip, protocol, port -> container ip, port). Adding or
 * removing a container's ports is then one `nft -f` with element changes only.
 *
 *  - prerouting/output (nat): packets to a local address hit `publish`, which DNATs through @pub_ip4
 *    (a specific host ip) or @pub_any4 (0.0.0.0). Output covers connections made on the host itself,
 *    including to 127.0.0.1, which works because each bridge has route_localnet=1 and postrouting
 *    masquerades loopback sources leaving through a bridge.
 *  - postrouting (nat): per network, masquerade what leaves the subnet (unless internal or disabled),
 *    and hairpin traffic (a container reaching a published port that lands on its own network).
 *  - forward (filter): per network, allow traffic inside the bridge (unless icc=false), drop traffic
 *    between Berth networks except DNATed (published) connections, keep internal networks off the
 *    outside, and let the outside in only for replies and published ports.
 *  - embedded DNS: a container's queries to 127.0.0.11:53 arrive on its bridge (see endpoint-plumbing.ts)
 *    and are DNATed through @dns_gw4 (bridge -> gateway) to aardvark-dns, before any published port.
 *  - loopback guard: bridges and container interfaces need route_localnet=1 (for 127.0.0.1 -> published
 *    port, and for 127.0.0.11), which would let a container reach services bound to loopback on the
 *    host or in a neighbour. `guard` (before conntrack and NAT) drops every packet from a bridge addressed
 *    to 127.0.0.0/8 except DNS to 127.0.0.11, and forward drops those going to another container.
 *    Traffic between containers on one bridge reaches these hooks only through br_netfilter
 *    (net.bridge.bridge-nf-call-iptables=1, the usual setting); traffic to the host always does.
 *
 * The filter chain can only drop or accept in this table: another table's drop (a host firewall) still wins.
 */
import { runTool } from './run-tool.js';
import type { RunTool } from './tool-shell.js';

export interface FirewallNetwork {
  id: string;
  bridge: string;
  subnet4?: string;
  subnet6?: string;
  /** Set for networks with DNS: where 127.0.0.11 queries from this bridge go (aardvark-dns). */
  dnsGateway?: string;
  dnsPort?: number;
  internal: boolean;
  masquerade: boolean;
  icc: boolean;
}

export interface FirewallPort {
  protocol: string;
  hostIp: string; // '0.0.0.0' for every local address
  hostPort: number;
  containerIp: string;
  containerPort: number;
}

const chainOf = (n: FirewallNetwork, kind: 'from' | 'to' | 'post') => `n-${n.id.slice(0, 12)}-${kind}`;

/** The base sets, maps and chains, as the body of a table block. */
function skeletonBody(): string {
  // dns_gw4: bridge -> (gateway, port of aardvark-dns)
  return `  set bridges { type ifname; }
  map fwd_from { type ifname : verdict; }
  map fwd_to { type ifname : verdict; }
  map nat_out4 { type ipv4_addr : verdict; flags interval; }
  map nat_out6 { type ipv6_addr : verdict; flags interval; }
  map pub_ip4 { type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service; }
  map pub_any4 { type inet_proto . inet_service : ipv4_addr . inet_service; }
  map dns_gw4 { type ifname : ipv4_addr . inet_service; }
  chain guard {
    type filter hook prerouting priority -300; policy accept;
    iifname @bridges ip daddr 127.0.0.11 meta l4proto { tcp, udp } th dport 53 accept
    iifname @bridges ip daddr 127.0.0.0/8 drop
  }
  chain prerouting {
    type nat hook prerouting priority -100; policy accept;
    ip daddr 127.0.0.11 meta l4proto { tcp, udp } th dport 53 dnat ip to iifname map @dns_gw4
    fib daddr type local jump publish
  }
  chain output {
    type nat hook output priority -100; policy accept;
    fib daddr type local jump publish
  }
  chain publish {
    meta nfproto ipv4 dnat ip to ip daddr . meta l4proto . th dport map @pub_ip4
    meta nfproto ipv4 dnat ip to meta l4proto . th dport map @pub_any4
  }
  chain postrouting {
    type nat hook postrouting priority 100; policy accept;
    oifname @bridges ip saddr 127.0.0.0/8 masquerade
    ip saddr vmap @nat_out4
    ip6 saddr vmap @nat_out6
  }
  chain forward {
    type filter hook forward priority 0; policy accept;
    iifname @bridges ip daddr 127.0.0.0/8 drop
    iifname vmap @fwd_from
    oifname vmap @fwd_to
  }
`;
}

/** A network's chains, as part of a table block. */
function networkChains(n: FirewallNetwork): string {
  const br = JSON.stringify(n.bridge);
  const fromRules = [
    `oifname ${br} ${n.icc ? 'accept' : 'drop'}`,
    ...(n.internal ? ['drop'] : ['oifname @bridges ct status dnat accept', 'oifname @bridges drop']),
  ];
  const toRules = n.internal ? ['drop'] : ['ct state established,related accept', 'ct status dnat accept', 'drop'];
  const postRules = [`oifname ${br} ct status dnat masquerade`, ...(n.masquerade && !n.internal ? [`oifname != ${br} masquerade`] : [])];
  const chain = (name: string, rules: string[]) => `  chain ${name} {\n${rules.map((r) => `    ${r}\n`).join('')}  }\n`;
  return chain(chainOf(n, 'from'), fromRules) + chain(chainOf(n, 'to'), toRules) + chain(chainOf(n, 'post'), postRules);
}

/** The map elements that route a network's traffic into its chains. */
function networkElements(table: string, n: FirewallNetwork): string {
  const t = `inet ${table}`;
  const br = JSON.stringify(n.bridge);
  const lines = [
    `add element ${t} bridges { ${br} }`,
    `add element ${t} fwd_from { ${br} : jump ${chainOf(n, 'from')} }`,
    `add element ${t} fwd_to { ${br} : jump ${chainOf(n, 'to')} }`,
  ];
  if (n.subnet4) lines.push(`add element ${t} nat_out4 { ${n.subnet4} : jump ${chainOf(n, 'post')} }`);
  if (n.subnet6) lines.push(`add element ${t} nat_out6 { ${n.subnet6} : jump ${chainOf(n, 'post')} }`);
  if (n.dnsGateway) lines.push(`add element ${t} dns_gw4 { ${br} : ${n.dnsGateway} . ${n.dnsPort ?? 53} }`);
  return lines.join('\n') + '\n';
}

export function addNetworkText(table: string, n: FirewallNetwork): string {
  return `table inet ${table} {\n${networkChains(n)}}\n${networkElements(table, n)}`;
}

export function removeNetworkText(table: string, n: FirewallNetwork): string {
  const t = `inet ${table}`;
  const br = JSON.stringify(n.bridge);
  const lines: string[] = [];
  if (n.subnet4) lines.push(`delete element ${t} nat_out4 { ${n.subnet4} }`);
  if (n.subnet6) lines.push(`delete element ${t} nat_out6 { ${n.subnet6} }`);
  if (n.dnsGateway) lines.push(`delete element ${t} dns_gw4 { ${br} }`);
  lines.push(`delete element ${t} fwd_from { ${br} }`, `delete element ${t} fwd_to { ${br} }`, `delete element ${t} bridges { ${br} }`);
  for (const kind of ['from', 'to', 'post'] as const) lines.push(`flush chain ${t} ${chainOf(n, kind)}`, `delete chain ${t} ${chainOf(n, kind)}`);
  return lines.join('\n') + '\n';
}

function portKey(p: FirewallPort): { map: string; key: string } {
  return p.hostIp === '0.0.0.0'
    ? { map: 'pub_any4', key: `${p.protocol} . ${p.hostPort}` }
    : { map: 'pub_ip4', key: `${p.hostIp} . ${p.protocol} . ${p.hostPort}` };
}

export function addPortsText(table: string, ports: readonly FirewallPort[]): string {
  return ports.map((p) => {
    const { map, key } = portKey(p);
    return `add element inet ${table} ${map} { ${key} : ${p.containerIp} . ${p.containerPort} }\n`;
  }).join('');
}

export function removePortsText(table: string, ports: readonly FirewallPort[]): string {
  return ports.map((p) => {
    const { map, key } = portKey(p);
    return `delete element inet ${table} ${map} { ${key} }\n`;
  }).join('');
}

/**
 * The whole table from scratch, replacing whatever is there, in one transaction. Every chain is declared
 * in the same block as the maps: nft 1.0.6 fails (ENOENT) to add an interval-map element that jumps to a
 * chain declared elsewhere in the transaction that creates the map.
 */
export function rebuildText(table: string, networks: readonly FirewallNetwork[], ports: readonly FirewallPort[]): string {
  return `${deleteText(table)}table inet ${table} {\n${skeletonBody()}${networks.map(networkChains).join('')}}\n` +
    networks.map((n) => networkElements(table, n)).join('') + addPortsText(table, ports);
}

/** Deletes the table; declaring it first makes this work when it does not exist. */
function deleteText(table: string): string {
  return `table inet ${table}\ndelete table inet ${table}\n`;
}

export class Firewall {
  readonly table: string;
  readonly #nft: string;

  constructor(
    table: string,
    nftPath = 'nft',
    /** How nft runs (the bridge driver's tool shell: no fork of berthd per change). */
    private readonly run: RunTool = runTool,
  ) {
    this.table = table;
    this.#nft = nftPath;
  }

  async #apply(text: string): Promise<void> {
    if (text) await this.run(this.#nft, ['-f', '-'], { input: text });
  }

  rebuild(networks: readonly FirewallNetwork[], ports: readonly FirewallPort[]): Promise<void> {
    return this.#apply(rebuildText(this.table, networks, ports));
  }

  addNetwork(n: FirewallNetwork): Promise<void> {
    return this.#apply(addNetworkText(this.table, n));
  }

  removeNetwork(n: FirewallNetwork): Promise<void> {
    return this.#apply(removeNetworkText(this.table, n));
  }

  addPorts(ports: readonly FirewallPort[]): Promise<void> {
    return this.#apply(addPortsText(this.table, ports));
  }

  removePorts(ports: readonly FirewallPort[]): Promise<void> {
    return this.#apply(removePortsText(this.table, ports));
  }

  /** Removes the table and with it every rule of this daemon. */
  destroy(): Promise<void> {
    return this.#apply(deleteText(this.table));
  }
}
