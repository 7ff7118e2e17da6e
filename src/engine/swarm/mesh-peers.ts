/**
 * What the routing mesh needs to know of the other nodes: which connections come from them, and
 * where the service's tasks that run elsewhere are (their node's address).
 */
import type { MeshPeers } from './ingress-proxy.js';
import type { SwarmStore } from './swarm-store.js';
import type { NodeRecord } from './swarm-model.js';

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
