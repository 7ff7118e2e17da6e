/**
 * Puts a container's interfaces in place with as few processes as possible, because process start-up
 * dominates setup time (a spawn costs 2-3 ms on an idle test VM and far more under load; the kernel
 * work itself is well under that). Two `ip -batch` processes, no shell in between:
 *   1. inside the container's namespace (started by `unshare --net=<file>`, which creates it in the same
 *      step, or `nsenter --net=<file>`): loopback up, each veth pair created from inside (its host end
 *      pushed into the daemon's namespace), MAC, MTU, addresses, link up, default route, embedded-DNS route;
 *   2. in the daemon's namespace: host ends onto their bridges, up, hairpin on (so a container can reach
 *      its own published port through the host). This one is spawned alongside the first and gets its
 *      input once the first is done, so its start-up overlaps the namespace work.
 * Only a namespace that needs the embedded-DNS route gets a `sh` in front of its `ip`, to turn on
 * route_localnet (a sysctl of the namespace, which `ip` cannot set).
 *
 * Embedded DNS at 127.0.0.11 (where dockerd's resolver answers) without a process in the container:
 * a /32 route in the container's local table sends 127.0.0.11 out through the DNS network's interface
 * to its gateway (route_localnet=1 lets a loopback address leave and its replies come back), and the
 * host DNATs it to aardvark-dns on that gateway (see firewall.ts, which also drops every other packet
 * for 127.0.0.0/8 coming from a container, so route_localnet exposes no loopback service).
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

/** Where the container's 127.0.0.11 goes: its DNS network's gateway, through that network's interface. */
export interface DnsRoute {
  ifName: string;
  gateway: string;
  /** The container's address on that network (the queries' source). */
  source: string;
}

export const EMBEDDED_DNS_IP = '127.0.0.11';

export interface PlumbPlan {
  loopbackUp?: boolean;
  add: readonly PlumbEndpoint[];
  /** Replaces the default routes (on connect/disconnect too). */
  routes?: DefaultRoutes;
  /** undefined: leave the embedded-DNS route as it is; null: remove it; else (re)point it. */
  dns?: DnsRoute | null;
}

/** What runs inside the namespace: argv and its stdin; and the batch for the daemon's namespace. */
export interface PlumbCommands {
  nsArgv: string[];
  nsInput: string;
  hostInput: string;
}

export function plumbCommands(plan: PlumbPlan, tools: Tools, hostNsPath: string): PlumbCommands {
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
  if (plan.dns) {
    ns.push(`route replace ${EMBEDDED_DNS_IP}/32 via ${plan.dns.gateway} dev ${plan.dns.ifName} src ${plan.dns.source} table local`);
  } else if (plan.dns === null) {
    ns.push(`route del ${EMBEDDED_DNS_IP}/32 table local`);
  }
  const nsArgv = plan.dns
    ? ['sh', '-c', 'echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet && exec "$0" -batch -', tools.ip]
    : [tools.ip, '-batch', '-'];
  return { nsArgv, nsInput: ns.length ? ns.join('\n') + '\n' : '', hostInput: host.length ? host.join('\n') + '\n' : '' };
}

/**
 * Runs a plan. `inNamespace` runs an argv (with its stdin) inside the container's namespace: through
 * `unshare` for a new one, `nsenter` for an existing one. The host batch runs once that succeeded.
 */
export async function plumb(
  plan: PlumbPlan,
  tools: Tools,
  hostNsPath: string,
  inNamespace: (argv: string[], input: string) => Promise<unknown>,
): Promise<void> {
  const cmds = plumbCommands(plan, tools, hostNsPath);
  const nsDone = cmds.nsInput ? Promise.resolve(inNamespace(cmds.nsArgv, cmds.nsInput)) : Promise.resolve();
  // On a failure inside the namespace the host ip gets an empty batch and exits at once.
  const hostDone = cmds.hostInput ? runTool(tools.ip, ['-batch', '-'], { input: nsDone.then(() => cmds.hostInput) }) : Promise.resolve('');
  const [ns, host] = await Promise.allSettled([nsDone, hostDone]);
  if (ns.status === 'rejected') throw ns.reason;
  if (host.status === 'rejected') throw host.reason;
}

/** Runs the plan inside an existing namespace. */
export function plumbExisting(netnsPath: string, plan: PlumbPlan, tools: Tools, hostNsPath: string): Promise<void> {
  return plumb(plan, tools, hostNsPath, (argv, input) => runTool(tools.nsenter, [`--net=${netnsPath}`, ...argv], { input }));
}

/** Deletes host-side veths (the container end goes with each); missing ones are skipped. */
export async function deleteHostVeths(names: readonly string[], ip: string): Promise<void> {
  if (names.length === 0) return;
  await runTool(ip, ['-force', '-batch', '-'], { input: names.map((n) => `link del dev ${n}\n`).join('') }).catch(() => {
    // -force carries on past a missing device but still exits non-zero; what matters is that none is left.
  });
}
