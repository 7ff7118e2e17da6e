/**
 * The network service, the facade routes call: networks as the API sees them (the controller's records
 * plus which containers use them), events, and connect/disconnect that also work on stopped containers
 * (remembered for their next start).
 */
import { BerthError, conflict, invalidArgument } from '../../lib/errors.js';
import type { NetworkController, NetworkRecord, NetworkCreateSpec } from './network-controller.js';
import { shownDriver } from './network-record.js';
export { shownDriver, shownScope } from './network-record.js';
export type { NetworkRecord, NetworkCreateSpec };
import type { ContainerService } from '../containers/container-service.js';
import type { EventBus } from '../events.js';
import { configuredNetworks, networkModeOf, toDockerNetwork, type EndpointRequest } from './container-networking.js';

export type { EndpointRequest };

/** What a swarm adds to overlay networks: a subnet and VXLAN id at create, a refusal while services use one. */
export interface OverlayPolicy {
  prepareCreate(spec: NetworkCreateSpec): Promise<NetworkCreateSpec>;
  /** Drops this node's copy of a network of that name that the cluster no longer has (removed elsewhere, not heard yet). */
  freeStaleName(name: string): Promise<void>;
  assertUnused(n: NetworkRecord): void;
  /** The nodes an overlay network reaches (inspect's Peers). */
  peers(n: NetworkRecord): { Name: string; IP: string }[];
  /** The network exists / is gone here: the rest of the cluster follows (created rejects when its name is taken there). */
  created(n: NetworkRecord): Promise<void>;
  removed(n: NetworkRecord): Promise<void>;
}

export class NetworkService {
  /** Names of overlay networks this node is creating (made here, not yet taken in the cluster). */
  readonly #overlayCreates = new Set<string>();

  constructor(
    readonly controller: NetworkController,
    private readonly containers: ContainerService,
    private readonly events: EventBus,
    /** Whether this node manages a swarm: `overlay` networks need one, as with dockerd. */
    private readonly swarmActive: () => boolean = () => false,
    private readonly overlay: () => OverlayPolicy | undefined = () => undefined,
  ) {}

  list(): NetworkRecord[] {
    return this.controller.list();
  }

  get(idOrName: string): NetworkRecord {
    return this.controller.get(idOrName);
  }

  endpoints(n: NetworkRecord) {
    return this.controller.endpointsOf(n.id);
  }

  /** An overlay network's peers (the swarm's nodes it reaches); none for other networks. */
  peers(n: NetworkRecord): { Name: string; IP: string }[] {
    return n.overlay ? (this.overlay()?.peers(n) ?? []) : [];
  }

  async create(spec: NetworkCreateSpec): Promise<NetworkRecord> {
    if (spec.driver === 'overlay' && !this.swarmActive()) {
      throw new BerthError('forbidden', 'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.');
    }
    const overlay = spec.driver === 'overlay' ? this.overlay() : undefined;
    if (!overlay) return this.#published(await this.controller.create(spec));
    // Not while this node creates one of that name itself: its copy is not in etcd yet.
    if (this.#overlayCreates.has(spec.name)) throw conflict(`network with name ${spec.name} already exists`);
    this.#overlayCreates.add(spec.name);
    try {
      await overlay.freeStaleName(spec.name);
      const n = await this.controller.create(await overlay.prepareCreate(spec));
      // Refused when another manager's network holds the name in the cluster (this one is gone again then).
      await overlay.created(n);
      return this.#published(n);
    } finally {
      this.#overlayCreates.delete(spec.name);
    }
  }

  #published(n: NetworkRecord): NetworkRecord {
    this.events.publish('network', 'create', n.id, { name: n.name, type: shownDriver(n) });
    return n;
  }

  /** 409 while containers are attached (the contract; dockerd answers 403). */
  async remove(idOrName: string): Promise<void> {
    const n = this.controller.get(idOrName);
    if (n.overlay) this.overlay()?.assertUnused(n);
    try {
      await this.controller.remove(n.id);
    } catch (err) {
      if (err instanceof BerthError && err.kind === 'forbidden' && /active endpoints/.test(err.message)) throw conflict(err.message);
      throw err;
    }
    if (n.overlay) await this.overlay()?.removed(n);
    this.events.publish('network', 'destroy', n.id, { name: n.name, type: shownDriver(n) });
  }

  async prune(keep: (n: NetworkRecord) => boolean): Promise<string[]> {
    // Networks named by stopped containers stay: they would need them at their next start.
    const wanted = new Set(this.containers.all().flatMap((c) => [networkModeOf(c), ...Object.keys(c.networkingConfig)]));
    // The swarm's ingress network stays too, as with dockerd.
    const removed = await this.controller.prune((n) => keep(n) || n.ingress === true || wanted.has(n.name) || wanted.has(n.id));
    for (const name of removed) this.events.publish('network', 'destroy', name, { name, type: 'bridge' });
    return removed;
  }

  async connect(idOrName: string, containerRef: string, endpoint: EndpointRequest): Promise<void> {
    const n = this.controller.get(idOrName);
    const c = this.containers.get(containerRef);
    const running = c.state.status === 'running' || c.state.status === 'paused';
    const configured = configuredNetworks(c);
    if (running ? c.network.endpoints[n.name] : configured.includes(n.name)) {
      throw new BerthError('forbidden', `endpoint with name ${c.name} already exists in network ${n.name}`);
    }
    if (configured.length > 0 && (n.name === 'none' || configured.includes('none'))) {
      throw invalidArgument('container cannot be connected to multiple networks with one of the networks in private (none) mode');
    }
    if (running && c.network.sandboxKey) {
      const info = await this.controller.connect({
        containerId: c.id, name: c.name, netnsPath: c.network.sandboxKey, network: n.id,
        aliases: endpoint.Aliases ?? [], ipv4: endpoint.IPAMConfig?.IPv4Address || undefined, mac: endpoint.MacAddress || undefined,
        dns: c.hostConfig.Dns ?? undefined,
      });
      Object.assign(c.network.endpoints, toDockerNetwork({ endpoints: { [n.name]: info }, ports: [] }, { [n.name]: endpoint }).endpoints);
    }
    c.networkingConfig = { ...c.networkingConfig, [n.name]: endpoint };
    if (networkModeOf(c) === n.name) c.modeDisconnected = undefined;
    this.containers.save(c);
    this.events.publish('network', 'connect', n.id, { container: c.id, name: n.name, type: shownDriver(n) });
  }

  async disconnect(idOrName: string, containerRef: string, force: boolean): Promise<void> {
    const n = this.controller.get(idOrName);
    // With force, a container that is already gone is not an error.
    const c = force ? this.containers.find(containerRef) : this.containers.get(containerRef);
    if (!c) return;
    const running = c.state.status === 'running' || c.state.status === 'paused';
    const attached = running && !!c.network.endpoints[n.name];
    const configured = configuredNetworks(c).includes(n.name);
    if (!attached && !configured) throw new BerthError('forbidden', `container ${c.id} is not connected to network ${n.name}`);
    if (attached) await this.controller.disconnect(c.id, n.id);
    delete c.network.endpoints[n.name];
    const { [n.name]: _gone, ...rest } = c.networkingConfig;
    c.networkingConfig = rest;
    // NetworkMode stays what it was, as in dockerd (compose 1.29 disconnects and reconnects it before start).
    if (networkModeOf(c) === n.name) c.modeDisconnected = true;
    this.containers.save(c);
    this.events.publish('network', 'disconnect', n.id, { container: c.id, name: n.name, type: shownDriver(n) });
  }
}
