/**
 * The routing mesh on one node: every port a service publishes in ingress mode answers on this node's
 * addresses (and its loopback) and goes to one of the service's running tasks over the `ingress`
 * overlay, on this node or another. The kernel does the work (network/ingress-mesh.ts: nft DNAT
 * balanced by numgen, SNAT to this node's own address on ingress), so a published port keeps
 * answering while berthd restarts, and no traffic passes through berthd.
 *
 * What this node needs for it: its end of ingress (the bridge every node has, the vxlan device
 * overlay-node.ts makes once a service publishes an ingress port), an address of its own on ingress
 * (claimed in the cluster, overlay-networks.ts), and the rules, rewritten when services or tasks
 * change (only when the text changed).
 */
import type { NetworkController } from '../networks/network-controller.js';
import type { NetworkRecord } from '../networks/network-record.js';
import { addBridgeAddress, bridgeAddresses, meshRules, writeMesh, type MeshPort } from '../../network/ingress-mesh.js';
import type { SwarmStore } from './swarm-store.js';
import type { ServiceRecord, TaskRecord } from './swarm-model.js';

/** The name a node's own address on ingress is claimed under (dockerd's sandbox for it has this name). */
export const INGRESS_ENDPOINT = 'ingress-sbox';

const IP = ['ip'];
const NFT = ['nft'];

/** Whether some service publishes a port through the mesh (every node then needs its end of ingress). */
export function meshInUse(services: Iterable<ServiceRecord>): boolean {
  for (const s of services) if (s.ports.some((p) => p.PublishMode === 'ingress' && p.PublishedPort)) return true;
  return false;
}

export interface IngressMeshDeps {
  store: SwarmStore;
  driver: NetworkController;
  /** This node's address on the ingress network (`ip/prefix`), given what its bridge carries now. */
  nodeAddress: (ingress: NetworkRecord, onBridge: () => Promise<string[]>) => Promise<string>;
}

export class IngressMesh {
  readonly #d: IngressMeshDeps;
  /** The rules as last written; undefined: not known (berthd just started). */
  #applied: string | undefined;
  /** The bridge this node's address was put on. */
  #addressed: string | undefined;

  constructor(d: IngressMeshDeps) {
    this.#d = d;
  }

  get #table(): string {
    return this.#d.driver.prefix;
  }

  /** Makes the rules match the services and their running tasks on ingress. */
  async apply(overlays: NetworkRecord[]): Promise<void> {
    const ingress = this.#d.store.cluster ? overlays.find((n) => n.ingress) : undefined;
    const ports = ingress ? this.#ports(ingress) : [];
    if (!ingress || !ports.some((p) => p.backends.length)) return this.#write(meshRules(this.#table, undefined));
    const cidr = await this.#d.nodeAddress(ingress, () => bridgeAddresses(IP, ingress.bridgeName));
    if (this.#addressed !== `${ingress.bridgeName} ${cidr}`) {
      await addBridgeAddress(IP, ingress.bridgeName, cidr);
      this.#addressed = `${ingress.bridgeName} ${cidr}`;
    }
    await this.#write(meshRules(this.#table, { bridge: ingress.bridgeName, nodeAddress: cidr.split('/')[0]!, ports }));
  }

  /** Leaving the swarm: no published port answers here any more. */
  async clear(): Promise<void> {
    this.#addressed = undefined;
    this.#applied = undefined;
    await writeMesh(NFT, meshRules(this.#table, undefined));
  }

  async #write(text: string): Promise<void> {
    if (text === this.#applied) return;
    await writeMesh(NFT, text);
    this.#applied = text;
  }

  /** Each ingress-mode port with the addresses on ingress of its service's running tasks. */
  #ports(ingress: NetworkRecord): MeshPort[] {
    const out: MeshPort[] = [];
    for (const s of this.#d.store.services.values()) {
      const ports = s.ports.filter((p) => p.PublishMode === 'ingress' && p.PublishedPort && p.TargetPort && (p.Protocol === 'tcp' || p.Protocol === 'udp' || !p.Protocol));
      if (!ports.length) continue;
      const backends = this.#d.store
        .tasksOf(s.id)
        .filter((t: TaskRecord) => t.status.state === 'running' && t.desiredState === 'running')
        .flatMap((t) => t.networks?.find((a) => a.networkId === ingress.id)?.addresses[0]?.split('/')[0] ?? []);
      for (const p of ports) out.push({ protocol: (p.Protocol ?? 'tcp') as 'tcp' | 'udp', publishedPort: p.PublishedPort!, targetPort: p.TargetPort!, backends });
    }
    return out;
  }
}
