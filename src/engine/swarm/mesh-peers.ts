/**
 * What the routing mesh needs to know of the other nodes: which connections come from them, and
 * where the service's tasks that run elsewhere are (their node's address).
 */
import type { Route, TaskAddresses } from './ingress-proxy.js';
import type { SwarmStore } from './swarm-store.js';
import type { NodeRecord } from './swarm-model.js';

/** The rest of the cluster, for tasks on other nodes. */
export interface MeshPeers {
  /** Whether a connection comes from another node's listener. */
  isPeer(address: string): boolean;
  /** The address of the node of each running task of the service elsewhere (one entry per task). */
  nodesOf(serviceId: string): string[];
  /** This node's address, the source of connections to other nodes (so they see a peer). */
  localAddress(): string | undefined;
}

export interface MeshTarget {
  host: string;
  port: number;
  /** Set for another node's listener: connect from this node's address, so it sees a peer. */
  localAddress?: string;
}

/**
 * Where a connection (or UDP session) to a published port may go: the service's local tasks, and,
 * unless it came from another node, the other nodes that run its tasks (one entry per task).
 */
export function meshTargets(addresses: TaskAddresses, peers: MeshPeers | undefined, route: Route, publishedPort: number, from: string): MeshTarget[] {
  const fromPeer = peers?.isPeer(unmapped(from)) ?? false;
  return [
    ...addresses(route.serviceId).map((host) => ({ host, port: route.targetPort })),
    ...(fromPeer || !peers ? [] : peers.nodesOf(route.serviceId).map((host) => ({ host, port: publishedPort, localAddress: peers.localAddress() }))),
  ];
}

/** The cluster as the store knows it. */
export function meshPeers(store: SwarmStore, nodes: () => NodeRecord[]): MeshPeers {
  const here = () => store.cluster?.node;
  const others = () => nodes().filter((n) => n.id !== here()?.id && n.addr);
  return {
    isPeer: (address) => others().some((n) => n.addr === address),
    nodesOf: (serviceId) => {
      const addr = new Map(others().map((n) => [n.id, n.addr]));
      return store
        .tasksOf(serviceId)
        .filter((t) => t.status.state === 'running' && t.desiredState === 'running')
        .flatMap((t) => (addr.has(t.nodeId) ? [addr.get(t.nodeId)!] : []));
    },
    localAddress: () => here()?.addr,
  };
}

/** `::ffff:a.b.c.d` as `a.b.c.d`. */
function unmapped(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}
