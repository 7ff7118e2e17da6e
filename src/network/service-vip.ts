/**
 * A service's virtual IP, balanced inside each client's own network namespace (where dockerd puts its
 * IPVS rules): a nat-output rule DNATs every new connection to the VIP to one of the service's task
 * addresses, taken in turn (`numgen inc`). Conntrack in the client's namespace undoes it on the way
 * back, so the task answers the client directly, on whatever node either runs, with no SNAT and no
 * per-node address. A VIP without tasks is refused at once (reject) rather than left to time out.
 *
 * The table is rewritten whole in one nft transaction per namespace; it only ever holds VIPs of the
 * networks the container is on.
 */
import { runTool } from './run-tool.js';

export interface VipTarget {
  vip: string;
  /** Addresses of the service's running tasks on the VIP's network. */
  backends: readonly string[];
}

const TABLE = 'ip berth_vip';

/** The nft script that makes the namespace's table exactly `targets`. */
export function vipRules(targets: readonly VipTarget[]): string {
  const dnat: string[] = [];
  const reject: string[] = [];
  for (const t of [...targets].sort((a, b) => a.vip.localeCompare(b.vip))) {
    const b = [...new Set(t.backends)].sort();
    if (b.length === 0) reject.push(t.vip);
    else if (b.length === 1) dnat.push(`    ip daddr ${t.vip} dnat to ${b[0]}`);
    else dnat.push(`    ip daddr ${t.vip} dnat to numgen inc mod ${b.length} map { ${b.map((x, i) => `${i} : ${x}`).join(', ')} }`);
  }
  const lines = [`table ${TABLE}`, `delete table ${TABLE}`];
  if (targets.length) {
    lines.push(`table ${TABLE} {`, '  chain nat_out {', '    type nat hook output priority -100; policy accept;', ...dnat, '  }');
    lines.push('  chain filter_out {', '    type filter hook output priority 0; policy accept;');
    if (reject.length) lines.push(`    ip daddr { ${reject.join(', ')} } reject`);
    lines.push('  }', '}');
  }
  return lines.join('\n') + '\n';
}

/**
 * Applies the rules inside one namespace; `nftInNs` is the argv that runs nft there
 * (`['nsenter', '--net=<file>', 'nft']` or `['ip', 'netns', 'exec', ns, 'nft']`).
 */
export async function applyVipRules(nftInNs: readonly string[], targets: readonly VipTarget[]): Promise<void> {
  await runTool(nftInNs[0]!, [...nftInNs.slice(1), '-f', '-'], { input: vipRules(targets) });
}
