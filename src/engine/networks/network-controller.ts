/**
 * Docker-style networking for one daemon, the engine's side: the predefined networks (bridge, host,
 * none), user-defined bridge networks, container endpoints with persisted IP allocations, DNS names
 * between containers on user-defined networks, and published ports. It owns the records (network-table.ts)
 * and decides subnets (bridge-networks.ts), addresses and host ports (container-endpoints.ts); the
 * bridge driver (network/bridge-driver.ts) applies them to the host. This class is their one door.
 *
 * Lifecycle, as the engine uses it:
 *   init()                       once at start; creates the predefined networks, repairs state after a restart
 *   createNetns(id) -> path      an empty namespace (loopback up) for the runtime to join
 *   setup(...) -> path           createNetns + attach in one step; usually takes a namespace made ahead
 *   attach(...)                  endpoints, addresses, DNS names and published ports, before the process starts
 *   connect/disconnect(...)      one network more or less on a running container
 *   detach(id)                   after the container stopped: releases addresses, ports, names, devices
 *   removeNetns(id)              deletes the namespace file
 *   settled()                    waits for the background work below
 *   shutdown()                   leaves everything in place for running containers
 * Every call that changes state has finished its kernel work when its promise settles, except what
 * is left to the background at a container's end so that it costs the exit nothing: its host-side
 * veths go with its namespace (their addresses stay reserved until then, see veth-drain.ts), and a
 * namespace made ahead is unmounted after its link went. A failed attach or connect leaves nothing behind.
 */
import { errorMessage } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { DnsRecord } from '../../network/aardvark.js';
import type { BridgeDriver } from '../../network/bridge-driver.js';
import { hostsText, resolvConfText, type HostsOptions } from '../../network/container-files.js';
import { BridgeNetworks } from './bridge-networks.js';
import { ContainerEndpoints } from './container-endpoints.js';
import type { NetworkCreateSpec, NetworkRecord } from './network-record.js';
import { NetworkTable } from './network-table.js';
import type { AttachResult, AttachSpec, ConnectSpec, EndpointInfo, NetworkControllerOptions, SetupOptions, SetupResult } from './network-types.js';
import { toFirewallPort } from './plumbing-specs.js';

export type { NetworkCreateSpec, NetworkRecord } from './network-record.js';
export type * from './network-types.js';

export class NetworkController {
  readonly prefix: string;
  readonly defaultBridgeName: string;
  readonly #driver: BridgeDriver;
  readonly #table: NetworkTable;
  readonly #networks: BridgeNetworks;
  readonly #endpoints: ContainerEndpoints;
  readonly #overlayListeners = new Set<(containerId: string) => Promise<void>>();
  #initialized = false;

  constructor(opts: NetworkControllerOptions) {
    this.#driver = opts.driver;
    this.prefix = opts.driver.prefix;
    this.defaultBridgeName = opts.driver.defaultBridgeName;
    this.#table = new NetworkTable(opts.records);
    const live = () => this.#initialized;
    this.#networks = new BridgeNetworks({
      table: this.#table,
      driver: opts.driver,
      live,
      defaultBridgeSubnet: opts.defaultBridgeSubnet,
      subnetLockPath: opts.subnetLockPath,
      hooks: opts.bridgeHooks,
    });
    this.#endpoints = new ContainerEndpoints({ table: this.#table, driver: opts.driver, networks: this.#networks, live,
      readyNamespaces: opts.readyNamespaces ?? 2,
      addressClaims: opts.addressClaims,
      overlayJoined: (id) => this.#overlayJoined(id),
    });
  }

  // ---------------------------------------------------------------- start-up and recovery

  /**
   * Loads the stored networks and endpoints, creates the predefined networks on first start, and makes
   * the kernel match the stored state: bridges present, endpoints of vanished namespaces released, the
   * nftables table rebuilt in one transaction, aardvark-dns running with the current names.
   */
  async init(): Promise<void> {
    const d = this.#driver;
    await d.open();
    this.#table.load();
    await this.#endpoints.releaseVanished();
    const links = await d.links();
    await d.removeStrayDevices(links, { bridges: this.#networks.bridgeNames(), veths: this.#endpoints.hostVeths() });
    await this.#networks.reconcile(links);
    await d.prepareHost();
    await d.firewall.rebuild(this.#networks.firewallNetworks(), this.#table.allPorts().map(toFirewallPort));
    await d.dns.sync(this.#networks.dnsNetworks());
    await d.removeReadyLeftovers();
    this.#initialized = true;
    this.#endpoints.startReady();
  }

  /**
   * Leaves bridges, rules, endpoints and aardvark-dns in place: running containers keep their network.
   * The namespace directory's own mount goes when no namespace is left in it, so a stopped daemon's
   * state directory can be deleted.
   */
  async shutdown(): Promise<void> {
    this.#initialized = false;
    await this.#endpoints.stopReady();
    await this.#driver.close();
  }

  /**
   * Removes every trace of this daemon's networking from the host: endpoints, namespace files, bridges
   * (the default one too), the nftables table and aardvark-dns. Network definitions stay in the database
   * (the next init recreates their bridges). For tests and uninstall.
   */
  async destroy(): Promise<void> {
    this.#initialized = false;
    await this.#endpoints.stopReady();
    const veths = this.#endpoints.forgetAll();
    const bridges = this.#networks.list().filter((n) => n.driver === 'bridge');
    for (const n of bridges) await this.#networks.runHooks('deleting', n);
    await this.#driver.destroy(veths, bridges.map((n) => n.bridgeName));
  }

  // ---------------------------------------------------------------- networks

  list(): NetworkRecord[] {
    return this.#networks.list();
  }

  /** By full id, exact name, or unique id prefix. */
  get(idOrName: string): NetworkRecord {
    return this.#networks.get(idOrName);
  }

  /** A bridge network; `spec.id` gives it a fixed id. Its bridge device is `bridgeName` of the result. */
  create(spec: NetworkCreateSpec): Promise<NetworkRecord> {
    return this.#networks.create(spec);
  }

  /** Removes a user-defined network. Fails while containers are attached (dockerd: 403). */
  remove(idOrName: string): Promise<void> {
    return this.#networks.remove(idOrName);
  }

  /** Removes every user-defined network without endpoints that `keep` does not protect; returns their names. */
  prune(keep?: (n: NetworkRecord) => boolean): Promise<string[]> {
    return this.#networks.prune(keep);
  }

  // ---------------------------------------------------------------- containers

  /** The endpoints on a network (for inspect's Containers). */
  endpointsOf(idOrName: string): (EndpointInfo & { containerId: string; containerName: string })[] {
    return this.#endpoints.endpointsOf(idOrName);
  }

  /** A container's endpoints by network name, and its published ports. */
  containerNetworks(containerId: string): AttachResult {
    return this.#endpoints.containerNetworks(containerId);
  }

  /** Creates an empty network namespace (loopback up) and returns the path of its file. */
  createNetns(containerId: string): Promise<string> {
    return this.#endpoints.createNetns(containerId);
  }

  removeNetns(containerId: string): Promise<void> {
    return this.#endpoints.removeNetns(containerId);
  }

  netnsPath(containerId: string): string {
    return this.#endpoints.netnsPath(containerId);
  }

  /**
   * After a restart: endpoints, published ports and namespaces of containers that hold no network
   * now (unknown to the engine, or not running; `holding` says which do) are released. Ready-pool
   * namespaces are the pool's own.
   */
  sweepContainers(holding: (containerId: string) => boolean): Promise<string[]> {
    return this.#endpoints.sweepContainers(holding);
  }

  /**
   * Gives a container its interfaces: one endpoint per network (eth0, eth1, ... in the given order),
   * addresses (static or allocated, persisted), the default route through the first non-internal
   * network, DNS names, and published ports (forwarded to the address on that first network).
   * `host` and `none` need nothing: with them the result is empty.
   */
  attach(spec: AttachSpec): Promise<AttachResult> {
    return this.#endpoints.attach(spec);
  }

  /**
   * createNetns + attach in one step (one process chain fewer): the fast path for starting a container.
   * Returns the namespace path with the result; '' for the host network, whose containers stay in the
   * host's namespace.
   */
  setup(spec: Omit<AttachSpec, 'netnsPath'>, opts: SetupOptions = {}): Promise<SetupResult> {
    return this.#endpoints.setup(spec, opts);
  }

  /** Joins one more network on a running container (docker network connect), with a static address and aliases if given. */
  connect(spec: ConnectSpec): Promise<EndpointInfo> {
    return this.#endpoints.connect(spec);
  }

  /** Leaves one network (docker network disconnect); the default route and DNS move to what remains. */
  disconnect(containerId: string, network: string): Promise<void> {
    return this.#endpoints.disconnect(containerId, network);
  }

  /**
   * Releases everything a container holds: host-side devices, addresses, published ports and DNS names.
   * Idempotent. The namespace file stays until removeNetns.
   */
  detach(containerId: string): Promise<void> {
    return this.#endpoints.detach(containerId);
  }

  /** Follows a container rename (docker rename): its DNS name changes on every network it is on. */
  renameContainer(containerId: string, name: string): Promise<void> {
    return this.#endpoints.renameContainer(containerId, name);
  }

  /** A container was just created that will start in a namespace of its own (see ContainerEndpoints.anticipateStart). */
  anticipateStart(): void {
    this.#endpoints.anticipateStart();
  }

  /**
   * Tops up the namespaces made ahead, in the background. The engine calls it once a container's
   * process exists: a refill during a start would take CPU from it (2 vCPUs on the test VM).
   */
  replenish(): void {
    this.#endpoints.replenish();
  }

  /**
   * Resolves once background work has finished: the host-side devices of every container detached so
   * far are gone (they go with their namespaces, shortly after removeNetns) and no namespace is being
   * made ahead.
   */
  settled(): Promise<void> {
    return this.#endpoints.settled();
  }

  // ---------------------------------------------------------------- a swarm's overlay networks

  /**
   * Has `listener` awaited each time a container joins an overlay network, after its endpoint is
   * plumbed and before its process starts: the swarm makes the network's vxlan device and the VIP rules
   * in the container's namespace then, so a short-lived container does not race them. Returns the
   * unsubscribe.
   */
  onOverlayJoin(listener: (containerId: string) => Promise<void>): () => void {
    this.#overlayListeners.add(listener);
    return () => this.#overlayListeners.delete(listener);
  }

  async #overlayJoined(containerId: string): Promise<void> {
    for (const l of this.#overlayListeners) {
      await l(containerId).catch((err) => log.warn('overlay set-up for a container failed', { container: containerId, error: errorMessage(err) }));
    }
  }

  /** Addresses of a network that other nodes' containers hold: never given out here. */
  setReservedAddresses(networkId: string, addresses: string[]): void {
    if (addresses.length) this.#table.reserved.set(networkId, addresses);
    else this.#table.reserved.delete(networkId);
  }

  /** Names a network's DNS answers besides this node's containers on it (VIPs, other nodes' tasks). */
  async setExtraDns(networkId: string, records: DnsRecord[]): Promise<void> {
    const before = JSON.stringify(this.#table.extraDns.get(networkId) ?? []);
    if (records.length) this.#table.extraDns.set(networkId, records);
    else this.#table.extraDns.delete(networkId);
    if (before !== JSON.stringify(records)) await this.#endpoints.refreshDns(networkId);
  }

  // ---------------------------------------------------------------- container files

  /** /etc/resolv.conf for a container on these networks (names or ids). */
  async resolvConf(networks: string[], opts: { dns?: string[]; dnsSearch?: string[]; dnsOptions?: string[] } = {}): Promise<string> {
    const nets = networks.map((n) => this.get(n));
    const host = await this.#driver.hostResolvConf();
    return resolvConfText({
      host,
      embeddedDns: nets.some((n) => n.dnsEnabled),
      hostNetwork: nets.some((n) => n.driver === 'host'),
      ipv6: nets.some((n) => n.enableIPv6),
      ...opts,
    });
  }

  /**
   * /etc/hosts for a container; its own address comes from its first endpoint. With the host network
   * it is the host's file with the extra entries appended.
   */
  async hostsFile(containerId: string, opts: Omit<HostsOptions, 'addresses' | 'ipv6' | 'base'> & { ipv6?: boolean; hostNetwork?: boolean }): Promise<string> {
    if (opts.hostNetwork) return hostsText({ ...opts, addresses: [], ipv6: false, base: await this.#driver.hostHosts() });
    const addresses = this.#table.orderedEndpointsOf(containerId).flatMap((e) => [e.ipv4, e.ipv6].filter((x) => !!x));
    return hostsText({ ...opts, addresses: addresses.slice(0, 1), ipv6: opts.ipv6 ?? true });
  }
}
