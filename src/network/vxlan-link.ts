/**
 * The VXLAN half of an overlay network on one node: a vxlan device (the network's VNI, the swarm's
 * data path port, local = this node's advertise address) enslaved to the network's bridge, and one
 * all-zero FDB entry per peer node, so that broadcast, unknown unicast and ARP are sent to every peer
 * (head-end replication) and the bridge learns where each remote container's MAC lives from what
 * comes back. No multicast, no learning on the vxlan device itself (`nolearning`): peers are only
 * ever the nodes the cluster names.
 *
 * Every node's bridge carries the same gateway address. An ARP request for it, or one the bridge
 * sends from it, must not cross to other nodes, or a container could cache another node's bridge as
 * its gateway: the bridge-family table `<prefix>` drops such ARP on the vxlan ports.
 *
 * Commands are argv prefixes (`['ip']`, or `['ip', '-n', ns]` for a named namespace, which is how the
 * plumbing test runs two "nodes" on one machine).
 */
import { runTool, ToolError } from './run-tool.js';

export interface VxlanTools {
  ip: readonly string[];
  bridge: readonly string[];
  nft: readonly string[];
}

export const hostVxlanTools: VxlanTools = { ip: ['ip'], bridge: ['bridge'], nft: ['nft'] };

export interface VxlanSpec {
  /** The device's name (vxlanName). */
  name: string;
  /** The network's VXLAN id, 1..16777215. */
  vni: number;
  /** UDP port (the swarm's DataPathPort, 4789 by default). */
  port: number;
  /** This node's address: the tunnel's source. */
  local: string;
  /** The network's bridge on this node. */
  bridge: string;
  /** The overlay's MTU (the bridge's and its containers'): the underlay's less VXLAN_OVERHEAD. */
  mtu: number;
}

const ZERO_MAC = '00:00:00:00:00:00';
/** Outer IPv4, UDP and VXLAN headers and the inner Ethernet header: 1500 outside, 1450 inside. */
export const VXLAN_OVERHEAD = 50;

/** `<prefix>v<vni in base 36>`: at most 8 + 1 + 5 characters, under IFNAMSIZ. */
export function vxlanName(prefix: string, vni: number): string {
  return `${prefix}v${vni.toString(36)}`;
}

const run = (argv: readonly string[], args: string[], input?: string) => runTool(argv[0]!, [...argv.slice(1), ...args], input === undefined ? {} : { input });

/** Creates the device (or takes one of that name already there with the same VNI) and puts it on the bridge. */
export async function ensureVxlan(tools: VxlanTools, spec: VxlanSpec): Promise<void> {
  try {
    await run(tools.ip, ['link', 'add', spec.name, 'mtu', String(spec.mtu), 'type', 'vxlan', 'id', String(spec.vni), 'dstport', String(spec.port), 'local', spec.local, 'nolearning']);
  } catch (err) {
    if (!(err instanceof ToolError) || !/File exists/i.test(err.stderr)) throw err;
    const shown = JSON.parse(await run(tools.ip, ['-j', '-d', 'link', 'show', spec.name])) as { linkinfo?: { info_kind?: string; info_data?: { id?: number; local?: string; port?: number } } }[];
    const d = shown[0]?.linkinfo;
    if (d?.info_kind !== 'vxlan' || d.info_data?.id !== spec.vni || d.info_data.local !== spec.local || d.info_data.port !== spec.port) {
      // A leftover with other parameters (a previous cluster): replaced.
      await run(tools.ip, ['link', 'del', spec.name]);
      return ensureVxlan(tools, spec);
    }
  }
  await run(tools.ip, ['-batch', '-'], `link set ${spec.name} master ${spec.bridge}\nlink set ${spec.name} up\n`);
}

/** Deletes the device; a missing one is fine. */
export async function deleteVxlan(tools: VxlanTools, name: string): Promise<void> {
  await run(tools.ip, ['link', 'del', name]).catch((err) => {
    if (!(err instanceof ToolError) || !/Cannot find device|does not exist/i.test(err.stderr)) throw err;
  });
}

/** The peers the device floods to now. */
export async function vxlanPeers(tools: VxlanTools, name: string): Promise<string[]> {
  const entries = JSON.parse((await run(tools.bridge, ['-j', 'fdb', 'show', 'dev', name])) || '[]') as { mac: string; dst?: string }[];
  return entries.filter((e) => e.mac === ZERO_MAC && e.dst).map((e) => e.dst!);
}

/** Makes the flooding list exactly `peers` (other nodes' addresses), in one batch. */
export async function setVxlanPeers(tools: VxlanTools, name: string, peers: readonly string[]): Promise<void> {
  const have = new Set(await vxlanPeers(tools, name));
  const want = new Set(peers);
  const lines = [
    ...[...want].filter((p) => !have.has(p)).map((p) => `fdb append ${ZERO_MAC} dev ${name} dst ${p}`),
    ...[...have].filter((p) => !want.has(p)).map((p) => `fdb del ${ZERO_MAC} dev ${name} dst ${p}`),
  ];
  if (lines.length) await run(tools.bridge, ['-batch', '-'], lines.join('\n') + '\n');
}

export interface ArpGuardPort {
  /** The vxlan device. */
  device: string;
  /** The gateway address every node's bridge of that network carries. */
  gateway: string;
}

/**
 * Rewrites the bridge-family table that keeps ARP for (and from) each overlay's shared gateway
 * address off the vxlan ports. One nft transaction; no ports: no table.
 */
export async function syncArpGuard(tools: VxlanTools, prefix: string, ports: readonly ArpGuardPort[]): Promise<void> {
  const table = `bridge ${prefix}`;
  const rules = ports.flatMap((p) => [
    `    oifname "${p.device}" arp daddr ip ${p.gateway} drop`,
    `    oifname "${p.device}" arp saddr ip ${p.gateway} drop`,
  ]);
  const body = ports.length
    ? [`table ${table} {`, '  chain forward {', '    type filter hook forward priority 0; policy accept;', ...rules, '  }',
       '  chain output {', '    type filter hook output priority 0; policy accept;', ...rules, '  }', '}']
    : [];
  // Declaring the table first makes the delete valid whether or not it existed.
  await run(tools.nft, ['-f', '-'], [`table ${table}`, `delete table ${table}`, ...body].join('\n') + '\n');
}
