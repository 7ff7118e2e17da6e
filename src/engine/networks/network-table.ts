/**
 * The network controller's records: networks, each container's endpoints (its address allocations)
 * and published ports, kept in memory and written through to SQLite, so an allocation is durable once
 * attach returns. Loading repairs what it can and skips what it cannot (network-repair.ts).
 */
import { conflict, errorMessage } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { parseAddress } from '../../network/cidr.js';
import type { NetworkRecords, StoredPort } from '../../state/network-records.js';
import type { NetworkRecord } from './network-record.js';
import { repairStoredEndpoint, repairStoredNetwork } from './network-repair.js';
import type { Endpoint } from './network-types.js';
import type { DnsRecord } from '../../network/aardvark.js';

export class NetworkTable {
  readonly networks = new Map<string, NetworkRecord>();
  /** containerId -> networkId -> endpoint */
  readonly endpoints = new Map<string, Map<string, Endpoint>>();
  /** containerId -> published ports */
  readonly ports = new Map<string, StoredPort[]>();
  /** networkId -> names answered besides the local endpoints' (a swarm's VIPs and other nodes' tasks). */
  readonly extraDns = new Map<string, DnsRecord[]>();
  /** networkId -> addresses other swarm nodes' containers hold, never given out here. */
  readonly reserved = new Map<string, string[]>();
  /** Ids and names of stored networks that could not be read: never handed out again. */
  readonly #unreadable = new Set<string>();
  readonly #records: NetworkRecords;

  constructor(records: NetworkRecords) {
    this.#records = records;
  }

  load(): void {
    for (const row of this.#records.loadNetworks()) {
      const n = repairStoredNetwork(row);
      if (n) this.networks.set(n.id, n);
      else this.#unreadable.add(row.id).add(row.name);
    }
    const broken: { containerId: string; networkId: string }[] = [];
    for (const s of this.#records.loadEndpoints()) {
      if (!this.networks.has(s.networkId)) continue; // on a network that could not be read
      const e = repairStoredEndpoint(s);
      if (e) this.#remember(e);
      else broken.push(s);
    }
    if (broken.length) {
      log.warn('releasing stored network endpoints that cannot be read', { endpoints: broken });
      this.#records.transaction(() => broken.forEach((b) => this.#records.deleteEndpoint(b.containerId, b.networkId)));
    }
    for (const p of this.#records.loadPorts()) this.#portsOf(p.containerId).push(p);
  }

  /** Whether a stored network that could not be read holds this id or name. */
  isUnreadable(idOrName: string): boolean {
    return this.#unreadable.has(idOrName);
  }

  byName(name: string): NetworkRecord | undefined {
    for (const n of this.networks.values()) if (n.name === name) return n;
    return undefined;
  }

  saveNetwork(n: NetworkRecord): void {
    this.#records.saveNetwork({ id: n.id, name: n.name, createdAt: Date.parse(n.created), data: n });
    this.networks.set(n.id, n);
  }

  deleteNetwork(id: string): void {
    this.#records.deleteNetwork(id);
    this.networks.delete(id);
  }

  hasEndpoints(networkId: string): boolean {
    for (const eps of this.endpoints.values()) if (eps.has(networkId)) return true;
    return false;
  }

  endpointsOf(containerId: string): Endpoint[] {
    return [...(this.endpoints.get(containerId)?.values() ?? [])];
  }

  /** A container's endpoints in the order it joined them. */
  orderedEndpointsOf(containerId: string): Endpoint[] {
    return this.endpointsOf(containerId).sort((a, b) => a.order - b.order);
  }

  allPorts(): StoredPort[] {
    return [...this.ports.values()].flat();
  }

  /** Addresses of a network that are taken: endpoints, aux addresses and `held` (draining, made ahead). */
  usedAddresses(net: NetworkRecord, family: 4 | 6, held: readonly string[]): Set<bigint> {
    const used = new Set<bigint>();
    for (const eps of this.endpoints.values()) {
      const e = eps.get(net.id);
      const ip = e && (family === 4 ? e.ipv4 : e.ipv6);
      if (ip) used.add(parseAddress(ip)!.value);
    }
    for (const a of [...Object.values(net.auxAddresses ?? {}), ...held]) {
      const parsed = parseAddress(a);
      if (parsed?.family === family) used.add(parsed.value);
    }
    return used;
  }

  /** Stores new endpoints and ports in one transaction; a concurrent double allocation is a conflict. */
  commit(eps: Endpoint[], ports: StoredPort[]): void {
    try {
      this.#records.transaction(() => {
        for (const e of eps) this.#saveEndpoint(e);
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

  /** Writes endpoints again after a change (a rename). */
  saveEndpoints(eps: Endpoint[]): void {
    this.#records.transaction(() => eps.forEach((e) => this.#saveEndpoint(e)));
  }

  /** Drops some endpoints of a container, and with `ports` all its ports. */
  deleteEndpoints(containerId: string, eps: Endpoint[], ports: boolean): void {
    this.#records.transaction(() => {
      for (const e of eps) this.#records.deleteEndpoint(containerId, e.networkId);
      if (ports) this.#records.deletePorts(containerId);
    });
    const m = this.endpoints.get(containerId);
    for (const e of eps) m?.delete(e.networkId);
    if (m && m.size === 0) this.endpoints.delete(containerId);
    if (ports) this.ports.delete(containerId);
  }

  /** Drops all of a container's endpoints and ports. */
  forget(containerId: string): void {
    this.deleteEndpoints(containerId, this.endpointsOf(containerId), true);
  }

  retargetPorts(containerId: string, containerIp: string): void {
    this.#records.transaction(() => this.#records.retargetPorts(containerId, containerIp));
    for (const p of this.ports.get(containerId) ?? []) p.containerIp = containerIp;
  }

  #saveEndpoint(e: Endpoint): void {
    const { containerId, networkId, ipv4, ipv6, createdAt, ...data } = e;
    this.#records.saveEndpoint({ containerId, networkId, ipv4, ipv6, createdAt, data });
  }

  #remember(e: Endpoint): void {
    let m = this.endpoints.get(e.containerId);
    if (!m) this.endpoints.set(e.containerId, (m = new Map()));
    m.set(e.networkId, e);
  }

  #portsOf(containerId: string): StoredPort[] {
    let p = this.ports.get(containerId);
    if (!p) this.ports.set(containerId, (p = []));
    return p;
  }
}
