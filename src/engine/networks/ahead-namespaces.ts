/**
 * The network namespaces made ahead of starts: on the default bridge (eth0 with the lowest free
 * address, its MAC and default route, host end on the bridge), and with only loopback (for `none`,
 * special networks, and user networks plumbed from berthd). Two ReadyPools of the driver's
 * namespaces; ContainerEndpoints takes from them and gives back what it could not use.
 */
import { randomHex } from '../../lib/random-hex.js';
import { READY_PREFIX, type BridgeDriver } from '../../network/bridge-driver.js';
import { parseAddress } from '../../network/cidr.js';
import type { PlumbPlan } from '../../network/endpoint-plumbing.js';
import { macForIPv4 } from '../../network/mac.js';
import { ReadyPool, type ReadyNetns } from '../../network/ready-pool.js';
import { assignAddresses } from './endpoint-addresses.js';
import { bridgeSettings, type NetworkRecord } from './network-record.js';
import type { NetworkTable } from './network-table.js';

export interface AheadNamespacesOptions {
  table: NetworkTable;
  driver: BridgeDriver;
  /** Whether the controller is running: none are made before. */
  live: () => boolean;
  /** How many of each kind are kept ready. */
  size: number;
  /** Addresses taken on a network (endpoints, draining veths, these namespaces' own, reserved). */
  usedAddresses: (net: NetworkRecord, family: 4 | 6) => Set<bigint>;
}

export class AheadNamespaces {
  /** On the default bridge, keyed by its network id. */
  readonly bridged: ReadyPool;
  /** Loopback only, keyed ''. */
  readonly bare: ReadyPool;

  constructor(private readonly o: AheadNamespacesOptions) {
    this.bridged = new ReadyPool(o.size, () => this.#make(true));
    this.bare = new ReadyPool(o.size, () => this.#make(false));
  }

  /** Starts making them (once the controller is live). */
  start(): void {
    this.bridged.reset();
    this.bare.reset();
    this.refill();
  }

  /** Drops every one made ahead. */
  async stop(): Promise<void> {
    await this.discard([...(await this.bridged.takeAll()), ...(await this.bare.takeAll())]);
  }

  /** Tops both pools up, in the background. */
  refill(): void {
    setImmediate(() => {
      this.bridged.refill();
      this.bare.refill();
    });
  }

  async settled(): Promise<void> {
    await Promise.all([this.bridged.settled(), this.bare.settled()]);
  }

  /** Removes namespaces made ahead (their veths go with them). */
  async discard(entries: ReadyNetns[]): Promise<void> {
    const { driver } = this.o;
    for (const e of entries) await driver.netns.remove(e.name).catch(() => {});
    await driver.releaseVeths(entries.filter((e) => e.hostVeth).map((e) => ({ hostVeth: e.hostVeth, networkId: e.networkId, ipv4: e.ipv4, ipv6: '' })));
  }

  /**
   * One namespace made ahead, on the default bridge or with only loopback. None while the controller
   * is not running, or when the default bridge has IPv6 (left to the ordinary path) or no free address.
   */
  #make(onBridge: boolean): { entry: ReadyNetns; done: Promise<void> } | undefined {
    const { table, driver } = this.o;
    if (!this.o.live()) return undefined;
    const name = `${READY_PREFIX}${randomHex(8)}`;
    const entry: ReadyNetns = { name, networkId: '', hostVeth: '', ipv4: '', ipv4PrefixLen: 0, mac: '', ready: false };
    let plan: PlumbPlan = { loopbackUp: true, add: [] };
    if (onBridge) {
      const net = table.byName('bridge');
      if (!net || net.driver !== 'bridge' || net.enableIPv6 || net.internal) return undefined;
      let addr;
      try {
        addr = assignAddresses(net, {}, this.o.usedAddresses(net, 4), this.o.usedAddresses(net, 6));
      } catch {
        return undefined; // full: containers get the error from the ordinary path
      }
      Object.assign(entry, { networkId: net.id, hostVeth: driver.newVethName(), ipv4: addr.ipv4, ipv4PrefixLen: addr.ipv4PrefixLen, mac: macForIPv4(parseAddress(addr.ipv4)!) });
      const ep = { ifName: 'eth0', hostVeth: entry.hostVeth, bridge: net.bridgeName, mac: entry.mac, mtu: bridgeSettings(net).mtu, ipv4: { address: entry.ipv4, prefixLen: entry.ipv4PrefixLen } };
      plan = { loopbackUp: true, add: [ep], routes: { ifName: 'eth0', gateway4: net.gateway } };
    }
    return { entry, done: driver.createAhead(name, plan) };
  }
}
