/**
 * Network rows: the networks themselves, one endpoint per (container, network) holding the container's
 * IP allocation, and the published host ports. The engine's network controller keeps everything in memory and writes
 * through, so an allocation is durable (and survives a daemon restart) once attach returns.
 * Unique indexes make a double allocation of an IP or a host port fail inside the transaction.
 */
import type { Db } from './db.js';

export interface StoredNetwork {
  id: string;
  name: string;
  createdAt: number;
  /** The record as stored; undefined when its JSON does not parse (a row written by hand or half-written). */
  data: unknown;
}

export interface StoredEndpoint {
  containerId: string;
  networkId: string;
  ipv4: string;
  ipv6: string;
  createdAt: number;
  data: unknown;
}

export interface StoredPort {
  protocol: string;
  hostIp: string;
  hostPort: number;
  containerId: string;
  containerIp: string;
  containerPort: number;
}

interface NetworkRow { id: string; name: string; data: string; created_at: number }
interface EndpointRow { container_id: string; network_id: string; ipv4: string; ipv6: string; data: string; created_at: number }
interface PortRow { protocol: string; host_ip: string; host_port: number; container_id: string; container_ip: string; container_port: number }

export class NetworkRecords {
  readonly #db: Db;
  readonly #allNetworks;
  readonly #putNetwork;
  readonly #delNetwork;
  readonly #allEndpoints;
  readonly #putEndpoint;
  readonly #delEndpoint;
  readonly #allPorts;
  readonly #putPort;
  readonly #delPorts;
  readonly #retargetPorts;

  constructor(db: Db) {
    this.#db = db;
    this.#allNetworks = db.prepare<[], NetworkRow>('SELECT * FROM networks ORDER BY created_at, name');
    this.#putNetwork = db.prepare(
      'INSERT INTO networks(id, name, data, created_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name, data = excluded.data',
    );
    this.#delNetwork = db.prepare('DELETE FROM networks WHERE id = ?');
    this.#allEndpoints = db.prepare<[], EndpointRow>('SELECT * FROM network_endpoints ORDER BY created_at');
    this.#putEndpoint = db.prepare(
      `INSERT INTO network_endpoints(container_id, network_id, ipv4, ipv6, data, created_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT(container_id, network_id) DO UPDATE SET ipv4 = excluded.ipv4, ipv6 = excluded.ipv6, data = excluded.data`,
    );
    this.#delEndpoint = db.prepare('DELETE FROM network_endpoints WHERE container_id = ? AND network_id = ?');
    this.#allPorts = db.prepare<[], PortRow>('SELECT * FROM network_ports');
    this.#putPort = db.prepare(
      'INSERT INTO network_ports(protocol, host_ip, host_port, container_id, container_ip, container_port) VALUES (?, ?, ?, ?, ?, ?)',
    );
    this.#delPorts = db.prepare('DELETE FROM network_ports WHERE container_id = ?');
    this.#retargetPorts = db.prepare('UPDATE network_ports SET container_ip = ? WHERE container_id = ?');
  }

  loadNetworks(): StoredNetwork[] {
    return this.#allNetworks.all().map((r) => ({ id: r.id, name: r.name, createdAt: r.created_at, data: parseJson(r.data) }));
  }

  /** Inserts or replaces; a name used by another id fails with SQLITE_CONSTRAINT_UNIQUE. */
  saveNetwork(n: StoredNetwork): void {
    this.#putNetwork.run(n.id, n.name, JSON.stringify(n.data), n.createdAt);
  }

  /** Fails with SQLITE_CONSTRAINT_FOREIGNKEY while endpoints refer to it. */
  deleteNetwork(id: string): void {
    this.#delNetwork.run(id);
  }

  loadEndpoints(): StoredEndpoint[] {
    return this.#allEndpoints.all().map((r) => ({
      containerId: r.container_id,
      networkId: r.network_id,
      ipv4: r.ipv4,
      ipv6: r.ipv6,
      createdAt: r.created_at,
      data: parseJson(r.data),
    }));
  }

  /** Inserts or replaces; an address already held on the same network fails with SQLITE_CONSTRAINT_UNIQUE. */
  saveEndpoint(e: StoredEndpoint): void {
    this.#putEndpoint.run(e.containerId, e.networkId, e.ipv4, e.ipv6, JSON.stringify(e.data), e.createdAt);
  }

  deleteEndpoint(containerId: string, networkId: string): void {
    this.#delEndpoint.run(containerId, networkId);
  }

  loadPorts(): StoredPort[] {
    return this.#allPorts.all().map((r) => ({
      protocol: r.protocol,
      hostIp: r.host_ip,
      hostPort: r.host_port,
      containerId: r.container_id,
      containerIp: r.container_ip,
      containerPort: r.container_port,
    }));
  }

  /** A (protocol, host ip, host port) already taken fails with SQLITE_CONSTRAINT_PRIMARYKEY. */
  insertPort(p: StoredPort): void {
    this.#putPort.run(p.protocol, p.hostIp, p.hostPort, p.containerId, p.containerIp, p.containerPort);
  }

  deletePorts(containerId: string): void {
    this.#delPorts.run(containerId);
  }

  retargetPorts(containerId: string, containerIp: string): void {
    this.#retargetPorts.run(containerIp, containerId);
  }

  transaction<T>(fn: () => T): T {
    return this.#db.transaction(fn)();
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
