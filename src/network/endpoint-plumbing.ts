/**
 * Puts a container's interfaces in place with as few processes as possible, because process start-up
 * dominates setup time (measured: 2-3 ms per spawn on the test VM, the kernel work is well under that).
 * One `sh` runs inside the container's namespace and does, in order:
 *   1. one `ip -batch`: loopback up, each veth pair created from inside (its host end pushed into the
 *      daemon's namespace), MAC, MTU, addresses, link up, default route;
 *   2. one `nsenter` back into the daemon's namespace for one `ip -batch`: host ends onto their bridges,
 *      up, hairpin on (so a container can reach its own published port through the host);
 *   3. in parallel with both, when the container is on a network with DNS: route_localnet and one
 *      `nft -f` that forwards 127.0.0.11:53 to the network's DNS server (aardvark-dns on the gateway),
 *      which is where dockerd's embedded DNS answers.
 * The same script runs under `unshare --net=<file>` when the namespace is created in the same step.
 */
import { runTool } from './run-tool.js';

export interface Tools {
  ip: string;
  nft: string;
  nsenter: string;
}

export interface PlumbEndpoint {
  ifName: string;
  hostVeth: string;
  bridge: string;
  mac: string;
  mtu: number;
  ipv4?: { address: string; prefixLen: number };
  ipv6?: { address: string; prefixLen: number };
}

export interface DefaultRoutes {
  ifName: string;
  gateway4?: string;
  gateway6?: string;
}

/** The table that holds the container-side DNS forwarding (inside the container's namespace only). */
export const CONTAINER_DNS_TABLE = 'berth_dns';
export const EMBEDDED_DNS_IP = '127.0.0.11';

export const PLUMB_SCRIPT = `set -e
nft_pid=
if [ -n "$NS_NFT" ]; then
  ( echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet && printf '%s' "$NS_NFT" | "$NFT_BIN" -f - ) &
  nft_pid=$!
fi
status=0
if [ -n "$NS_BATCH" ]; then printf '%s' "$NS_BATCH" | "$IP_BIN" -batch - || status=$?; fi
if [ "$status" -eq 0 ] && [ -n "$HOST_BATCH" ]; then
  printf '%s' "$HOST_BATCH" | "$NSENTER_BIN" --net="$HOST_NS" "$IP_BIN" -batch - || status=$?
fi
if [ -n "$nft_pid" ]; then wait "$nft_pid" || status=$?; fi
exit "$status"
`;

export interface PlumbPlan {
  loopbackUp?: boolean;
  add: readonly PlumbEndpoint[];
  /** Replaces the default routes (on connect/disconnect too). */
  routes?: DefaultRoutes;
  /** undefined: leave the DNS forwarding as it is; null: remove it; a string: forward to that address. */
  dnsServer?: string | null;
}

/** The environment for PLUMB_SCRIPT. */
export function plumbEnv(plan: PlumbPlan, tools: Tools, hostNsPath: string): Record<string, string> {
  const ns: string[] = [];
  const host: string[] = [];
  if (plan.loopbackUp) ns.push('link set lo up');
  for (const e of plan.add) {
    ns.push(`link add ${e.ifName} address ${e.mac} mtu ${e.mtu} type veth peer name ${e.hostVeth} mtu ${e.mtu} netns ${hostNsPath}`);
    if (e.ipv4) ns.push(`addr add ${e.ipv4.address}/${e.ipv4.prefixLen} brd + dev ${e.ifName}`);
    if (e.ipv6) ns.push(`addr add ${e.ipv6.address}/${e.ipv6.prefixLen} dev ${e.ifName} nodad`);
    ns.push(`link set ${e.ifName} up`);
    host.push(`link set dev ${e.hostVeth} master ${e.bridge} up`, `link set dev ${e.hostVeth} type bridge_slave hairpin on`);
  }
  if (plan.routes?.gateway4) ns.push(`route replace default via ${plan.routes.gateway4} dev ${plan.routes.ifName}`);
  if (plan.routes?.gateway6) ns.push(`route replace default via ${plan.routes.gateway6} dev ${plan.routes.ifName}`);
  let nft = '';
  if (plan.dnsServer !== undefined) nft = containerDnsText(plan.dnsServer);
  return {
    NS_BATCH: ns.length ? ns.join('\n') + '\n' : '',
    NS_NFT: nft,
    HOST_BATCH: host.length ? host.join('\n') + '\n' : '',
    HOST_NS: hostNsPath,
    IP_BIN: tools.ip,
    NFT_BIN: tools.nft,
    NSENTER_BIN: tools.nsenter,
  };
}

/**
 * nft text for the container's namespace: DNAT queries to 127.0.0.11:53 (UDP and TCP) to the DNS server,
 * and masquerade them (they leave with a loopback source otherwise, which the network would drop).
 */
export function containerDnsText(server: string | null): string {
  const t = `ip ${CONTAINER_DNS_TABLE}`;
  const reset = `table ${t}\ndelete table ${t}\n`;
  if (server === null) return reset;
  return `${reset}table ${t} {
  chain output {
    type nat hook output priority -100; policy accept;
    ip daddr ${EMBEDDED_DNS_IP} udp dport 53 dnat to ${server}:53
    ip daddr ${EMBEDDED_DNS_IP} tcp dport 53 dnat to ${server}:53
  }
  chain postrouting {
    type nat hook postrouting priority 100; policy accept;
    ip saddr 127.0.0.0/8 ct status dnat oifname != "lo" masquerade
  }
}
`;
}

/** Runs the plan inside an existing namespace. */
export async function plumbExisting(netnsPath: string, plan: PlumbPlan, tools: Tools, hostNsPath: string): Promise<void> {
  const env = plumbEnv(plan, tools, hostNsPath);
  if (!env.NS_BATCH && !env.NS_NFT && !env.HOST_BATCH) return;
  await runTool(tools.nsenter, [`--net=${netnsPath}`, 'sh', '-c', PLUMB_SCRIPT], { env });
}

/** Deletes host-side veths (the container end goes with each); missing ones are skipped. */
export async function deleteHostVeths(names: readonly string[], ip: string): Promise<void> {
  if (names.length === 0) return;
  await runTool(ip, ['-force', '-batch', '-'], { input: names.map((n) => `link del dev ${n}\n`).join('') }).catch(() => {
    // -force carries on past a missing device but still exits non-zero; what matters is that none is left.
  });
}
