/**
 * Networks as records and bridges: the predefined ones, user-defined bridge networks with their
 * subnets (chosen under a host-wide lock, clear of host routes, nameservers and every other network),
 * their bridge devices and firewall rules through the bridge driver, and the hooks run with a bridge's
 * lifecycle.
 */
import { randomHex } from '../../lib/random-hex.js';
import { BerthError, conflict, errorMessage, invalidArgument, notFound } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { BridgeDriver } from '../../network/bridge-driver.js';
import type { LinkInfo } from '../../network/bridge-device.js';
import { cidrOverlaps, formatAddress, formatCidr, parseAddress, parseCidr, type Cidr } from '../../network/cidr.js';
import type { FirewallNetwork } from '../../network/firewall.js';
import type { DnsNetwork } from '../../network/aardvark.js';
import { SUBNET_LOCK_PATH, withHostLock } from '../../network/host-lock.js';
import { chooseSubnet, defaultGateway, defaultIPv4Pools, randomIPv6Pools } from './ipam.js';
import { forbidden, Option, parseIpamConfig, validateDriver, validateName, validateOptions, type NetworkCreateSpec, type NetworkRecord, type ParsedPool } from './network-record.js';
import type { NetworkTable } from './network-table.js';
import type { BridgeHooks } from './network-types.js';
import { bridgeSpec, dnsNetwork, firewallNetwork, toFirewallPort } from './plumbing-specs.js';


export interface BridgeNetworksOptions {
  table: NetworkTable;
  driver: BridgeDriver;
  /** Whether the controller is running (rules go in at once) rather than starting (the table is rebuilt after). */
  live: () => boolean;
  defaultBridgeSubnet?: string;
  subnetLockPath?: string;
  hooks?: readonly BridgeHooks[];
}

export class BridgeNetworks {
  readonly #opts: BridgeNetworksOptions;
  readonly #table: NetworkTable;
  readonly #networks: Map<string, NetworkRecord>;
  readonly #driver: BridgeDriver;
  readonly #live: () => boolean;
  readonly #hooks: readonly BridgeHooks[];
  readonly #pendingNames = new Set<string>();
  readonly #removing = new Set<string>();

  constructor(opts: BridgeNetworksOptions) {
    this.#opts = opts;
    this.#table = opts.table;
    this.#networks = opts.table.networks;
    this.#driver = opts.driver;
    this.#live = opts.live;
    this.#hooks = opts.hooks ?? [];
  }

  /**
   * At start-up, after stray devices went: the predefined networks exist (the default bridge adopts a
   * leftover device of its name with its subnet) and every bridge network has its device.
   */
  async reconcile(links: Map<string, LinkInfo>): Promise<void> {
    if (!this.#table.byName('host')) this.#table.saveNetwork(this.#predefined('host', 'host'));
    if (!this.#table.byName('none')) this.#table.saveNetwork(this.#predefined('none', 'null'));
    let bridge = this.#table.byName('bridge');
    if (bridge && !links.has(bridge.bridgeName) && !this.#table.hasEndpoints(bridge.id)) {
      // Recreated below; its subnet may have been taken by something else meanwhile, so pick again.
      this.#table.deleteNetwork(bridge.id);
      bridge = undefined;
    }
    if (!bridge) {
      const created = await this.#createBridgeNetwork(this.#defaultBridgeSpec(adoptedSubnet(links.get(this.#driver.defaultBridgeName))), true);
      links.set(created.bridgeName, { name: created.bridgeName, kind: 'bridge', addresses: [] });
    }
    for (const n of this.#networks.values()) {
      if (n.driver === 'bridge' && !links.has(n.bridgeName)) {
        await this.#driver.createBridge(bridgeSpec(n));
        await this.runHooks('created', n);
      }
    }
  }

  /** Whether the network is being removed: nothing may join it. */
  isRemoving(id: string): boolean {
    return this.#removing.has(id);
  }

  bridgeNames(): Set<string> {
    return new Set([...this.#networks.values()].map((n) => n.bridgeName));
  }


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
    const byName = this.#table.byName(idOrName);
    if (byName) return byName;
    if (!/^[0-9a-f]+$/.test(idOrName)) return undefined;
    const matches = [...this.#networks.values()].filter((n) => n.id.startsWith(idOrName));
    if (matches.length > 1) throw invalidArgument(`network ${idOrName} is ambiguous (${matches.length} matches found based on ID prefix)`);
    return matches[0];
  }

  async create(spec: NetworkCreateSpec): Promise<NetworkRecord> {
    this.#assertLive();
    validateName(spec.name);
    if (spec.name === 'host' || spec.name === 'none') throw forbidden(`operation is not permitted on predefined ${spec.name} network`);
    validateDriver(spec.driver);
    if ((spec.ingress && spec.driver !== 'overlay') || spec.configOnly || spec.configFrom) throw forbidden('swarm and config-only networks are not supported');
    if (spec.scope && spec.scope !== 'local' && !(spec.driver === 'overlay' && spec.scope === 'swarm')) throw invalidArgument(`scope "${spec.scope}" is not supported`);
    if (spec.ipam?.driver && spec.ipam.driver !== 'default') throw notFound(`plugin "${spec.ipam.driver}" not found`);
    validateOptions(spec.options ?? {});
    if (this.#table.byName(spec.name) || this.#pendingNames.has(spec.name) || this.#table.isUnreadable(spec.name)) throw conflict(`network with name ${spec.name} already exists`);
    this.#pendingNames.add(spec.name);
    try {
      return await this.#createBridgeNetwork(spec, false);
    } finally {
      this.#pendingNames.delete(spec.name);
    }
  }

  async #createBridgeNetwork(spec: NetworkCreateSpec, predefined: boolean): Promise<NetworkRecord> {
    const pools = parseIpamConfig(spec.ipam?.config);
    if (spec.id !== undefined && (!/^[0-9a-f]{64}$/.test(spec.id) || this.#networks.has(spec.id) || this.#table.isUnreadable(spec.id))) {
      throw conflict(`network id ${spec.id} is not a free 64-hex-digit id`);
    }
    const id = spec.id ?? randomHex(32);
    const options = { ...(spec.options ?? {}) };
    const bridgeName = options[Option.bridgeName] || (predefined ? this.#driver.defaultBridgeName : this.#driver.bridgeNameFor(id));
    const enableIPv6 = spec.enableIPv6 ?? false;
    for (const n of this.#networks.values()) {
      if (n.bridgeName === bridgeName) throw conflict(`bridge ${bridgeName} is already used by network ${n.name}`);
    }
    return withHostLock(this.#opts.subnetLockPath ?? SUBNET_LOCK_PATH, async () => {
      // The host's routes, resolvers and (for a new bridge) whether its name is taken, side by side.
      const [routes, nameservers, taken] = await Promise.all([this.#driver.hostRoutes(), this.#hostNameserverPrefixes(), predefined ? false : this.#driver.hasLink(bridgeName)]);
      const ours = [...this.#networks.values()].flatMap((n) => [n.subnet, n.subnet6].filter((s): s is string => !!s).map((s) => parseCidr(s)!));
      const subnet4 = this.#pickSubnet(pools.v4, ours, () => chooseSubnet(defaultIPv4Pools(), [...routes, ...ours, ...nameservers]), 4);
      const subnet6 = enableIPv6 ? this.#pickSubnet(pools.v6, ours, () => chooseSubnet(randomIPv6Pools(), [...routes, ...ours]), 6) : undefined;
      if (taken) throw conflict(`a network interface named ${bridgeName} already exists on the host`);
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
        ...(spec.driver === 'overlay' && spec.ingress ? { ingress: true } : {}),
      };
      // The rules name the bridge by its name only: they need not wait for the device. Whichever of
      // the two was made goes again when the other failed.
      const live = this.#live();
      const [bridge, rules] = await Promise.allSettled([this.#driver.createBridge(bridgeSpec(record)), live ? this.#driver.firewall.addNetwork(this.#firewallNetwork(record)) : undefined]);
      if (bridge.status === 'rejected' || rules.status === 'rejected') {
        if (bridge.status === 'fulfilled') await this.#driver.deleteBridge(bridgeName).catch(() => {});
        if (live && rules.status === 'fulfilled') await this.#driver.firewall.removeNetwork(this.#firewallNetwork(record)).catch(() => {});
        throw bridge.status === 'rejected' ? bridge.reason : (rules as PromiseRejectedResult).reason;
      }
      let saved = false;
      try {
        this.#table.saveNetwork(record);
        saved = true;
        await this.runHooks('created', record);
        // The DNS server is made ready for the network now, in the background: its first containers
        // then do not wait for it to start when they start together (compose up). Once this answer is
        // out (setImmediate: before the loop reads another request): starting the server forks berthd,
        // which would hold the answer back by milliseconds.
        if (record.dnsEnabled && this.#live()) {
          const dns = dnsNetwork(record, [], this.#table.extraDns.get(record.id));
          setImmediate(() => void this.#driver.dns.prepare(dns).catch((err) => log.warn('preparing DNS for a new network failed', { network: record.name, error: errorMessage(err) })));
        }
      } catch (err) {
        if (saved) this.#table.deleteNetwork(record.id);
        await this.#driver.deleteBridge(bridgeName).catch(() => {});
        if (this.#live()) await this.#driver.firewall.removeNetwork(this.#firewallNetwork(record)).catch(() => {});
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
    return (await this.#driver.hostResolvConf()).nameservers.flatMap((ns) => {
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
        [Option.bridgeName]: this.#driver.defaultBridgeName,
        [Option.mtu]: '1500',
      },
    };
  }

  #predefined(name: string, driver: 'host' | 'null'): NetworkRecord {
    return {
      id: randomHex(32), name, driver, scope: 'local', subnet: '', gateway: '', internal: false, attachable: false,
      enableIPv6: false, labels: {}, options: {}, ipamOptions: {}, bridgeName: '', created: new Date().toISOString(),
      dnsEnabled: false, predefined: true,
    };
  }

  /** Removes a user-defined network. Fails while containers are attached (dockerd: 403). */
  async remove(idOrName: string): Promise<void> {
    this.#assertLive();
    const n = this.get(idOrName);
    if (n.predefined) throw forbidden(`${n.name} is a pre-defined network and cannot be removed`);
    if (this.#table.hasEndpoints(n.id) || this.#removing.has(n.id)) {
      throw forbidden(`error while removing network: network ${n.name} id ${n.id} has active endpoints`);
    }
    this.#removing.add(n.id);
    try {
      await this.#driver.firewall.removeNetwork(this.#firewallNetwork(n)).catch(async (err) => {
        log.warn('removing network rules failed; rebuilding the table', { network: n.name, error: errorMessage(err) });
        await this.#driver.firewall.rebuild(this.firewallNetworks().filter((f) => f.id !== n.id), this.#table.allPorts().map(toFirewallPort));
      });
      await this.#driver.drain.flush((v) => v.networkId === n.id);
      await this.runHooks('deleting', n).catch((err) => log.warn('a bridge hook failed before the bridge went', { network: n.name, error: errorMessage(err) }));
      await this.#driver.deleteBridge(n.bridgeName);
      this.#table.deleteNetwork(n.id);
      if (n.dnsEnabled) await this.#driver.dns.update({ id: n.id, listen: [], records: [] });
    } finally {
      this.#removing.delete(n.id);
    }
  }

  /** Removes every user-defined network without endpoints that `keep` does not protect; returns their names. */
  async prune(keep: (n: NetworkRecord) => boolean = () => false): Promise<string[]> {
    const removed: string[] = [];
    for (const n of this.list()) {
      if (n.predefined || this.#table.hasEndpoints(n.id) || keep(n)) continue;
      try {
        await this.remove(n.id);
        removed.push(n.name);
      } catch (err) {
        if (!(err instanceof BerthError && (err.kind === 'forbidden' || err.kind === 'not-found'))) throw err;
      }
    }
    return removed;
  }

  #firewallNetwork(n: NetworkRecord): FirewallNetwork {
    return firewallNetwork(n, this.#driver.dnsPort);
  }

  firewallNetworks(): FirewallNetwork[] {
    return [...this.#networks.values()].filter((n) => n.driver === 'bridge').map((n) => this.#firewallNetwork(n));
  }

  /** The DNS tables of the networks with names. */
  dnsNetworks(): DnsNetwork[] {
    return [...this.#networks.values()].filter((n) => n.dnsEnabled).map((n) => dnsNetwork(n, this.#table.endpoints.values(), this.#table.extraDns.get(n.id)));
  }

  /** Runs every hook's `created` or `deleting` for a bridge network, in order. */
  async runHooks(which: 'created' | 'deleting', n: NetworkRecord): Promise<void> {
    for (const h of this.#hooks) await h[which]?.(n);
  }
  #assertLive(): void {
    if (!this.#live()) throw new BerthError('unavailable', 'network driver is not initialized');
  }
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
