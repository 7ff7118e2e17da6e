/**
 * Containers on networks: their endpoints (interfaces with persisted addresses, IPAM's lowest free
 * or a static one), published ports (probed, then reserved with the addresses in one transaction),
 * DNS names, and the namespaces made ahead for the default bridge and `none`. The bridge driver plumbs
 * what is decided here.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { randomHex } from '../../lib/random-hex.js';
import { BerthError, conflict, errorMessage, invalidArgument, notFound } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { StoredPort } from '../../state/network-records.js';
import type { DnsNetwork } from '../../network/aardvark.js';
import type { BridgeDriver } from '../../network/bridge-driver.js';
import { parseAddress } from '../../network/cidr.js';
import type { PlumbPlan } from '../../network/endpoint-plumbing.js';
import { macForIPv4, randomMac } from '../../network/mac.js';
import { mountPoints } from '../../network/netns.js';
import type { ReadyNetns, TakenNetns } from '../../network/ready-pool.js';
import { AheadNamespaces } from './ahead-namespaces.js';
import type { DrainingVeth } from '../../network/veth-drain.js';
import type { BridgeNetworks } from './bridge-networks.js';
import { assignAddresses } from './endpoint-addresses.js';
import { assertAttachable, bridgeSettings, forbidden, type NetworkRecord } from './network-record.js';
import type { NetworkTable } from './network-table.js';
import type { AddressClaims, AttachNetwork, AttachResult, AttachSpec, ConnectSpec, Endpoint, EndpointInfo, SetupOptions, SetupResult } from './network-types.js';
import { dnsNetwork, dnsRoute, endpointInfo, plumbEndpoint, routesVia, toFirewallPort, toPublished } from './plumbing-specs.js';
import { portClash, reservePorts } from './port-reservation.js';


export interface ContainerEndpointsOptions {
  table: NetworkTable;
  driver: BridgeDriver;
  networks: BridgeNetworks;
  /** Whether the controller is running: namespaces are made ahead and endpoints made only then. */
  live: () => boolean;
  /** Network namespaces kept ready, for the default bridge and with only loopback, each. */
  readyNamespaces: number;
  /** Awaited once a container's endpoints on overlay networks are plumbed, before its process starts. */
  overlayJoined: (containerId: string) => Promise<void>;
  addressClaims?: () => AddressClaims | undefined;
}

export class ContainerEndpoints {
  readonly #table: NetworkTable;
  readonly #networks: Map<string, NetworkRecord>;
  readonly #endpoints: Map<string, Map<string, Endpoint>>;
  readonly #driver: BridgeDriver;
  readonly #nets: BridgeNetworks;
  readonly #live: () => boolean;
  readonly #overlayJoined: (containerId: string) => Promise<void>;
  /** Namespaces made ahead: on the default bridge, and loopback only (for none). */
  readonly #ahead: AheadNamespaces;
  readonly #claims: () => AddressClaims | undefined;

  constructor(opts: ContainerEndpointsOptions) {
    this.#table = opts.table;
    this.#networks = opts.table.networks;
    this.#endpoints = opts.table.endpoints;
    this.#driver = opts.driver;
    this.#nets = opts.networks;
    this.#live = opts.live;
    this.#overlayJoined = opts.overlayJoined;
    this.#claims = opts.addressClaims ?? (() => undefined);
    this.#ahead = new AheadNamespaces({ table: opts.table, driver: opts.driver, live: opts.live, size: opts.readyNamespaces, usedAddresses: (net, family) => this.#usedAddresses(net, family) });
  }

  /** At start-up: endpoints whose namespace is gone (the container ended while the daemon was down, or a reboot) are released. */
  async releaseVanished(): Promise<void> {
    const mounted = await mountPoints();
    for (const [containerId, eps] of this.#endpoints) {
      const path = await this.#driver.netns.target(eps.values().next().value!.netnsPath);
      if (!mounted.has(path)) {
        log.info('releasing network endpoints of a vanished namespace', { container: containerId });
        this.#table.forget(containerId);
      }
    }
  }

  hostVeths(): Set<string> {
    return new Set([...this.#endpoints.values()].flatMap((eps) => [...eps.values()].map((e) => e.hostVeth)));
  }

  /** Starts making namespaces ahead (once the controller is live). */
  startReady(): void {
    this.#ahead.start();
  }

  /** Drops the namespaces made ahead and waits for the driver's background work. */
  async stopReady(): Promise<void> {
    await this.#ahead.stop();
    await this.#driver.quiesce();
  }

  /** Forgets every endpoint (for destroy); returns their host-side veths. */
  forgetAll(): string[] {
    const veths = [...this.hostVeths()];
    for (const containerId of [...this.#endpoints.keys()]) this.#table.forget(containerId);
    return veths;
  }

  /** The endpoints on a network (for inspect's Containers). */
  endpointsOf(idOrName: string): (EndpointInfo & { containerId: string; containerName: string })[] {
    const n = this.#nets.get(idOrName);
    const out: (EndpointInfo & { containerId: string; containerName: string })[] = [];
    for (const eps of this.#endpoints.values()) {
      const e = eps.get(n.id);
      if (e) out.push({ ...endpointInfo(e, n), containerId: e.containerId, containerName: e.containerName });
    }
    return out;
  }

  /** A container's endpoints by network name, and its published ports. */
  containerNetworks(containerId: string): AttachResult {
    const eps = this.#endpoints.get(containerId);
    const endpoints: Record<string, EndpointInfo> = {};
    for (const e of eps?.values() ?? []) {
      const n = this.#networks.get(e.networkId)!;
      endpoints[n.name] = endpointInfo(e, n);
    }
    return { endpoints, ports: (this.#table.ports.get(containerId) ?? []).map(toPublished) };
  }

  /** Creates an empty network namespace (loopback up) and returns the path of its file. */
  createNetns(containerId: string): Promise<string> {
    return this.#driver.netns.create(containerId);
  }

  removeNetns(containerId: string): Promise<void> {
    return this.#driver.netns.remove(containerId);
  }

  /**
   * After a restart: endpoints, published ports and namespaces of containers the engine no longer
   * knows (`known` says which it does) are released. Ready-pool namespaces are the pool's own.
   */
  async sweepContainers(known: (containerId: string) => boolean): Promise<string[]> {
    const swept: string[] = [];
    for (const id of new Set([...this.#endpoints.keys(), ...this.#table.ports.keys()])) {
      if (known(id)) continue;
      await this.detach(id).catch((err) => log.warn('releasing the network of an unknown container failed', { id, error: errorMessage(err) }));
      swept.push(id);
    }
    for (const name of await readdir(this.#driver.netns.dir).catch(() => [] as string[])) {
      if (!/^[0-9a-f]{64}$/.test(name) || known(name)) continue;
      await this.#driver.netns.remove(name).catch((err) => log.warn('removing the namespace of an unknown container failed', { id: name, error: errorMessage(err) }));
      swept.push(name);
    }
    return swept;
  }

  netnsPath(containerId: string): string {
    return this.#driver.netns.pathOf(containerId);
  }

  /**
   * Gives a container its interfaces: one endpoint per network (eth0, eth1, ... in the given order),
   * addresses (static or allocated, persisted), the default route through the first non-internal
   * network, DNS names, and published ports (forwarded to the address on that first network).
   * `host` and `none` need nothing: with them the result is empty.
   */
  async attach(spec: AttachSpec): Promise<AttachResult> {
    return this.#attach(spec, false);
  }

  /**
   * createNetns + attach in one step (one process chain fewer): the fast path for starting a container.
   * Returns the namespace path with the result; '' for the host network, whose containers stay in the
   * host's namespace.
   */
  async setup(spec: Omit<AttachSpec, 'netnsPath'>, opts: SetupOptions = {}): Promise<SetupResult> {
    if (spec.networks.length === 1 && this.#nets.get(spec.networks[0]!.network).driver === 'host') {
      return { endpoints: {}, ports: [], netnsPath: '' };
    }
    const netnsPath = this.#driver.netns.pathOf(spec.containerId);
    const deferred: { dns?: Promise<void> } = {};
    const result = await this.#attach({ ...spec, netnsPath }, true, opts.deferDns ? deferred : undefined);
    return deferred.dns ? { ...result, netnsPath, dnsDone: deferred.dns } : { ...result, netnsPath };
  }

  /** `deferDns`: the DNS updates are not waited for; their promise is handed back in it instead. */
  async #attach(spec: AttachSpec, createNetns: boolean, deferDns?: { dns?: Promise<void> }): Promise<AttachResult> {
    this.#assertLive();
    if (this.#endpoints.get(spec.containerId)?.size) throw conflict(`container ${spec.containerId} is already attached; use connect`);
    const nets = spec.networks.map((a) => ({ req: a, net: this.#nets.get(a.network) }));
    // A swarm task's container may join an overlay network that is not attachable.
    for (const { net, req } of nets) if (!req.swarmTask) assertAttachable(net);
    const special = nets.filter((x) => x.net.driver !== 'bridge');
    if (special.length && nets.length > 1) {
      throw invalidArgument(`container cannot be connected to network "${special[0]!.net.name}" and other networks at once`);
    }
    if (new Set(nets.map((x) => x.net.id)).size !== nets.length) throw invalidArgument('a container can join each network only once');
    if (nets.length === 0 || special.length) {
      if (createNetns) {
        const bare = this.#ahead.bare.take('');
        if (bare) {
          await this.#driver.adoptBare(spec.containerId, bare.name).catch(async (err) => {
            await this.#driver.netns.remove(spec.containerId).catch(() => {});
            await this.#driver.netns.remove(bare.name).catch(() => {});
            throw err;
          });
        } else {
          await this.#driver.plumbNew(spec.containerId, { loopbackUp: true, add: [] });
        }
      }
      return { endpoints: {}, ports: [] };
    }
    for (const { net } of nets) if (this.#nets.isRemoving(net.id)) throw notFound(`network ${net.name} not found`);
    await this.#reclaimDraining(nets.map(({ req, net }) => ({ net, ipv4: req.ipv4, ipv6: req.ipv6 })));
    for (const x of nets) if (x.net.overlay && !x.req.swarmTask) x.req = { ...x.req, ipv4: await this.#claimed(x.net, spec.containerId, x.req.ipv4) };

    // Ports are probed first (asynchronously); addresses are then picked and everything is committed in
    // one synchronous step, so concurrent attaches never see each other half-done.
    const publishes = nets.some(({ net }) => !net.internal);
    let eps: Endpoint[];
    let ports: StoredPort[];
    let primary: Endpoint | undefined;
    let ready: ReadyNetns | undefined;
    const readyFits = createNetns && nets.length === 1 && !nets[0]!.req.ipv4 && !nets[0]!.req.ipv6 && !nets[0]!.req.mac;
    for (let attempt = 0; ; attempt++) {
      ports = publishes ? await this.#reservePorts(spec, nets.find(({ net }) => !net.internal)!.net) : [];
      if (this.#endpoints.get(spec.containerId)?.size) throw conflict(`container ${spec.containerId} is already attached; use connect`);
      const raced = ports.filter((p) => portClash(this.#table.allPorts(), p));
      if (raced.length) {
        const explicit = raced.find((p) => spec.ports?.some((b) => b.hostPort === p.hostPort));
        if (explicit || attempt >= 3) throw conflict(`Bind for ${raced[0]!.hostIp}:${raced[0]!.hostPort} failed: port is already allocated`);
        continue; // a random port picked by a concurrent attach too: pick again
      }
      for (const { net } of nets) if (!this.#networks.has(net.id) || this.#nets.isRemoving(net.id)) throw notFound(`network ${net.name} not found`);
      ready = readyFits ? this.#ahead.bridged.take(nets[0]!.net.id) : undefined;
      eps = nets.map(({ req, net }, i) => this.#newEndpoint(spec, net, req, i, `eth${i}`, ready));
      primary = eps.find((e) => this.#isGatewayCandidate(e));
      for (const p of ports) p.containerIp = primary!.ipv4;
      try {
        this.#table.commit(eps, ports);
      } catch (err) {
        if (ready) void this.#ahead.discard([ready]);
        throw err;
      }
      break;
    }
    const dnsEp = eps.find((e) => this.#networks.get(e.networkId)!.dnsEnabled);
    const plan: PlumbPlan = {
      loopbackUp: true,
      add: eps.map((e) => this.#plumbEndpoint(e)),
      routes: primary ? this.#routes(primary) : undefined,
      dns: dnsEp ? this.#dnsRoute(dnsEp) : undefined,
    };
    const dnsNets = eps.map((e) => this.#networks.get(e.networkId)!).filter((n) => n.dnsEnabled);
    const adopted = ready;
    // None made ahead for this network: one with only loopback (made ahead too, or still being made),
    // its interfaces put in from berthd itself, without a process.
    const bare = !adopted && createNetns && this.#driver.plumbsInProcess ? this.#ahead.bare.takeSoon('') : undefined;
    const dnsUpdates = () => dnsNets.map((n) => this.#driver.dns.update(this.#dnsNetwork(n)));
    if (deferDns && dnsNets.length) {
      const dns = Promise.all(dnsUpdates()).then(() => undefined);
      dns.catch(() => {}); // the caller awaits it (and releases the container's network on failure)
      deferDns.dns = dns;
    }
    const work = await Promise.allSettled([
      adopted
        ? this.#driver.netns.adopt(spec.containerId, adopted.name)
        : bare
          ? this.#plumbBare(spec.containerId, bare, plan)
          : createNetns
            ? this.#driver.plumbNew(spec.containerId, plan)
            : this.#driver.plumbExisting(spec.netnsPath, plan),
      ports.length ? this.#driver.firewall.addPorts(ports.map(toFirewallPort)) : Promise.resolve(),
      ...(deferDns?.dns ? [] : dnsUpdates()),
    ]);
    const failed = work.find((w): w is PromiseRejectedResult => w.status === 'rejected');
    if (failed) {
      await this.#rollback(spec.containerId, eps, ports, dnsNets);
      if (createNetns) await this.#driver.netns.remove(spec.containerId).catch(() => {});
      if (adopted) await this.#driver.netns.remove(adopted.name).catch(() => {});
      throw failed.reason;
    }
    if (nets.some(({ net }) => net.overlay)) await this.#overlayJoined(spec.containerId);
    return this.containerNetworks(spec.containerId);
  }

  /**
   * A namespace with only loopback taken from the pool becomes the container's and gets its interfaces.
   * One that could not be made leaves the container to the usual way (a namespace made for it now).
   */
  async #plumbBare(containerId: string, taken: TakenNetns, plan: PlumbPlan): Promise<void> {
    try {
      await taken.done;
    } catch {
      return this.#driver.plumbNew(containerId, plan);
    }
    await this.#driver.netns.adopt(containerId, taken.entry.name).catch(async (err) => {
      await this.#driver.netns.remove(taken.entry.name).catch(() => {});
      throw err;
    });
    await this.#driver.plumbInto(this.#driver.netns.pathOf(containerId), plan);
  }

  /** Joins one more network on a running container (docker network connect). */
  async connect(spec: ConnectSpec): Promise<EndpointInfo> {
    this.#assertLive();
    const net = this.#nets.get(spec.network);
    if (net.driver !== 'bridge') throw forbidden(`container cannot be disconnected from host network or connected to host network`);
    assertAttachable(net);
    if (this.#nets.isRemoving(net.id)) throw notFound(`network ${net.name} not found`);
    await this.#reclaimDraining([{ net, ipv4: spec.ipv4, ipv6: spec.ipv6 }]);
    if (net.overlay) spec = { ...spec, ipv4: await this.#claimed(net, spec.containerId, spec.ipv4) };
    const current = [...(this.#endpoints.get(spec.containerId)?.values() ?? [])];
    if (current.some((e) => e.networkId === net.id)) throw forbidden(`endpoint with name ${stripSlash(spec.name)} already exists in network ${net.name}`);
    const used = new Set(current.map((e) => e.ifName));
    let idx = 0;
    while (used.has(`eth${idx}`)) idx++;
    const order = current.reduce((m, e) => Math.max(m, e.order + 1), 0);
    const ep = this.#newEndpoint(spec, net, spec, order, `eth${idx}`);
    const hadPrimary = current.find((e) => this.#isGatewayCandidate(e));
    const hadDns = current.some((e) => this.#networks.get(e.networkId)!.dnsEnabled);
    this.#table.commit([ep], []);
    const plan: PlumbPlan = {
      add: [this.#plumbEndpoint(ep)],
      routes: !hadPrimary && this.#isGatewayCandidate(ep) ? this.#routes(ep) : undefined,
      dns: !hadDns && net.dnsEnabled ? this.#dnsRoute(ep) : undefined,
    };
    const work = await Promise.allSettled([
      this.#driver.plumbExisting(spec.netnsPath, plan),
      net.dnsEnabled ? this.#driver.dns.update(this.#dnsNetwork(net)) : Promise.resolve(),
    ]);
    const failed = work.find((w): w is PromiseRejectedResult => w.status === 'rejected');
    if (failed) {
      await this.#rollback(spec.containerId, [ep], [], net.dnsEnabled ? [net] : []);
      throw failed.reason;
    }
    if (net.overlay) await this.#overlayJoined(spec.containerId);
    return endpointInfo(ep, net);
  }

  /** Leaves one network (docker network disconnect); the default route and DNS move to what remains. */
  async disconnect(containerId: string, network: string): Promise<void> {
    this.#assertLive();
    const net = this.#nets.get(network);
    const eps = this.#endpoints.get(containerId);
    const ep = eps?.get(net.id);
    if (!eps || !ep) throw forbidden(`container ${containerId} is not connected to network ${net.name}`);
    const wasPrimary = this.#primaryOf(containerId) === ep;
    const dnsBefore = this.#dnsEndpointOf(containerId);
    this.#table.deleteEndpoints(containerId, [ep], false);
    const newPrimary = this.#primaryOf(containerId);
    const dnsAfter = this.#dnsEndpointOf(containerId);
    const ports = this.#table.ports.get(containerId) ?? [];
    const jobs: Promise<unknown>[] = [this.#driver.deleteVeths([ep.hostVeth])];
    if (wasPrimary && ports.length) jobs.push(this.#retargetPorts(containerId, newPrimary));
    if (net.dnsEnabled) jobs.push(this.#driver.dns.update(this.#dnsNetwork(net)));
    await Promise.all(jobs);
    const plan: PlumbPlan = {
      add: [],
      routes: wasPrimary && newPrimary ? this.#routes(newPrimary) : undefined,
      // Routes through the removed interface went with it; only a new one may be needed.
      dns: dnsAfter && dnsAfter !== dnsBefore ? this.#dnsRoute(dnsAfter) : undefined,
    };
    if (existsSync(ep.netnsPath)) await this.#driver.plumbExisting(ep.netnsPath, plan);
  }

  /**
   * Releases everything a container holds: host-side devices, addresses, published ports and DNS names.
   * Idempotent. The namespace file stays until removeNetns.
   */
  async detach(containerId: string): Promise<void> {
    const eps = this.#table.endpointsOf(containerId);
    const ports = this.#table.ports.get(containerId) ?? [];
    if (eps.length === 0 && ports.length === 0) return;
    this.#table.forget(containerId);
    const dnsNets = eps.map((e) => this.#networks.get(e.networkId)!).filter((n) => n.dnsEnabled);
    await Promise.all([
      this.#driver.releaseVeths(eps.map((e) => ({ hostVeth: e.hostVeth, networkId: e.networkId, ipv4: e.ipv4, ipv6: e.ipv6 }))),
      ports.length ? this.#removePortRules(ports) : Promise.resolve(),
      ...dnsNets.map((n) => this.#driver.dns.update(this.#dnsNetwork(n))),
    ]);
  }

  /**
   * Resolves once background work has finished: the host-side devices of every container detached so
   * far are gone (they go with their namespaces, shortly after removeNetns) and no namespace is being
   * made ahead.
   */
  async settled(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve)); // a refill scheduled just now
    await Promise.all([this.#ahead.settled(), this.#driver.netns.settled()]);
    await this.#driver.drain.settled();
  }

  /** Static addresses asked for again while their last holder's device is still draining: delete it now. */
  async #reclaimDraining(wanted: { net: NetworkRecord; ipv4?: string; ipv6?: string }[]): Promise<void> {
    const keys = new Set<string>();
    for (const w of wanted) {
      for (const a of [w.ipv4, w.ipv6]) {
        const parsed = a ? parseAddress(a) : null;
        if (parsed) keys.add(`${w.net.id} ${parsed.value}`);
      }
    }
    if (keys.size === 0) return;
    const held = (v: DrainingVeth, a: string) => !!a && keys.has(`${v.networkId} ${parseAddress(a)?.value}`);
    await this.#driver.drain.flush((v) => held(v, v.ipv4) || held(v, v.ipv6));
  }

  /** Follows a container rename (docker rename): its DNS name changes on every network it is on. */
  async renameContainer(containerId: string, name: string): Promise<void> {
    const eps = [...(this.#endpoints.get(containerId)?.values() ?? [])];
    if (eps.length === 0) return;
    for (const e of eps) e.containerName = stripSlash(name);
    this.#table.saveEndpoints(eps);
    const dnsNets = eps.map((e) => this.#networks.get(e.networkId)!).filter((n) => n.dnsEnabled);
    await Promise.all(dnsNets.map((n) => this.#driver.dns.update(this.#dnsNetwork(n))));
  }

  #newEndpoint(
    spec: { containerId: string; name: string; netnsPath: string; dns?: string[] },
    net: NetworkRecord,
    req: AttachNetwork,
    order: number,
    ifName: string,
    ready?: ReadyNetns,
  ): Endpoint {
    const addr = ready
      ? { ipv4: ready.ipv4, ipv4PrefixLen: ready.ipv4PrefixLen, ipv6: '', ipv6PrefixLen: 0 }
      : assignAddresses(net, req, this.#usedAddresses(net, 4), this.#usedAddresses(net, 6));
    if (req.mac && !/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i.test(req.mac)) throw invalidArgument(`invalid MAC address ${req.mac}`);
    return {
      containerId: spec.containerId,
      networkId: net.id,
      ...addr,
      createdAt: Date.now(),
      endpointId: randomHex(32),
      containerName: stripSlash(spec.name),
      order,
      ifName,
      hostVeth: ready?.hostVeth ?? this.#driver.newVethName(),
      mac: ready?.mac ?? req.mac?.toLowerCase() ?? (addr.ipv4 ? macForIPv4(parseAddress(addr.ipv4)!) : randomMac()),
      netnsPath: spec.netnsPath,
      aliases: [...new Set(req.aliases ?? [])],
      ...(spec.dns?.length ? { dnsServers: spec.dns } : {}),
    };
  }

  /**
   * A container was created that will start with a namespace of its own on a network other than the
   * default bridge (whose namespaces are made ahead with their address): one more with only loopback
   * is made ahead for it (ReadyPool.anticipate).
   */
  anticipateStart(): void {
    if (this.#live()) this.#ahead.bare.anticipate();
  }

  /**
   * Tops up the namespaces made ahead, in the background. The engine calls it once a container's
   * process exists: a refill during a start would take CPU from it (2 vCPUs on the test VM).
   */
  replenish(): void {
    this.#ahead.refill();
  }

  /**
   * A plain container's IPv4 address on an overlay network, granted by the cluster (unique across
   * nodes) and then taken here as a static one; `wanted` as it is, or the lowest free one. Outside a
   * cluster: `wanted`, or undefined for the usual lowest free one.
   */
  async #claimed(net: NetworkRecord, containerId: string, wanted: string | undefined): Promise<string | undefined> {
    const claims = this.#claims();
    if (!claims) return wanted;
    return claims.claimAddress(net, containerId, (skip) => {
      if (wanted) {
        if (skip.has(wanted)) throw forbidden(`Address already in use: ${wanted} on network ${net.name}`);
        return wanted;
      }
      const used = this.#usedAddresses(net, 4);
      for (const a of skip) used.add(parseAddress(a)!.value);
      return assignAddresses(net, {}, used, new Set()).ipv4;
    });
  }

  /** Taken addresses: endpoints, aux addresses, and those held by draining veths and namespaces made ahead. */
  #usedAddresses(net: NetworkRecord, family: 4 | 6): Set<bigint> {
    return this.#table.usedAddresses(net, family, [...this.#driver.drain.addressesOf(net.id), ...this.#ahead.bridged.addressesOf(net.id), ...(this.#table.reserved.get(net.id) ?? [])]);
  }

  async #rollback(containerId: string, eps: Endpoint[], ports: StoredPort[], dnsNets: NetworkRecord[]): Promise<void> {
    this.#table.deleteEndpoints(containerId, eps, ports.length > 0);
    await Promise.allSettled([
      this.#driver.deleteVeths(eps.map((e) => e.hostVeth)),
      ports.length ? this.#removePortRules(ports) : Promise.resolve(),
      ...dnsNets.map((n) => this.#driver.dns.update(this.#dnsNetwork(n))),
    ]);
  }

  #netOf(e: Endpoint): NetworkRecord {
    return this.#networks.get(e.networkId)!;
  }

  #isGatewayCandidate(e: Endpoint): boolean {
    return !this.#netOf(e).internal && !!e.ipv4;
  }

  #primaryOf(containerId: string): Endpoint | undefined {
    return this.#table.orderedEndpointsOf(containerId).find((e) => this.#isGatewayCandidate(e));
  }

  /** The endpoint whose network answers the container's 127.0.0.11: the first one with DNS. */
  #dnsEndpointOf(containerId: string): Endpoint | undefined {
    return this.#table.orderedEndpointsOf(containerId).find((e) => this.#netOf(e).dnsEnabled);
  }

  #dnsRoute(e: Endpoint) {
    return dnsRoute(e, this.#netOf(e));
  }

  #routes(e: Endpoint) {
    return routesVia(e, this.#netOf(e));
  }

  #plumbEndpoint(e: Endpoint) {
    return plumbEndpoint(e, this.#netOf(e));
  }

  /** Checks and picks host ports (probing the host), without committing them; the target is filled in later. */
  #reservePorts(spec: AttachSpec, net: NetworkRecord): Promise<StoredPort[]> {
    return reservePorts(spec.ports ?? [], {
      containerId: spec.containerId,
      containerIp: '',
      defaultHostIp: bridgeSettings(net).hostBindingIpv4,
      taken: this.#table.allPorts(),
    });
  }

  async #retargetPorts(containerId: string, target: Endpoint | undefined): Promise<void> {
    const ports = this.#table.ports.get(containerId) ?? [];
    await this.#removePortRules(ports);
    if (!target) {
      this.#table.deleteEndpoints(containerId, [], true);
      return;
    }
    this.#table.retargetPorts(containerId, target.ipv4);
    await this.#driver.firewall.addPorts(ports.map(toFirewallPort));
  }

  /** Deletes port rules; if the table does not match (someone flushed it), rebuilds it from the records. */
  async #removePortRules(ports: StoredPort[]): Promise<void> {
    try {
      await this.#driver.firewall.removePorts(ports.map(toFirewallPort));
    } catch (err) {
      log.warn('removing port rules failed; rebuilding the table', { error: errorMessage(err) });
      await this.#driver.firewall.rebuild(this.#nets.firewallNetworks(), this.#table.allPorts().map(toFirewallPort));
    }
  }

  #dnsNetwork(n: NetworkRecord): DnsNetwork {
    return dnsNetwork(n, this.#endpoints.values(), this.#table.extraDns.get(n.id));
  }

  /** Rewrites a network's DNS table (after the names answered for other nodes changed). */
  async refreshDns(networkId: string): Promise<void> {
    const n = this.#networks.get(networkId);
    if (n?.dnsEnabled) await this.#driver.dns.update(this.#dnsNetwork(n));
  }

  #assertLive(): void {
    if (!this.#live()) throw new BerthError('unavailable', 'network driver is not initialized');
  }
}

function stripSlash(name: string): string {
  return name.startsWith('/') ? name.slice(1) : name;
}
