/**
 * Docker-style networking for one daemon: the predefined networks (bridge, host, none), user-defined
 * bridge networks, container endpoints with persisted IP allocations, DNS between containers on
 * user-defined networks, and published ports.
 *
 * Everything is driven with the kernel's own tools (ip, nft, nsenter, unshare) in as few calls as
 * possible, and aardvark-dns for names. Every device, chain and file carries the daemon's prefix:
 * bridges `<prefix>0` (default) and `<prefix>-<id>`, host-side veths `<prefix><hex>`, the nftables table
 * `inet <prefix>`, state under `<execRoot>/network`. Nothing else on the host is ever touched, apart
 * from turning on net.ipv4.ip_forward.
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
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BerthError, conflict, errorMessage, invalidArgument, notFound } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { NetworkRecords, type StoredEndpoint, type StoredPort } from '../state/network-records.js';
import { Aardvark, type DnsNetwork, type DnsRecord } from './aardvark.js';
import { createBridge, deleteBridge, enableIPv4Forwarding, listLinks, type LinkInfo } from './bridge-device.js';
import { cidrOverlaps, formatAddress, formatCidr, parseAddress, parseCidr, type Cidr } from './cidr.js';
import { hostsText, resolvConfText, type HostsOptions } from './container-files.js';
import { ToolShell } from './tool-shell.js';
import { deleteHostVeths, plumb, plumbCommands, plumbExisting, type DnsRoute, type PlumbEndpoint, type PlumbPlan, type Tools } from './endpoint-plumbing.js';
import { Firewall, type FirewallNetwork, type FirewallPort } from './firewall.js';
import { claimPrefix, releasePrefix, SUBNET_LOCK_PATH, withHostLock } from './host-lock.js';
import type { Protocol } from './host-ports.js';
import { hostRoutePrefixes, parseResolvConf } from './host-routes.js';
import { assignAddresses } from './endpoint-addresses.js';
import { chooseSubnet, defaultGateway, defaultIPv4Pools, macForIPv4, randomIPv6Pools, randomMac } from './ipam.js';
import { mountPoints, NetnsDir } from './netns.js';
import {
  bridgeSettings,
  forbidden,
  Option,
  parseIpamConfig,
  assertAttachable,
  validateBridgeName,
  validateDriver,
  validateName,
  validateOptions,
  type NetworkCreateSpec,
  type NetworkRecord,
  type ParsedPool,
} from './network-record.js';
import { portClash, reservePorts } from './port-reservation.js';
import { VethDrain, type DrainingVeth } from './veth-drain.js';
import { ReadyPool, type ReadyNetns } from './ready-pool.js';

export type { NetworkCreateSpec, NetworkRecord } from './network-record.js';
export type * from './network-types.js';
import type {
  AttachNetwork,
  AttachResult,
  AttachSpec,
  ConnectSpec,
  Endpoint,
  EndpointData,
  EndpointInfo,
  NetworkDriverOptions,
  PublishedPort,
} from './network-types.js';

const PREFIX_RE = /^[a-z][a-z0-9]{0,7}$/;
/** Names of namespace files made ahead of time (container ids are hex, so never clash). */
const READY_PREFIX = 'ready-';
const hex = (bytes: number) => randomBytes(bytes).toString('hex');

export class NetworkDriver {
  readonly prefix: string;
  readonly defaultBridgeName: string;
  readonly #opts: NetworkDriverOptions;
  readonly #records: NetworkRecords;
  readonly #tools: Tools & { unshare: string; mount: string; umount: string };
  readonly #firewall: Firewall;
  readonly #aardvark: Aardvark;
  readonly #netns: NetnsDir;
  readonly #hostNs = `/proc/${process.pid}/ns/net`;
  readonly #networks = new Map<string, NetworkRecord>();
  /** containerId -> networkId -> endpoint */
  readonly #endpoints = new Map<string, Map<string, Endpoint>>();
  /** containerId -> published ports */
  readonly #ports = new Map<string, StoredPort[]>();
  readonly #pendingNames = new Set<string>();
  /** networkId -> names answered besides the local endpoints' (a swarm's VIPs and remote tasks). */
  readonly #extraDns = new Map<string, DnsRecord[]>();
  /** networkId -> addresses held elsewhere (containers of other swarm nodes), never given out here. */
  readonly #reserved = new Map<string, string[]>();
  readonly #removing = new Set<string>();
  readonly #drain: VethDrain;
  readonly #shell = new ToolShell();
  /** Namespaces made ahead: on the default bridge, and loopback only (for none). */
  readonly #ready: ReadyPool;
  readonly #readyBare: ReadyPool;
  /** Whether released veths are left to go with their namespace (see veth-drain.ts). */
  #drainWithNetns = false;
  #initialized = false;

  constructor(opts: NetworkDriverOptions) {
    if (!PREFIX_RE.test(opts.prefix)) throw invalidArgument(`invalid network prefix "${opts.prefix}": [a-z][a-z0-9]{0,7}`);
    this.#opts = opts;
    this.prefix = opts.prefix;
    this.defaultBridgeName = opts.defaultBridgeName ?? `${opts.prefix}0`;
    validateBridgeName(this.defaultBridgeName);
    this.#records = new NetworkRecords(opts.db);
    const t = opts.tools ?? {};
    this.#tools = {
      ip: t.ip ?? 'ip',
      nft: t.nft ?? 'nft',
      nsenter: t.nsenter ?? 'nsenter',
      unshare: t.unshare ?? 'unshare',
      mount: t.mount ?? 'mount',
      umount: t.umount ?? 'umount',
    };
    const stateDir = join(opts.execRoot, 'network');
    this.#firewall = new Firewall(opts.prefix, this.#tools.nft);
    this.#aardvark = new Aardvark(join(stateDir, 'dns'), opts.aardvarkPath ?? '/usr/lib/podman/aardvark-dns', opts.dnsPort ?? 53);
    this.#netns = new NetnsDir(join(stateDir, 'netns'), this.#tools, this.#shell);
    this.#drain = new VethDrain(this.#tools.ip);
    const size = opts.readyNamespaces ?? 2;
    this.#ready = new ReadyPool(size, () => this.#makeReady(true));
    this.#readyBare = new ReadyPool(size, () => this.#makeReady(false));
  }

  // ---------------------------------------------------------------- start-up and recovery

  /**
   * Loads the stored networks and endpoints, creates the predefined networks on first start, and makes
   * the kernel match the stored state: bridges present, endpoints of vanished namespaces released, the
   * nftables table rebuilt in one transaction, aardvark-dns running with the current names.
   */
  async init(): Promise<void> {
    claimPrefix(this.prefix);
    await mkdir(join(this.#opts.execRoot, 'network'), { recursive: true });
    await this.#netns.init();
    for (const n of this.#records.loadNetworks()) this.#networks.set(n.id, n.data as NetworkRecord);
    for (const s of this.#records.loadEndpoints()) this.#remember(this.#fromStored(s));
    for (const p of this.#records.loadPorts()) this.#portsOf(p.containerId).push(p);

    // Endpoints whose namespace is gone (container ended while the daemon was down, or a reboot).
    const mounted = await mountPoints();
    for (const [containerId, eps] of this.#endpoints) {
      const path = await this.#netns.target(eps.values().next().value!.netnsPath);
      if (!mounted.has(path)) {
        log.info('releasing network endpoints of a vanished namespace', { container: containerId });
        this.#forget(containerId);
      }
    }

    if (!this.#byName('host')) this.#saveNetwork(this.#predefined('host', 'host'));
    if (!this.#byName('none')) this.#saveNetwork(this.#predefined('none', 'null'));

    const links = await listLinks(this.#tools.ip);
    await this.#removeStrayDevices(links);
    let bridge = this.#byName('bridge');
    if (bridge && !links.has(bridge.bridgeName) && !this.#hasEndpoints(bridge.id)) {
      // Recreated below; its subnet may have been taken by something else meanwhile, so pick again.
      this.#records.deleteNetwork(bridge.id);
      this.#networks.delete(bridge.id);
      bridge = undefined;
    }
    if (!bridge) {
      const created = await this.#createBridgeNetwork(this.#defaultBridgeSpec(adoptedSubnet(links.get(this.defaultBridgeName))), true);
      links.set(created.bridgeName, { name: created.bridgeName, kind: 'bridge', addresses: [] });
    }
    for (const n of this.#networks.values()) {
      if (n.driver === 'bridge' && !links.has(n.bridgeName)) await createBridge(this.#tools.ip, this.#bridgeSpec(n));
    }
    // Draining by watching /sys/class/net needs a sysfs of the daemon's own namespace.
    this.#drainWithNetns = existsSync(`/sys/class/net/${this.defaultBridgeName}`);
    await enableIPv4Forwarding();
    const brnf = await readFile('/proc/sys/net/bridge/bridge-nf-call-iptables', 'utf8').catch(() => '0');
    if (brnf.trim() !== '1') {
      log.warn('net.bridge.bridge-nf-call-iptables is off: traffic between containers on one bridge bypasses the firewall (icc=false, loopback guard)');
    }
    await this.#firewall.rebuild(this.#firewallNetworks(), [...this.#ports.values()].flat().map(toFirewallPort));
    await this.#aardvark.sync([...this.#networks.values()].filter((n) => n.dnsEnabled).map((n) => this.#dnsNetwork(n)));
    // Namespaces made ahead by an earlier run that no container took (their veths go with them).
    for (const name of await this.#netns.unadopted()) if (name.startsWith(READY_PREFIX)) await this.#netns.remove(name);
    this.#initialized = true;
    this.#ready.reset();
    this.#readyBare.reset();
    this.#refill();
  }

  /**
   * Devices of this prefix that no stored network or endpoint names: left by a daemon that used the
   * prefix with another data root (the prefix is claimed, so no live daemon owns them). Its user
   * networks' bridges go, and so do veths of its containers, which would otherwise hold addresses
   * this daemon's allocator hands out again on an adopted default bridge.
   */
  async #removeStrayDevices(links: Map<string, LinkInfo>): Promise<void> {
    const bridges = new Set([...this.#networks.values()].map((n) => n.bridgeName));
    const veths = new Set([...this.#endpoints.values()].flatMap((eps) => [...eps.values()].map((e) => e.hostVeth)));
    const strayBridges = [...links.values()].filter((l) => l.kind === 'bridge' && l.name.startsWith(`${this.prefix}-`) && !bridges.has(l.name));
    const strayVeths = [...links.values()].filter((l) => l.kind === 'veth' && l.name.startsWith(this.prefix) && !veths.has(l.name));
    if (strayBridges.length + strayVeths.length === 0) return;
    log.info('removing devices an earlier daemon with this prefix left', { bridges: strayBridges.map((l) => l.name), veths: strayVeths.length });
    await deleteHostVeths(strayVeths.map((l) => l.name), this.#tools.ip);
    for (const l of strayBridges) await deleteBridge(this.#tools.ip, l.name);
    for (const l of [...strayBridges, ...strayVeths]) links.delete(l.name);
  }

  /**
   * Leaves bridges, rules, endpoints and aardvark-dns in place: running containers keep their network.
   * The namespace directory's own mount goes when no namespace is left in it, so a stopped daemon's
   * state directory can be deleted.
   */
  async shutdown(): Promise<void> {
    this.#initialized = false;
    await this.#removeReady();
    if ((await readdir(this.#netns.dir).catch(() => ['?'])).length === 0) await this.#netns.unmountDir().catch(() => {});
    releasePrefix(this.prefix);
  }

  /**
   * Removes every trace of this daemon's networking from the host: endpoints, namespace files, bridges
   * (the default one too), the nftables table and aardvark-dns. Network definitions stay in the database
   * (the next init recreates their bridges). For tests and uninstall.
   */
  async destroy(): Promise<void> {
    this.#initialized = false;
    await this.#removeReady();
    const veths = [...this.#endpoints.values()].flatMap((eps) => [...eps.values()].map((e) => e.hostVeth)).concat(this.#drain.takeAll());
    for (const containerId of [...this.#endpoints.keys()]) this.#forget(containerId);
    await deleteHostVeths(veths, this.#tools.ip);
    for (const f of await readdir(this.#netns.dir).catch(() => [] as string[])) await this.#netns.remove(f);
    await this.#netns.unmountDir();
    for (const n of this.#networks.values()) if (n.driver === 'bridge') await deleteBridge(this.#tools.ip, n.bridgeName);
    await this.#firewall.destroy().catch(() => {});
    await this.#aardvark.destroy();
    this.#initialized = false;
    releasePrefix(this.prefix);
  }

  // ---------------------------------------------------------------- networks

  list(): NetworkRecord[] {
    return [...this.#networks.values()].sort((a, b) => a.created.localeCompare(b.created) || a.name.localeCompare(b.name));
  }

  /** By full id, exact name, or unique id prefix. */
  get(idOrName: string): NetworkRecord {
    const n = this.#find(idOrName);
    if (!n) throw notFound(`network ${idOrName} not found`);
    return n;
  }

  #find(idOrName: string): NetworkRecord | undefined {
    const byId = this.#networks.get(idOrName);
    if (byId) return byId;
    const byName = this.#byName(idOrName);
    if (byName) return byName;
    if (!/^[0-9a-f]+$/.test(idOrName)) return undefined;
    const matches = [...this.#networks.values()].filter((n) => n.id.startsWith(idOrName));
    if (matches.length > 1) throw invalidArgument(`network ${idOrName} is ambiguous (${matches.length} matches found based on ID prefix)`);
    return matches[0];
  }

  #byName(name: string): NetworkRecord | undefined {
    for (const n of this.#networks.values()) if (n.name === name) return n;
    return undefined;
  }

  async create(spec: NetworkCreateSpec): Promise<NetworkRecord> {
    this.#assertReady();
    validateName(spec.name);
    if (spec.name === 'host' || spec.name === 'none') throw forbidden(`operation is not permitted on predefined ${spec.name} network`);
    validateDriver(spec.driver);
    if (spec.ingress || spec.configOnly || spec.configFrom) throw forbidden('swarm and config-only networks are not supported');
    if (spec.scope && spec.scope !== 'local' && !(spec.driver === 'overlay' && spec.scope === 'swarm')) throw invalidArgument(`scope "${spec.scope}" is not supported`);
    if (spec.ipam?.driver && spec.ipam.driver !== 'default') throw notFound(`plugin "${spec.ipam.driver}" not found`);
    validateOptions(spec.options ?? {});
    if (this.#byName(spec.name) || this.#pendingNames.has(spec.name)) throw conflict(`network with name ${spec.name} already exists`);
    this.#pendingNames.add(spec.name);
    try {
      return await this.#createBridgeNetwork(spec, false);
    } finally {
      this.#pendingNames.delete(spec.name);
    }
  }

  async #createBridgeNetwork(spec: NetworkCreateSpec, predefined: boolean): Promise<NetworkRecord> {
    const pools = parseIpamConfig(spec.ipam?.config);
    const id = spec.id && /^[0-9a-z]{1,64}$/.test(spec.id) && !this.#networks.has(spec.id) ? spec.id : hex(32);
    const options = { ...(spec.options ?? {}) };
    const bridgeName = options[Option.bridgeName] || (predefined ? this.defaultBridgeName : `${this.prefix}-${id.slice(0, 14 - this.prefix.length)}`);
    const enableIPv6 = spec.enableIPv6 ?? false;
    for (const n of this.#networks.values()) {
      if (n.bridgeName === bridgeName) throw conflict(`bridge ${bridgeName} is already used by network ${n.name}`);
    }
    return withHostLock(this.#opts.subnetLockPath ?? SUBNET_LOCK_PATH, async () => {
      const [routes, nameservers] = await Promise.all([hostRoutePrefixes(this.#tools.ip), this.#hostNameserverPrefixes()]);
      const ours = [...this.#networks.values()].flatMap((n) => [n.subnet, n.subnet6].filter((s): s is string => !!s).map((s) => parseCidr(s)!));
      const subnet4 = this.#pickSubnet(pools.v4, ours, () => chooseSubnet(defaultIPv4Pools(), [...routes, ...ours, ...nameservers]), 4);
      const subnet6 = enableIPv6 ? this.#pickSubnet(pools.v6, ours, () => chooseSubnet(randomIPv6Pools(), [...routes, ...ours]), 6) : undefined;
      if (!predefined) {
        const links = await listLinks(this.#tools.ip);
        if (links.has(bridgeName)) throw conflict(`a network interface named ${bridgeName} already exists on the host`);
      }
      const record: NetworkRecord = {
        id,
        name: spec.name,
        driver: 'bridge',
        scope: 'local',
        subnet: formatCidr(subnet4),
        gateway: pools.v4.gateway ?? formatAddress(defaultGateway(subnet4)),
        ...(pools.v4.ipRange ? { ipRange: formatCidr(pools.v4.ipRange) } : {}),
        ...(subnet6 ? { subnet6: formatCidr(subnet6), gateway6: pools.v6.gateway ?? formatAddress(defaultGateway(subnet6)) } : {}),
        ...(subnet6 && pools.v6.ipRange ? { ipRange6: formatCidr(pools.v6.ipRange) } : {}),
        ...(pools.v4.auxAddresses || pools.v6.auxAddresses ? { auxAddresses: { ...pools.v4.auxAddresses, ...pools.v6.auxAddresses } } : {}),
        internal: spec.internal ?? false,
        attachable: spec.attachable ?? false,
        enableIPv6,
        labels: { ...(spec.labels ?? {}) },
        options,
        ipamOptions: { ...(spec.ipam?.options ?? {}) },
        bridgeName,
        created: new Date().toISOString(),
        dnsEnabled: !predefined,
        predefined,
        ...(spec.driver === 'overlay' ? { overlay: true } : {}),
      };
      await createBridge(this.#tools.ip, this.#bridgeSpec(record));
      try {
        if (this.#initialized) await this.#firewall.addNetwork(this.#firewallNetwork(record));
        this.#saveNetwork(record);
      } catch (err) {
        await deleteBridge(this.#tools.ip, bridgeName).catch(() => {});
        if (this.#initialized) await this.#firewall.removeNetwork(this.#firewallNetwork(record)).catch(() => {});
        throw err;
      }
      return record;
    });
  }

  #pickSubnet(pool: ParsedPool, ours: Cidr[], auto: () => Cidr | null, family: 4 | 6): Cidr {
    if (pool.subnet) {
      if (ours.some((o) => cidrOverlaps(o, pool.subnet!))) throw forbidden('invalid pool request: Pool overlaps with other one on this address space');
      return pool.subnet;
    }
    const chosen = auto();
    if (!chosen) {
      throw forbidden(`all predefined address pools have been fully subnetted (no free IPv${family} subnet)`);
    }
    return chosen;
  }

  async #hostNameserverPrefixes(): Promise<Cidr[]> {
    const text = await readFile(this.#opts.hostResolvConf ?? '/etc/resolv.conf', 'utf8').catch(() => '');
    return parseResolvConf(text).nameservers.flatMap((ns) => {
      const a = parseAddress(ns);
      return a ? [{ family: a.family, base: a.value, prefix: a.family === 4 ? 32 : 128 }] : [];
    });
  }

  /** `adopt`: the subnet and gateway of a leftover bridge of the default name, kept as they are. */
  #defaultBridgeSpec(adopt?: { subnet: string; gateway: string }): NetworkCreateSpec {
    return {
      name: 'bridge',
      ipam: this.#opts.defaultBridgeSubnet ? { config: [{ subnet: this.#opts.defaultBridgeSubnet }] } : adopt ? { config: [adopt] } : undefined,
      options: {
        [Option.defaultBridge]: 'true',
        [Option.icc]: 'true',
        [Option.masquerade]: 'true',
        [Option.hostBinding]: '0.0.0.0',
        [Option.bridgeName]: this.defaultBridgeName,
        [Option.mtu]: '1500',
      },
    };
  }

  #predefined(name: string, driver: 'host' | 'null'): NetworkRecord {
    return {
      id: hex(32), name, driver, scope: 'local', subnet: '', gateway: '', internal: false, attachable: false,
      enableIPv6: false, labels: {}, options: {}, ipamOptions: {}, bridgeName: '', created: new Date().toISOString(),
      dnsEnabled: false, predefined: true,
    };
  }

  /** Removes a user-defined network. Fails while containers are attached (dockerd: 403). */
  async remove(idOrName: string): Promise<void> {
    this.#assertReady();
    const n = this.get(idOrName);
    if (n.predefined) throw forbidden(`${n.name} is a pre-defined network and cannot be removed`);
    if (this.#hasEndpoints(n.id) || this.#removing.has(n.id)) {
      throw forbidden(`error while removing network: network ${n.name} id ${n.id} has active endpoints`);
    }
    this.#removing.add(n.id);
    try {
      await this.#firewall.removeNetwork(this.#firewallNetwork(n)).catch(async (err) => {
        log.warn('removing network rules failed; rebuilding the table', { network: n.name, error: errorMessage(err) });
        await this.#firewall.rebuild(this.#firewallNetworks().filter((f) => f.id !== n.id), [...this.#ports.values()].flat().map(toFirewallPort));
      });
      await this.#drain.flush((v) => v.networkId === n.id);
      await deleteBridge(this.#tools.ip, n.bridgeName);
      this.#records.deleteNetwork(n.id);
      this.#networks.delete(n.id);
      if (n.dnsEnabled) await this.#aardvark.update({ id: n.id, listen: [], records: [] });
    } finally {
      this.#removing.delete(n.id);
    }
  }

  /** Removes every user-defined network without endpoints that `keep` does not protect; returns their names. */
  async prune(keep: (n: NetworkRecord) => boolean = () => false): Promise<string[]> {
    const removed: string[] = [];
    for (const n of this.list()) {
      if (n.predefined || this.#hasEndpoints(n.id) || keep(n)) continue;
      try {
        await this.remove(n.id);
        removed.push(n.name);
      } catch (err) {
        if (!(err instanceof BerthError && (err.kind === 'forbidden' || err.kind === 'not-found'))) throw err;
      }
    }
    return removed;
  }

  /** The endpoints on a network (for inspect's Containers). */
  endpointsOf(idOrName: string): (EndpointInfo & { containerId: string; containerName: string })[] {
    const n = this.get(idOrName);
    const out: (EndpointInfo & { containerId: string; containerName: string })[] = [];
    for (const eps of this.#endpoints.values()) {
      const e = eps.get(n.id);
      if (e) out.push({ ...this.#info(e, n), containerId: e.containerId, containerName: e.containerName });
    }
    return out;
  }

  /** A container's endpoints by network name, and its published ports. */
  containerNetworks(containerId: string): AttachResult {
    const eps = this.#endpoints.get(containerId);
    const endpoints: Record<string, EndpointInfo> = {};
    for (const e of eps?.values() ?? []) {
      const n = this.#networks.get(e.networkId)!;
      endpoints[n.name] = this.#info(e, n);
    }
    return { endpoints, ports: (this.#ports.get(containerId) ?? []).map(toPublished) };
  }

  // ---------------------------------------------------------------- namespaces

  /** Creates an empty network namespace (loopback up) and returns the path of its file. */
  createNetns(containerId: string): Promise<string> {
    return this.#netns.create(containerId);
  }

  removeNetns(containerId: string): Promise<void> {
    return this.#netns.remove(containerId);
  }

  /**
   * After a restart: endpoints, published ports and namespaces of containers the engine no longer
   * knows (`known` says which it does) are released. Ready-pool namespaces are the pool's own.
   */
  async sweepContainers(known: (containerId: string) => boolean): Promise<string[]> {
    const swept: string[] = [];
    for (const id of new Set([...this.#endpoints.keys(), ...this.#ports.keys()])) {
      if (known(id)) continue;
      await this.detach(id).catch((err) => log.warn('releasing the network of an unknown container failed', { id, error: errorMessage(err) }));
      swept.push(id);
    }
    for (const name of await readdir(this.#netns.dir).catch(() => [] as string[])) {
      if (!/^[0-9a-f]{64}$/.test(name) || known(name)) continue;
      await this.#netns.remove(name).catch((err) => log.warn('removing the namespace of an unknown container failed', { id: name, error: errorMessage(err) }));
      swept.push(name);
    }
    return swept;
  }

  netnsPath(containerId: string): string {
    return this.#netns.pathOf(containerId);
  }

  // ---------------------------------------------------------------- endpoints

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
  async setup(spec: Omit<AttachSpec, 'netnsPath'>): Promise<AttachResult & { netnsPath: string }> {
    if (spec.networks.length === 1 && this.get(spec.networks[0]!.network).driver === 'host') {
      return { endpoints: {}, ports: [], netnsPath: '' };
    }
    const netnsPath = this.#netns.pathOf(spec.containerId);
    const result = await this.#attach({ ...spec, netnsPath }, true);
    return { ...result, netnsPath };
  }

  async #attach(spec: AttachSpec, createNetns: boolean): Promise<AttachResult> {
    this.#assertReady();
    if (this.#endpoints.get(spec.containerId)?.size) throw conflict(`container ${spec.containerId} is already attached; use connect`);
    const nets = spec.networks.map((a) => ({ req: a, net: this.get(a.network) }));
    for (const { net, req } of nets) if (!req.swarmTask) assertAttachable(net);
    const special = nets.filter((x) => x.net.driver !== 'bridge');
    if (special.length && nets.length > 1) {
      throw invalidArgument(`container cannot be connected to network "${special[0]!.net.name}" and other networks at once`);
    }
    if (new Set(nets.map((x) => x.net.id)).size !== nets.length) throw invalidArgument('a container can join each network only once');
    if (nets.length === 0 || special.length) {
      if (createNetns) {
        const bare = this.#readyBare.take('');
        if (bare) {
          await this.#netns.adopt(spec.containerId, bare.name).catch(async (err) => {
            await this.#netns.remove(bare.name).catch(() => {});
            throw err;
          });
        } else {
          await this.#netns.create(spec.containerId);
        }
      }
      return { endpoints: {}, ports: [] };
    }
    for (const { net } of nets) if (this.#removing.has(net.id)) throw notFound(`network ${net.name} not found`);
    await this.#reclaimDraining(nets.map(({ req, net }) => ({ net, ipv4: req.ipv4, ipv6: req.ipv6 })));

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
      const raced = ports.filter((p) => portClash([...this.#ports.values()].flat(), p));
      if (raced.length) {
        const explicit = raced.find((p) => spec.ports?.some((b) => b.hostPort === p.hostPort));
        if (explicit || attempt >= 3) throw conflict(`Bind for ${raced[0]!.hostIp}:${raced[0]!.hostPort} failed: port is already allocated`);
        continue; // a random port picked by a concurrent attach too: pick again
      }
      for (const { net } of nets) if (!this.#networks.has(net.id) || this.#removing.has(net.id)) throw notFound(`network ${net.name} not found`);
      ready = readyFits ? this.#ready.take(nets[0]!.net.id) : undefined;
      eps = nets.map(({ req, net }, i) => this.#newEndpoint(spec, net, req, i, `eth${i}`, ready));
      primary = eps.find((e) => this.#isGatewayCandidate(e));
      for (const p of ports) p.containerIp = primary!.ipv4;
      try {
        this.#commit(eps, ports);
      } catch (err) {
        if (ready) void this.#discardReady([ready]);
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
    const work = await Promise.allSettled([
      adopted
        ? this.#netns.adopt(spec.containerId, adopted.name)
        : createNetns
          ? plumb(plan, this.#tools, this.#hostNs, (argv, input) => this.#netns.create(spec.containerId, { argv, input }))
          : plumbExisting(spec.netnsPath, plan, this.#tools, this.#hostNs),
      ports.length ? this.#firewall.addPorts(ports.map(toFirewallPort)) : Promise.resolve(),
      ...dnsNets.map((n) => this.#aardvark.update(this.#dnsNetwork(n))),
    ]);
    const failed = work.find((w): w is PromiseRejectedResult => w.status === 'rejected');
    if (failed) {
      await this.#rollback(spec.containerId, eps, ports, dnsNets);
      if (createNetns) await this.#netns.remove(spec.containerId).catch(() => {});
      if (adopted) await this.#netns.remove(adopted.name).catch(() => {});
      throw failed.reason;
    }
    return this.containerNetworks(spec.containerId);
  }

  /** Joins one more network on a running container (docker network connect). */
  async connect(spec: ConnectSpec): Promise<EndpointInfo> {
    this.#assertReady();
    const net = this.get(spec.network);
    if (net.driver !== 'bridge') throw forbidden(`container cannot be disconnected from host network or connected to host network`);
    assertAttachable(net);
    if (this.#removing.has(net.id)) throw notFound(`network ${net.name} not found`);
    await this.#reclaimDraining([{ net, ipv4: spec.ipv4, ipv6: spec.ipv6 }]);
    const current = [...(this.#endpoints.get(spec.containerId)?.values() ?? [])];
    if (current.some((e) => e.networkId === net.id)) throw forbidden(`endpoint with name ${stripSlash(spec.name)} already exists in network ${net.name}`);
    const used = new Set(current.map((e) => e.ifName));
    let idx = 0;
    while (used.has(`eth${idx}`)) idx++;
    const order = current.reduce((m, e) => Math.max(m, e.order + 1), 0);
    const ep = this.#newEndpoint(spec, net, spec, order, `eth${idx}`);
    const hadPrimary = current.find((e) => this.#isGatewayCandidate(e));
    const hadDns = current.some((e) => this.#networks.get(e.networkId)!.dnsEnabled);
    this.#commit([ep], []);
    const plan: PlumbPlan = {
      add: [this.#plumbEndpoint(ep)],
      routes: !hadPrimary && this.#isGatewayCandidate(ep) ? this.#routes(ep) : undefined,
      dns: !hadDns && net.dnsEnabled ? this.#dnsRoute(ep) : undefined,
    };
    const work = await Promise.allSettled([
      plumbExisting(spec.netnsPath, plan, this.#tools, this.#hostNs),
      net.dnsEnabled ? this.#aardvark.update(this.#dnsNetwork(net)) : Promise.resolve(),
    ]);
    const failed = work.find((w): w is PromiseRejectedResult => w.status === 'rejected');
    if (failed) {
      await this.#rollback(spec.containerId, [ep], [], net.dnsEnabled ? [net] : []);
      throw failed.reason;
    }
    return this.#info(ep, net);
  }

  /** Leaves one network (docker network disconnect); the default route and DNS move to what remains. */
  async disconnect(containerId: string, network: string): Promise<void> {
    this.#assertReady();
    const net = this.get(network);
    const eps = this.#endpoints.get(containerId);
    const ep = eps?.get(net.id);
    if (!eps || !ep) throw forbidden(`container ${containerId} is not connected to network ${net.name}`);
    const wasPrimary = this.#primaryOf(containerId) === ep;
    const dnsBefore = this.#dnsEndpointOf(containerId);
    this.#records.transaction(() => this.#records.deleteEndpoint(containerId, net.id));
    eps.delete(net.id);
    const newPrimary = this.#primaryOf(containerId);
    const dnsAfter = this.#dnsEndpointOf(containerId);
    const ports = this.#ports.get(containerId) ?? [];
    const jobs: Promise<unknown>[] = [deleteHostVeths([ep.hostVeth], this.#tools.ip)];
    if (wasPrimary && ports.length) jobs.push(this.#retargetPorts(containerId, newPrimary));
    if (net.dnsEnabled) jobs.push(this.#aardvark.update(this.#dnsNetwork(net)));
    await Promise.all(jobs);
    if (eps.size === 0) this.#endpoints.delete(containerId);
    const plan: PlumbPlan = {
      add: [],
      routes: wasPrimary && newPrimary ? this.#routes(newPrimary) : undefined,
      // Routes through the removed interface went with it; only a new one may be needed.
      dns: dnsAfter && dnsAfter !== dnsBefore ? this.#dnsRoute(dnsAfter) : undefined,
    };
    if (existsSync(ep.netnsPath)) await plumbExisting(ep.netnsPath, plan, this.#tools, this.#hostNs);
  }

  /**
   * Releases everything a container holds: host-side devices, addresses, published ports and DNS names.
   * Idempotent. The namespace file stays until removeNetns.
   */
  async detach(containerId: string): Promise<void> {
    const eps = [...(this.#endpoints.get(containerId)?.values() ?? [])];
    const ports = this.#ports.get(containerId) ?? [];
    if (eps.length === 0 && ports.length === 0) return;
    this.#forget(containerId);
    const dnsNets = eps.map((e) => this.#networks.get(e.networkId)!).filter((n) => n.dnsEnabled);
    const veths: DrainingVeth[] = eps.map((e) => ({ hostVeth: e.hostVeth, networkId: e.networkId, ipv4: e.ipv4, ipv6: e.ipv6 }));
    if (this.#drainWithNetns) this.#drain.add(veths);
    await Promise.all([
      this.#drainWithNetns ? Promise.resolve() : deleteHostVeths(veths.map((v) => v.hostVeth), this.#tools.ip),
      ports.length ? this.#removePortRules(ports) : Promise.resolve(),
      ...dnsNets.map((n) => this.#aardvark.update(this.#dnsNetwork(n))),
    ]);
  }

  /**
   * Resolves once background work has finished: the host-side devices of every container detached so
   * far are gone (they go with their namespaces, shortly after removeNetns) and no namespace is being
   * made ahead.
   */
  async settled(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve)); // a refill scheduled just now
    await Promise.all([this.#ready.settled(), this.#readyBare.settled(), this.#netns.settled()]);
    await this.#drain.settled();
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
    await this.#drain.flush((v) => held(v, v.ipv4) || held(v, v.ipv6));
  }

  /** Follows a container rename (docker rename): its DNS name changes on every network it is on. */
  async renameContainer(containerId: string, name: string): Promise<void> {
    const eps = [...(this.#endpoints.get(containerId)?.values() ?? [])];
    if (eps.length === 0) return;
    this.#records.transaction(() => {
      for (const e of eps) {
        e.containerName = stripSlash(name);
        const { containerId: c, networkId, ipv4, ipv6, createdAt, ...data } = e;
        this.#records.saveEndpoint({ containerId: c, networkId, ipv4, ipv6, createdAt, data });
      }
    });
    const dnsNets = eps.map((e) => this.#networks.get(e.networkId)!).filter((n) => n.dnsEnabled);
    await Promise.all(dnsNets.map((n) => this.#aardvark.update(this.#dnsNetwork(n))));
  }

  /** Sets the addresses of a network that other hosts' containers hold. */
  setReservedAddresses(networkId: string, addresses: string[]): void {
    if (addresses.length) this.#reserved.set(networkId, addresses);
    else this.#reserved.delete(networkId);
  }

  /** Sets the names a network's DNS answers besides those of this node's containers on it. */
  async setExtraDns(networkId: string, records: DnsRecord[]): Promise<void> {
    const before = JSON.stringify(this.#extraDns.get(networkId) ?? []);
    if (records.length) this.#extraDns.set(networkId, records);
    else this.#extraDns.delete(networkId);
    const n = this.#networks.get(networkId);
    if (n?.dnsEnabled && before !== JSON.stringify(records)) await this.#aardvark.update(this.#dnsNetwork(n));
  }

  // ---------------------------------------------------------------- container files

  /** /etc/resolv.conf for a container on these networks (names or ids). */
  async resolvConf(networks: string[], opts: { dns?: string[]; dnsSearch?: string[]; dnsOptions?: string[] } = {}): Promise<string> {
    const nets = networks.map((n) => this.get(n));
    const host = parseResolvConf(await readFile(this.#opts.hostResolvConf ?? '/etc/resolv.conf', 'utf8').catch(() => ''));
    return resolvConfText({
      host,
      embeddedDns: nets.some((n) => n.dnsEnabled),
      hostNetwork: nets.some((n) => n.driver === 'host'),
      ipv6: nets.some((n) => n.enableIPv6),
      ...opts,
    });
  }

  /** /etc/hosts for a container; its own addresses come from its endpoints. */
  hostsFile(containerId: string, opts: Omit<HostsOptions, 'addresses' | 'ipv6'> & { ipv6?: boolean }): string {
    const eps = [...(this.#endpoints.get(containerId)?.values() ?? [])].sort((a, b) => a.order - b.order);
    const addresses = eps.flatMap((e) => [e.ipv4, e.ipv6].filter((x) => !!x));
    return hostsText({ ...opts, addresses: addresses.slice(0, 1), ipv6: opts.ipv6 ?? true });
  }

  // ---------------------------------------------------------------- internals

  #assertReady(): void {
    if (!this.#initialized) throw new BerthError('unavailable', 'network driver is not initialized');
  }

  #saveNetwork(n: NetworkRecord): void {
    this.#records.saveNetwork({ id: n.id, name: n.name, createdAt: Date.parse(n.created), data: n });
    this.#networks.set(n.id, n);
  }

  #hasEndpoints(networkId: string): boolean {
    for (const eps of this.#endpoints.values()) if (eps.has(networkId)) return true;
    return false;
  }

  #portsOf(containerId: string): StoredPort[] {
    let p = this.#ports.get(containerId);
    if (!p) this.#ports.set(containerId, (p = []));
    return p;
  }

  #fromStored(s: StoredEndpoint): Endpoint {
    return { ...(s.data as EndpointData), containerId: s.containerId, networkId: s.networkId, ipv4: s.ipv4, ipv6: s.ipv6, createdAt: s.createdAt };
  }

  #remember(e: Endpoint): void {
    let m = this.#endpoints.get(e.containerId);
    if (!m) this.#endpoints.set(e.containerId, (m = new Map()));
    m.set(e.networkId, e);
  }

  /** Drops a container's endpoints and ports from memory and the database. */
  #forget(containerId: string): void {
    const eps = this.#endpoints.get(containerId);
    this.#records.transaction(() => {
      for (const e of eps?.values() ?? []) this.#records.deleteEndpoint(containerId, e.networkId);
      this.#records.deletePorts(containerId);
    });
    this.#endpoints.delete(containerId);
    this.#ports.delete(containerId);
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
      endpointId: hex(32),
      containerName: stripSlash(spec.name),
      order,
      ifName,
      hostVeth: ready?.hostVeth ?? this.#newVethName(),
      mac: ready?.mac ?? req.mac?.toLowerCase() ?? (addr.ipv4 ? macForIPv4(parseAddress(addr.ipv4)!) : randomMac()),
      netnsPath: spec.netnsPath,
      aliases: [...new Set(req.aliases ?? [])],
      ...(spec.dns?.length ? { dnsServers: spec.dns } : {}),
    };
  }

  #newVethName(): string {
    return `${this.prefix}${hex(8).slice(0, 15 - this.prefix.length)}`;
  }

  /**
   * Tops up the namespaces made ahead, in the background. The engine calls it once a container's
   * process exists: a refill during a start would take CPU from it (2 vCPUs on the test VM).
   */
  replenish(): void {
    this.#refill();
  }

  #refill(): void {
    setImmediate(() => {
      this.#ready.refill();
      this.#readyBare.refill();
    });
  }

  /**
   * One namespace made ahead: on the default bridge (eth0 with the lowest free address, its MAC and
   * default route, host end on the bridge), or with only loopback. None while the driver is not
   * running, or when the default bridge has IPv6 (left to the ordinary path) or no free address.
   */
  #makeReady(onBridge: boolean): { entry: ReadyNetns; done: Promise<void> } | undefined {
    if (!this.#initialized) return undefined;
    const name = `${READY_PREFIX}${hex(8)}`;
    const entry: ReadyNetns = { name, networkId: '', hostVeth: '', ipv4: '', ipv4PrefixLen: 0, mac: '', ready: false };
    let plan: PlumbPlan = { loopbackUp: true, add: [] };
    if (onBridge) {
      const net = this.#byName('bridge');
      if (!net || net.driver !== 'bridge' || net.enableIPv6 || net.internal) return undefined;
      let addr;
      try {
        addr = assignAddresses(net, {}, this.#usedAddresses(net, 4), this.#usedAddresses(net, 6));
      } catch {
        return undefined; // full: containers get the error from the ordinary path
      }
      Object.assign(entry, { networkId: net.id, hostVeth: this.#newVethName(), ipv4: addr.ipv4, ipv4PrefixLen: addr.ipv4PrefixLen, mac: macForIPv4(parseAddress(addr.ipv4)!) });
      const ep = { ifName: 'eth0', hostVeth: entry.hostVeth, bridge: net.bridgeName, mac: entry.mac, mtu: bridgeSettings(net).mtu, ipv4: { address: entry.ipv4, prefixLen: entry.ipv4PrefixLen } };
      plan = { loopbackUp: true, add: [ep], routes: { ifName: 'eth0', gateway4: net.gateway } };
    }
    const cmds = plumbCommands(plan, this.#tools, this.#hostNs);
    const after = cmds.hostInput ? [{ argv: [this.#tools.ip, '-batch', '-'], input: cmds.hostInput }] : [];
    return { entry, done: this.#netns.createAhead(name, { argv: cmds.nsArgv, input: cmds.nsInput }, after) };
  }

  /** Removes namespaces made ahead (their veths go with them). */
  async #discardReady(entries: ReadyNetns[]): Promise<void> {
    for (const e of entries) await this.#netns.remove(e.name).catch(() => {});
    const veths = entries.filter((e) => e.hostVeth).map((e) => ({ hostVeth: e.hostVeth, networkId: e.networkId, ipv4: e.ipv4, ipv6: '' }));
    if (this.#drainWithNetns) this.#drain.add(veths);
    else await deleteHostVeths(veths.map((v) => v.hostVeth), this.#tools.ip);
  }

  async #removeReady(): Promise<void> {
    const entries = [...(await this.#ready.takeAll()), ...(await this.#readyBare.takeAll())];
    await this.#discardReady(entries);
    await this.#netns.settled();
    await this.#drain.settled();
    this.#shell.close();
  }

  #usedAddresses(net: NetworkRecord, family: 4 | 6): Set<bigint> {
    const used = new Set<bigint>();
    for (const eps of this.#endpoints.values()) {
      const e = eps.get(net.id);
      const ip = e && (family === 4 ? e.ipv4 : e.ipv6);
      if (ip) used.add(parseAddress(ip)!.value);
    }
    for (const held of [...Object.values(net.auxAddresses ?? {}), ...this.#drain.addressesOf(net.id), ...this.#ready.addressesOf(net.id), ...(this.#reserved.get(net.id) ?? [])]) {
      const a = parseAddress(held);
      if (a?.family === family) used.add(a.value);
    }
    return used;
  }

  #commit(eps: Endpoint[], ports: StoredPort[]): void {
    try {
      this.#records.transaction(() => {
        for (const e of eps) {
          const { containerId, networkId, ipv4, ipv6, createdAt, ...data } = e;
          this.#records.saveEndpoint({ containerId, networkId, ipv4, ipv6, createdAt, data });
        }
        for (const p of ports) this.#records.insertPort(p);
      });
    } catch (err) {
      if ((err as { code?: string }).code?.startsWith('SQLITE_CONSTRAINT')) {
        throw conflict(`address or port was taken concurrently, try again: ${errorMessage(err)}`);
      }
      throw err;
    }
    for (const e of eps) this.#remember(e);
    if (ports.length) this.#portsOf(eps[0]!.containerId).push(...ports);
  }

  async #rollback(containerId: string, eps: Endpoint[], ports: StoredPort[], dnsNets: NetworkRecord[]): Promise<void> {
    const m = this.#endpoints.get(containerId);
    this.#records.transaction(() => {
      for (const e of eps) this.#records.deleteEndpoint(containerId, e.networkId);
      if (ports.length) this.#records.deletePorts(containerId);
    });
    for (const e of eps) m?.delete(e.networkId);
    if (m && m.size === 0) this.#endpoints.delete(containerId);
    if (ports.length) this.#ports.delete(containerId);
    await Promise.allSettled([
      deleteHostVeths(eps.map((e) => e.hostVeth), this.#tools.ip),
      ports.length ? this.#removePortRules(ports) : Promise.resolve(),
      ...dnsNets.map((n) => this.#aardvark.update(this.#dnsNetwork(n))),
    ]);
  }

  #isGatewayCandidate(e: Endpoint): boolean {
    const n = this.#networks.get(e.networkId)!;
    return !n.internal && !!e.ipv4;
  }

  #primaryOf(containerId: string): Endpoint | undefined {
    return [...(this.#endpoints.get(containerId)?.values() ?? [])].sort((a, b) => a.order - b.order).find((e) => this.#isGatewayCandidate(e));
  }

  /** The endpoint whose network answers the container's 127.0.0.11: the first one with DNS. */
  #dnsEndpointOf(containerId: string): Endpoint | undefined {
    return [...(this.#endpoints.get(containerId)?.values() ?? [])].sort((a, b) => a.order - b.order).find((e) => this.#networks.get(e.networkId)!.dnsEnabled);
  }

  #dnsRoute(e: Endpoint): DnsRoute {
    return { ifName: e.ifName, gateway: this.#networks.get(e.networkId)!.gateway, source: e.ipv4 };
  }

  #routes(e: Endpoint): PlumbPlan['routes'] {
    const n = this.#networks.get(e.networkId)!;
    return { ifName: e.ifName, gateway4: n.gateway, gateway6: e.ipv6 && n.gateway6 ? n.gateway6 : undefined };
  }

  #plumbEndpoint(e: Endpoint): PlumbEndpoint {
    const n = this.#networks.get(e.networkId)!;
    return {
      ifName: e.ifName,
      hostVeth: e.hostVeth,
      bridge: n.bridgeName,
      mac: e.mac,
      mtu: bridgeSettings(n).mtu,
      ipv4: e.ipv4 ? { address: e.ipv4, prefixLen: e.ipv4PrefixLen } : undefined,
      ipv6: e.ipv6 ? { address: e.ipv6, prefixLen: e.ipv6PrefixLen } : undefined,
    };
  }

  /** Checks and picks host ports (probing the host), without committing them; the target is filled in later. */
  #reservePorts(spec: AttachSpec, net: NetworkRecord): Promise<StoredPort[]> {
    return reservePorts(spec.ports ?? [], {
      containerId: spec.containerId,
      containerIp: '',
      defaultHostIp: bridgeSettings(net).hostBindingIpv4,
      taken: [...this.#ports.values()].flat(),
    });
  }

  async #retargetPorts(containerId: string, target: Endpoint | undefined): Promise<void> {
    const ports = this.#ports.get(containerId) ?? [];
    await this.#removePortRules(ports);
    if (!target) {
      this.#records.transaction(() => this.#records.deletePorts(containerId));
      this.#ports.delete(containerId);
      return;
    }
    this.#records.transaction(() => this.#records.retargetPorts(containerId, target.ipv4));
    for (const p of ports) p.containerIp = target.ipv4;
    await this.#firewall.addPorts(ports.map(toFirewallPort));
  }

  /** Deletes port rules; if the table does not match (someone flushed it), rebuilds it from the records. */
  async #removePortRules(ports: StoredPort[]): Promise<void> {
    try {
      await this.#firewall.removePorts(ports.map(toFirewallPort));
    } catch (err) {
      log.warn('removing port rules failed; rebuilding the table', { error: errorMessage(err) });
      await this.#firewall.rebuild(this.#firewallNetworks(), [...this.#ports.values()].flat().map(toFirewallPort));
    }
  }

  #bridgeSpec(n: NetworkRecord) {
    const addrs = [`${n.gateway}/${parseCidr(n.subnet)!.prefix}`];
    if (n.enableIPv6 && n.subnet6 && n.gateway6) addrs.push(`${n.gateway6}/${parseCidr(n.subnet6)!.prefix}`);
    return { name: n.bridgeName, mtu: bridgeSettings(n).mtu, addresses: addrs };
  }

  #firewallNetwork(n: NetworkRecord): FirewallNetwork {
    const s = bridgeSettings(n);
    return {
      id: n.id,
      bridge: n.bridgeName,
      subnet4: n.subnet || undefined,
      subnet6: n.enableIPv6 ? n.subnet6 : undefined,
      dnsGateway: n.dnsEnabled ? n.gateway : undefined,
      dnsPort: this.#opts.dnsPort ?? 53,
      internal: n.internal,
      masquerade: s.masquerade,
      icc: s.icc,
    };
  }

  #firewallNetworks(): FirewallNetwork[] {
    return [...this.#networks.values()].filter((n) => n.driver === 'bridge').map((n) => this.#firewallNetwork(n));
  }

  #dnsNetwork(n: NetworkRecord): DnsNetwork {
    const records = [];
    for (const eps of this.#endpoints.values()) {
      const e = eps.get(n.id);
      if (!e) continue;
      records.push({ containerId: e.containerId, ipv4: e.ipv4 || undefined, ipv6: e.ipv6 || undefined, names: dnsNames(e), dnsServers: e.dnsServers });
    }
    records.push(...(this.#extraDns.get(n.id) ?? []));
    return { id: n.id, listen: [n.gateway, ...(n.enableIPv6 && n.gateway6 ? [n.gateway6] : [])], records };
  }

  #info(e: Endpoint, n: NetworkRecord): EndpointInfo {
    return {
      networkId: n.id,
      networkName: n.name,
      endpointId: e.endpointId,
      ipAddress: e.ipv4,
      ipPrefixLen: e.ipv4 ? e.ipv4PrefixLen : 0,
      gateway: n.gateway,
      ipv6Address: e.ipv6,
      ipv6PrefixLen: e.ipv6 ? e.ipv6PrefixLen : 0,
      ipv6Gateway: e.ipv6 ? n.gateway6 ?? '' : '',
      macAddress: e.mac,
      aliases: e.aliases,
      dnsNames: n.dnsEnabled ? dnsNames(e) : [],
      ifName: e.ifName,
    };
  }
}

function stripSlash(name: string): string {
  return name.startsWith('/') ? name.slice(1) : name;
}

function dnsNames(e: Endpoint): string[] {
  return [...new Set([e.containerName, ...e.aliases, e.containerId.slice(0, 12)].filter((x) => !!x))];
}

function toFirewallPort(p: StoredPort): FirewallPort {
  return { protocol: p.protocol, hostIp: p.hostIp, hostPort: p.hostPort, containerIp: p.containerIp, containerPort: p.containerPort };
}

function toPublished(p: StoredPort): PublishedPort {
  return { containerPort: p.containerPort, protocol: p.protocol as Protocol, hostIp: p.hostIp, hostPort: p.hostPort };
}

/** The IPv4 subnet and gateway of a leftover bridge device, for adopting it with its address. */
function adoptedSubnet(link: LinkInfo | undefined): { subnet: string; gateway: string } | undefined {
  if (link?.kind !== 'bridge') return undefined;
  for (const a of link.addresses) {
    const c = parseCidr(a, false);
    if (c?.family === 4) return { subnet: formatCidr(c), gateway: a.slice(0, a.indexOf('/')) };
  }
  return undefined;
}
