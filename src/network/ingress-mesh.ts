/**
 * The routing mesh in the node's kernel: a port a service publishes in ingress mode is DNATed, on
 * every local address of the node (127.0.0.1 included: its bridges carry route_localnet=1), to one of
 * the service's tasks on the `ingress` overlay, taken in turn (`numgen inc`), whichever node runs it.
 * What leaves through the ingress bridge after such a DNAT is SNATed to this node's own address on
 * ingress, so the task answers this node over the overlay and conntrack here undoes both on the way
 * back. The node's address is its own (every node's bridge carries the same gateway, whose ARP never
 * crosses the vxlan ports), and the SNAT runs before the firewall's postrouting masquerade, which
 * would pick that shared gateway.
 *
 * The rules are one table `ip <prefix>` in the node's namespace, rewritten whole in one transaction.
 * They outlive berthd, as containers and plain containers' port rules do: a published port keeps
 * answering while berthd restarts. purge-host-state.ts removes the table with the daemon's others.
 */
import { runTool, ToolError } from './run-tool.js';

export interface MeshPort {
  protocol: 'tcp' | 'udp';
  publishedPort: number;
  targetPort: number;
  /** The service's running tasks' addresses on the ingress network. */
  backends: readonly string[];
}

export interface MeshSpec {
  /** The ingress network's bridge on this node. */
  bridge: string;
  /** This node's address on ingress (no prefix length). */
  nodeAddress: string;
  ports: readonly MeshPort[];
}

/** The nft script that makes the table exactly `spec` (no ports with backends: no table). */
export function meshRules(table: string, spec: MeshSpec | undefined): string {
  const t = `ip ${table}`;
  const lines = [`table ${t}`, `delete table ${t}`];
  const ports = (spec?.ports ?? []).filter((p) => p.backends.length).sort((a, b) => a.protocol.localeCompare(b.protocol) || a.publishedPort - b.publishedPort);
  if (!spec || ports.length === 0) return lines.join('\n') + '\n';
  const dnat = ports.map((p) => {
    const b = [...new Set(p.backends)].sort();
    return `    ${p.protocol} dport ${p.publishedPort} dnat ip to numgen inc mod ${b.length} map { ${b.map((x, i) => `${i} : ${x} . ${p.targetPort}`).join(', ')} }`;
  });
  lines.push(
    `table ${t} {`,
    '  chain mesh {', ...dnat, '  }',
    '  chain prerouting {', '    type nat hook prerouting priority -100; policy accept;', '    fib daddr type local jump mesh', '  }',
    '  chain output {', '    type nat hook output priority -100; policy accept;', '    fib daddr type local jump mesh', '  }',
    '  chain postrouting {', '    type nat hook postrouting priority 50; policy accept;', `    oifname ${JSON.stringify(spec.bridge)} ct status dnat snat ip to ${spec.nodeAddress}`, '  }',
    '}',
  );
  return lines.join('\n') + '\n';
}

/** Runs a script of meshRules (`nft` is the argv that runs nft in the node's namespace). */
export async function writeMesh(nft: readonly string[], script: string): Promise<void> {
  await runTool(nft[0]!, [...nft.slice(1), '-f', '-'], { input: script });
}

/** Puts the node's address (`ip/prefix`) on the ingress bridge, beside the gateway; there already is fine. */
export async function addBridgeAddress(ip: readonly string[], bridge: string, cidr: string): Promise<void> {
  try {
    await runTool(ip[0]!, [...ip.slice(1), 'addr', 'add', cidr, 'dev', bridge]);
  } catch (err) {
    if (!(err instanceof ToolError) || !/File exists|already assigned/i.test(err.stderr)) throw err;
  }
}

/** The IPv4 addresses (`ip/prefix`) the bridge carries now. */
export async function bridgeAddresses(ip: readonly string[], bridge: string): Promise<string[]> {
  const shown = JSON.parse((await runTool(ip[0]!, [...ip.slice(1), '-j', '-4', 'addr', 'show', 'dev', bridge]).catch(() => '[]')) || '[]') as { addr_info?: { local: string; prefixlen: number }[] }[];
  return (shown[0]?.addr_info ?? []).map((a) => `${a.local}/${a.prefixlen}`);
}
