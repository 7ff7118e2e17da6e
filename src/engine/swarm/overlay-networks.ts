/**
 * Overlay networks of a swarm: the manager's decisions (a network's subnet and VXLAN id at create,
 * each service's VIP, each task's address, all kept on the records) and what every node makes of
 * them (the network's vxlan device flooding to the other nodes, the names its DNS answers, the VIP
 * rules in the namespaces of its containers on the network).
 *
 * Names on an overlay network, as dockerd answers them: the service name gives its VIP (in dnsrr
 * mode its tasks' addresses), `tasks.<service>` every running task's address, a task's container
 * name its address, for tasks on every node. The node's driver already answers for its own
 * containers; the rest is handed to it as extra records.
 *
 * Plain (attachable) containers' addresses, which each node picks, are kept unique across nodes by
 * overlay-addresses.ts. Node-side work (`sync`, most of it in overlay-node.ts) is idempotent and
 * serialized; it runs after
 * every change of services, tasks or nodes, when a container starts or dies (an attachable one needs
 * its VIP rules, and its address is shared) and when a network goes.
 */
import { conflict, errorMessage, invalidArgument, notFound, notImplemented } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { SerialRerun } from '../../lib/serial-rerun.js';
import { cidrContains, formatAddress, formatCidr, parseAddress, parseCidr, type Cidr } from '../../network/cidr.js';
import { hostRoutePrefixes } from '../../network/host-routes.js';
import type { NetworkController } from '../networks/network-controller.js';
import type { NetworkCreateSpec, NetworkRecord } from '../networks/network-record.js';
import { forbidden, Option } from '../networks/network-record.js';
import { VXLAN_OVERHEAD } from '../../network/vxlan-link.js';
import type { EventBus } from '../events.js';
import { allocateFromTop, INGRESS_VNI, nextVni, pickOverlaySubnet, VNI_OPTION } from './overlay-ipam.js';
import type { NameChange, SwarmStore } from './swarm-store.js';
import type { ServiceRecord, ServiceSpec, TaskNetwork, TaskRecord, VirtualIP } from './swarm-model.js';
import { networkTargets, OverlayNode, vniOf } from './overlay-node.js';
import { OverlayAddresses, type ClaimStore } from './overlay-addresses.js';
import { INGRESS_ENDPOINT, IngressMesh } from './ingress-mesh.js';
import { publishesIngress } from './service-spec.js';

export interface OverlayDeps {
  store: SwarmStore;
  driver: NetworkController;
  events: EventBus;
  /** The addresses of the cluster's other nodes (the vxlan devices' peers). */
  peers?: () => string[];
  /** Writes (undefined: deletes) `<kind>/<id>` in the cluster's store; nothing outside a cluster. */
  share?: (kind: string, id: string, doc: unknown) => void;
  /** As share, answered once etcd took it, taking or freeing the network's name (swarm-names.ts); nothing outside a cluster. */
  commit?: (kind: string, id: string, doc: unknown | undefined, name: NameChange) => Promise<void>;
  /** The cluster's store for claims that must be atomic (plain containers' addresses); undefined outside a cluster. */
  claims?: () => ClaimStore | undefined;
  /** Takes a container off a network as `docker network disconnect -f` does (its record and events too). */
  disconnect?: (network: string, container: string) => Promise<void>;
}

/** What a task's container is created with: its first network as NetworkMode, static addresses. */
export interface TaskContainerNetworks {
  mode: string;
  endpoints: Record<string, { IPAMConfig: { IPv4Address: string }; Aliases: string[] }>;
}

const UNDERLAY_MTU = 1500;

/** An overlay network as the cluster shares it (`networks/<id>`) and as each task carries it. */
export type SharedNetwork = NonNullable<TaskNetwork['network']> & { name: string };

function shared(n: NetworkRecord): SharedNetwork {
  return { name: n.name, subnet: n.subnet, gateway: n.gateway, options: n.options, labels: n.labels, attachable: n.attachable, internal: n.internal, ...(n.ingress ? { ingress: true } : {}) };
}

export class OverlayNetworks {
  readonly #d: OverlayDeps;
  /** Plain containers' addresses across nodes: shared, claimed in etcd, reserved here. */
  readonly addresses: OverlayAddresses;
  /** Networks removed on another manager, still here while containers are on them. */
  readonly #removed = new Set<string>();
  /** Networks of the cluster whose realisation here failed (a local network of the name stood in the way). */
  readonly #unrealised = new Map<string, SharedNetwork>();
  /** network id -> its realisation under way on this node. */
  readonly #realising = new Map<string, Promise<NetworkRecord>>();
  readonly #syncs = new SerialRerun(() => (this.#closed ? Promise.resolve() : this.#sync()), (err) => log.warn('overlay networking out of step', { error: errorMessage(err) }));
  #closed = false;
  readonly #unsubscribe: () => void;
  readonly #unjoin: () => void;
  /** What this node makes of the records: devices, names, VIP rules. */
  readonly #node: OverlayNode;
  /** The routing mesh's rules on this node. */
  readonly #mesh: IngressMesh;
  /** This node's own address on the ingress network (`ip/prefix`), once it has one. */
  #ingressAddr: { networkId: string; cidr: string } | undefined;

  constructor(d: OverlayDeps) {
    this.#d = d;
    this.addresses = new OverlayAddresses({ store: d.store, driver: d.driver, share: d.share, claims: d.claims, syncLater: () => this.sync() });
    this.#node = new OverlayNode(d);
    this.#mesh = new IngressMesh({ store: d.store, driver: d.driver, nodeAddress: (n, onBridge) => this.#ingressAddress(n, onBridge) });
    this.#unsubscribe = d.events.subscribe((ev) => {
      // Outside a swarm a container start costs nothing here.
      if (!d.store.cluster && !this.#node.active && this.#removed.size === 0) return;
      if (ev.Type === 'container' && ev.Action === 'die') this.#node.forget(ev.Actor.ID);
      if (ev.Type === 'container' && ev.Action === 'die') this.addresses.ended(ev.Actor.ID);
      if (ev.Type === 'network' && ev.Action === 'disconnect' && ev.Actor.Attributes.container) this.addresses.ended(ev.Actor.Attributes.container);
      if ((ev.Type === 'container' && (ev.Action === 'start' || ev.Action === 'die')) || (ev.Type === 'network' && (ev.Action === 'destroy' || ev.Action === 'disconnect'))) this.sync();
    });
    // A container's process must find its network's device and its VIP rules there when it starts.
    this.#unjoin = d.driver.onOverlayJoin(async () => {
      this.sync();
      await this.settled();
    });
  }

  close(): void {
    this.#closed = true;
    this.#unsubscribe();
    this.#unjoin();
  }

  // --- manager: decisions kept on the records ---

  /** `network create -d overlay`: a subnet from the swarm's pool unless given, a VXLAN id, the overlay MTU. */
  async prepareCreate(spec: NetworkCreateSpec): Promise<NetworkCreateSpec> {
    const c = this.#d.store.cluster;
    if (!c) return spec;
    // Refused rather than ignored: each node would pick its own IPv6 subnet, and nothing encrypts.
    if (spec.enableIPv6) throw notImplemented('IPv6 on overlay networks is not supported by Berth yet');
    if (spec.options?.encrypted !== undefined) throw notImplemented('encrypted overlay networks are not supported by Berth yet');
    const networks = this.#d.driver.list();
    const ingress = spec.ingress ? networks.find((n) => n.ingress) : undefined;
    if (ingress) throw conflict(`rpc error: code = AlreadyExists desc = ingress network (${ingress.id}) is already present`);
    const options = { ...(spec.options ?? {}) };
    const vnis = new Set(networks.map(vniOf).filter((v): v is number => v !== undefined));
    if (!options[VNI_OPTION]) options[VNI_OPTION] = String(spec.ingress && !vnis.has(INGRESS_VNI) ? INGRESS_VNI : nextVni(vnis));
    else if (!(Number(options[VNI_OPTION]) > 0 && Number(options[VNI_OPTION]) <= 0xffffff)) throw invalidArgument(`invalid VXLAN id ${options[VNI_OPTION]}`);
    if (!options[Option.mtu]) options[Option.mtu] = String(UNDERLAY_MTU - VXLAN_OVERHEAD);
    let ipam = spec.ipam;
    if (!ipam?.config?.some((x) => x.subnet && !x.subnet.includes(':'))) {
      const taken: Cidr[] = [...networks.flatMap((n) => [n.subnet, n.subnet6]).filter((s): s is string => !!s).map((s) => parseCidr(s, false)!), ...(await hostRoutePrefixes())];
      const subnet = pickOverlaySubnet(c.defaultAddrPool, c.subnetSize, taken);
      if (!subnet) throw forbidden('could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network');
      ipam = { ...(ipam ?? {}), config: [{ subnet: formatCidr(subnet) }, ...(ipam?.config ?? [])] };
    }
    return { ...spec, options, ipam };
  }

  /**
   * The VIPs a service has with this spec: one per overlay network it is on, kept from `previous`
   * where the network stays. Throws for a network that does not exist or is not an overlay.
   */
  virtualIPs(spec: ServiceSpec, previous: readonly VirtualIP[] = [], serviceId = ''): VirtualIP[] {
    const nets = this.#serviceNetworks(spec);
    const ingress = this.#ingressOf(spec);
    if (spec.EndpointSpec?.Mode === 'dnsrr') return [];
    const out: VirtualIP[] = [];
    // dockerd lists the ingress VIP first.
    for (const net of [...(ingress ? [ingress] : []), ...nets.map((x) => x.net)]) {
      const kept = previous.find((v) => v.NetworkID === net.id);
      if (kept) {
        out.push(kept);
        continue;
      }
      out.push({ NetworkID: net.id, Addr: this.#allocate(net, serviceId) });
    }
    return out;
  }

  /** Addresses for a new task on each of its service's overlay networks (on the record, before it is saved). */
  attachTask(s: ServiceRecord, t: TaskRecord): void {
    const nets = this.#serviceNetworks(s.spec);
    // First, as dockerd lists it (the container's NetworkMode is another network where it has one).
    const ingress = this.#ingressOf(s.spec);
    if (ingress) nets.unshift({ net: ingress, aliases: [] });
    if (nets.length === 0) return;
    t.networks = nets.map(({ net, aliases }): TaskNetwork => ({
      networkId: net.id,
      networkName: net.name,
      network: (({ name: _name, ...rest }) => rest)(shared(net)),
      addresses: [this.#allocate(net, '')],
      ...(aliases.length ? { aliases } : {}),
    }));
  }

  /**
   * The create request's networks for a task's container, or undefined for a task on none. A network
   * this node does not have yet is realised from the task's copy of it, under the cluster's id.
   */
  async containerNetworks(t: TaskRecord): Promise<TaskContainerNetworks | undefined> {
    if (!t.networks?.length) return undefined;
    const endpoints: TaskContainerNetworks['endpoints'] = {};
    let mode: string | undefined;
    for (const a of t.networks) {
      const local = this.#d.driver.list().find((n) => n.id === a.networkId) ?? (await this.#realise(a));
      endpoints[local.name] = { IPAMConfig: { IPv4Address: a.addresses[0]!.split('/')[0]! }, Aliases: a.aliases ?? [] };
      // The container's default route goes through its own networks, not the routing mesh's.
      if (!mode && !local.ingress) mode = local.name;
    }
    return { mode: mode ?? Object.keys(endpoints)[0]!, endpoints };
  }

  async #realise(a: TaskNetwork): Promise<NetworkRecord> {
    const n = a.network;
    if (!n) throw notFound(`network ${a.networkName} not found`);
    // A pending realisation of the same network by a concurrent task start.
    const pending = this.#realising.get(a.networkId);
    if (pending) return pending;
    const made = this.#d.driver
      .create({ id: a.networkId, name: a.networkName, driver: 'overlay', scope: 'swarm', attachable: n.attachable, internal: n.internal, ingress: n.ingress === true, labels: n.labels, options: n.options, ipam: { config: [{ subnet: n.subnet, gateway: n.gateway }] } })
      .finally(() => this.#realising.delete(a.networkId));
    this.#realising.set(a.networkId, made);
    log.info('overlay network realised on this node', { network: a.networkName, id: a.networkId });
    return made;
  }

  /**
   * `swarm init`: the routing mesh's network, `ingress` (overlay, VXLAN id 4096, the first free
   * subnet of the swarm's pool), as dockerd makes it: it carries the routing mesh (ingress-mesh.ts);
   * other nodes realise it from the cluster's copy.
   */
  async createIngress(): Promise<void> {
    if (this.#d.driver.list().some((n) => n.ingress)) return;
    const n = await this.#d.driver.create(await this.prepareCreate({ name: 'ingress', driver: 'overlay', scope: 'swarm', ingress: true, labels: {}, options: {} }));
    await this.created(n);
  }

  /**
   * Leaving the swarm (its task containers gone already): every swarm network goes from this node,
   * ingress too (a new swarm makes its own), as with dockerd, which first disconnects the plain
   * containers still on an attachable one; then the mesh's rules, their vxlan devices and ARP guard,
   * and what was known of other nodes' addresses.
   */
  async left(): Promise<void> {
    await this.#mesh.clear().catch((err) => log.warn('removing the routing mesh rules failed', { error: errorMessage(err) }));
    this.#ingressAddr = undefined;
    this.addresses.clear();
    this.#removed.clear();
    // A network being realised would come back after the loop.
    await Promise.allSettled(this.#realising.values());
    await this.settled();
    for (const n of this.#d.driver.list()) {
      if (!n.overlay) continue;
      for (const e of this.#d.driver.endpointsOf(n.id)) {
        await this.#d.disconnect?.(n.id, e.containerId).catch((err) => log.warn('disconnecting a container from a swarm network failed', { network: n.name, container: e.containerId, error: errorMessage(err) }));
      }
      await this.#d.driver.remove(n.id).catch((err) => log.warn('removing a swarm network failed', { network: n.name, error: errorMessage(err) }));
    }
    // Outside a swarm now, the sync takes every vxlan device away.
    this.sync();
    await this.settled();
  }

  /**
   * An overlay network's peers as inspect shows them (dockerd: the nodes its gossip reaches): for the
   * ingress network every node of the cluster, for another the nodes running its tasks, and this
   * node while its containers are on it.
   */
  peers(n: NetworkRecord): { Name: string; IP: string }[] {
    const self = this.#d.store.cluster?.node.id;
    const on = new Set<string>();
    for (const t of this.#d.store.tasks.values()) if (t.desiredState === 'running' && t.networks?.some((a) => a.networkId === n.id)) on.add(t.nodeId);
    if (self && this.#d.driver.endpointsOf(n.id).length) on.add(self);
    return [...this.#d.store.nodes.values()]
      .filter((node) => node.addr && (n.ingress || on.has(node.id)))
      .map((node) => ({ Name: node.description?.hostname || node.id, IP: node.addr }));
  }

  /**
   * Before this manager creates a network named `name`: a network of that name realised here from
   * the cluster, and removed on another manager since, goes now, as the news of its removal would
   * take it a moment later, rather than the create being refused meanwhile (etcd is asked, as for
   * services, secrets and configs). One that containers here are still on stays, and refuses it.
   */
  async freeStaleName(name: string): Promise<void> {
    const local = this.#d.driver.list().find((n) => n.overlay && n.name === name);
    if (!local) return;
    if (!this.#removed.has(local.id)) {
      if (await this.#d.store.nameHeld('networks', name, [local.id])) return;
      this.applyRemote(local.id, undefined);
    }
    await this.settled();
  }

  /**
   * A network made here goes to the cluster, its name taken there. Refused (another manager's
   * network holds the name), it goes from here again, and the cluster's network of that name, which
   * could not be realised while this one stood in its way, is realised now.
   */
  async created(n: NetworkRecord): Promise<void> {
    try {
      await this.#d.commit?.('networks', n.id, shared(n), { takes: n.name });
    } catch (err) {
      await this.#d.driver.remove(n.id).catch((e) => log.warn('removing a refused swarm network failed', { network: n.name, error: errorMessage(e) }));
      for (const [id, doc] of this.#unrealised) this.applyRemote(id, doc);
      throw err;
    }
  }

  /**
   * A network removed here goes from the cluster, its name freed. It is gone here already: when etcd
   * does not answer, its deletion is queued instead (the name stays taken until the leader's next
   * fitting of names finds it without its record: swarm-names.ts).
   */
  async removed(n: NetworkRecord): Promise<void> {
    await this.#d.commit?.('networks', n.id, undefined, { frees: n.name }).catch((err) => {
      log.warn('the swarm network\'s removal did not reach etcd; it goes there when etcd answers', { network: n.name, error: errorMessage(err) });
      this.#d.share?.('networks', n.id, undefined);
    });
  }

  /** The swarm's networks this manager holds (every one there is, but those removed elsewhere and still in use here). */
  swarmNetworks(): { id: string; name: string }[] {
    return this.#d.driver
      .list()
      .filter((n) => n.overlay && !this.#removed.has(n.id))
      .map((n) => ({ id: n.id, name: n.name }));
  }

  /**
   * A network created or removed on another manager: managers list every overlay network, so one
   * made elsewhere is realised here (its bridge; the vxlan device only once something uses it), and
   * so do workers for attachable ones, which their own containers may join. A removed one goes once
   * no container here is on it. Workers learn other networks from their tasks.
   */
  applyRemote(id: string, doc: SharedNetwork | undefined): void {
    const local = this.#d.driver.list().find((n) => n.id === id);
    this.#unrealised.delete(id);
    if (!doc) {
      if (local) this.#removed.add(id);
      this.sync();
      return;
    }
    this.#removed.delete(id);
    // Every node lists the routing mesh's network, as with dockerd.
    if (local || (this.#d.store.cluster?.node.spec.Role !== 'manager' && !doc.attachable && !doc.ingress)) return;
    // A network of its name, removed from the cluster, is still here: this one follows its drop.
    if (this.#d.driver.list().some((n) => n.name === doc.name && this.#removed.has(n.id))) {
      this.#unrealised.set(id, doc);
      this.sync();
      return;
    }
    this.#realise({ networkId: id, networkName: doc.name, addresses: [], network: doc }).then(
      // What waited for it (the routing mesh on ingress) follows now.
      () => this.sync(),
      (err) => {
        this.#unrealised.set(id, doc);
        log.warn('realising a swarm network failed', { network: id, error: errorMessage(err) });
      },
    );
  }

  /**
   * Networks removed elsewhere go here once no container here is on them any more. A network the
   * cluster made since with one's name could not be realised while it stood: it is, now.
   */
  async #dropRemoved(): Promise<void> {
    let dropped = false;
    for (const id of [...this.#removed]) {
      if (this.#d.driver.endpointsOf(id).length) continue;
      // Kept among the removed until it is gone: a network of its name heard meanwhile waits (applyRemote).
      await this.#d.driver.remove(id).catch((err) => log.warn('removing a swarm network failed', { network: id, error: errorMessage(err) }));
      this.#removed.delete(id);
      dropped = true;
    }
    if (dropped) for (const [id, doc] of this.#unrealised) this.applyRemote(id, doc);
  }

  /** A network services still use cannot go (dockerd: 403 with this text). */
  assertUnused(n: NetworkRecord): void {
    for (const s of this.#d.store.services.values()) {
      if (n.ingress && s.ports.some((p) => p.PublishMode === 'ingress')) {
        throw invalidArgument(`rpc error: code = FailedPrecondition desc = ingress network cannot be removed because service ${s.id} depends on it`);
      }
      if (networkTargets(s.spec).some((x) => x.Target === n.id || x.Target === n.name)) {
        throw conflict(`rpc error: code = FailedPrecondition desc = network ${n.id} is in use by service ${s.id}`);
      }
    }
  }

  #serviceNetworks(spec: ServiceSpec): { net: NetworkRecord; aliases: string[] }[] {
    const out: { net: NetworkRecord; aliases: string[] }[] = [];
    for (const x of networkTargets(spec)) {
      let net: NetworkRecord;
      try {
        net = this.#d.driver.get(x.Target);
      } catch {
        throw notFound(`network ${x.Target} not found`);
      }
      if (!net.overlay) throw invalidArgument(`network ${net.name} is not a swarm-scoped network: services can only use overlay networks`);
      if (out.some((o) => o.net.id === net.id)) throw invalidArgument(`service cannot be attached to network ${net.name} more than once`);
      out.push({ net, aliases: x.Aliases ?? [] });
    }
    return out;
  }

  /**
   * The ingress network, for a service that publishes a port in ingress mode (dockerd's refusal
   * without one); undefined for a service that publishes none.
   */
  #ingressOf(spec: ServiceSpec): NetworkRecord | undefined {
    if (!publishesIngress(spec)) return undefined;
    const ingress = this.#d.driver.list().find((n) => n.ingress);
    if (!ingress) throw invalidArgument('rpc error: code = FailedPrecondition desc = service needs ingress network, but no ingress network is present');
    return ingress;
  }

  /** A free address of the network, counting every VIP, every task's address and this node's endpoints. */
  #allocate(net: NetworkRecord, exceptService: string, from: 'top' | 'bottom' = 'top'): string {
    const subnet = parseCidr(net.subnet)!;
    const used = new Set<bigint>();
    const add = (a: string | undefined) => {
      const p = a ? parseAddress(a.split('/')[0]!) : null;
      if (p) used.add(p.value);
    };
    for (const s of this.#d.store.services.values()) if (s.id !== exceptService) for (const v of s.virtualIPs ?? []) if (v.NetworkID === net.id) add(v.Addr);
    for (const t of this.#d.store.tasks.values()) for (const a of t.networks ?? []) if (a.networkId === net.id) a.addresses.forEach(add);
    for (const e of this.#d.driver.endpointsOf(net.id)) add(e.ipAddress);
    this.addresses.taken(net.id).forEach(add);
    for (const a of Object.values(net.auxAddresses ?? {})) add(a);
    const a = allocateFromTop(subnet, parseAddress(net.gateway) ?? undefined, used, from);
    if (!a) throw forbidden(`no available IPv4 addresses on network ${net.name}`);
    return `${formatAddress(a)}/${subnet.prefix}`;
  }

  // --- every node: realising the decisions ---

  /** Brings this node in line with the records (in the background; changes arriving meanwhile run once more). */
  sync(): void {
    if (!this.#closed) this.#syncs.run();
  }

  /** Resolves once no sync is under way (tests, shutdown). */
  async settled(): Promise<void> {
    for (let i = 0; i < 100 && this.#syncs.running; i++) await this.#syncs.running;
  }

  async #sync(): Promise<void> {
    await this.#dropRemoved();
    const overlays = this.#d.driver.list().filter((n) => n.overlay);
    const ingress = this.#ingressAddr && `${this.#ingressAddr.networkId}/${this.#ingressAddr.cidr.split('/')[0]}`;
    await this.addresses.sync(overlays, ingress);
    try {
      await this.#node.apply(overlays);
    } finally {
      // Published ports answer whatever became of another network's device.
      await this.#mesh.apply(overlays);
    }
  }

  /**
   * This node's own address on the ingress network (`ip/prefix`), the source of what the routing
   * mesh sends over it: the one its bridge carries from before a restart, else the lowest free one,
   * claimed in the cluster as a plain container's address is.
   */
  async #ingressAddress(net: NetworkRecord, onBridge: () => Promise<string[]>): Promise<string> {
    if (this.#ingressAddr?.networkId === net.id) return this.#ingressAddr.cidr;
    const subnet = parseCidr(net.subnet)!;
    const inSubnet = (a: string) => {
      const p = parseAddress(a);
      return !!p && cidrContains(subnet, p);
    };
    const kept = (await onBridge()).map((a) => a.split('/')[0]!).find((a) => a !== net.gateway && inSubnet(a));
    const mine = (ip: string) => {
      const c = this.addresses.holder(net.id, ip);
      return !c || (c.node === this.#d.store.selfId && c.container === INGRESS_ENDPOINT);
    };
    const ip = await this.addresses.claimAddress(net, INGRESS_ENDPOINT, (skip) => (kept && (!skip.has(kept) || mine(kept)) ? kept : this.#allocate(net, '', 'bottom').split('/')[0]!));
    this.#ingressAddr = { networkId: net.id, cidr: `${ip}/${subnet.prefix}` };
    return this.#ingressAddr.cidr;
  }
}
