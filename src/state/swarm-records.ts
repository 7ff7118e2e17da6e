/**
 * Swarm rows: the cluster (one row, holding this node too), services and tasks. The swarm engine keeps
 * everything in memory and writes each changed object through, so what an API call acknowledged is
 * on disk; objects are opaque JSON documents here.
 */
import type { Db } from './db.js';

export interface StoredSwarmObject {
  id: string;
  data: unknown;
  /** The row's name column (services, secrets, configs). */
  name?: string;
  /** Set when the row's JSON does not parse (its message; data is then undefined): the engine decides. */
  unreadable?: string;
}

/** A row's document, or why it does not parse: one damaged row must not stop the swarm's load. */
export function readDocument(id: string, text: string, name?: string): StoredSwarmObject {
  const named = name === undefined ? {} : { name };
  try {
    return { id, ...named, data: JSON.parse(text) as unknown };
  } catch (err) {
    return { id, ...named, data: undefined, unreadable: (err as Error).message };
  }
}

interface Row {
  id: string;
  name?: string;
  data: string;
}

export class SwarmRecords {
  readonly #db: Db;
  readonly #getCluster;
  readonly #putCluster;
  readonly #allServices;
  readonly #putService;
  readonly #delService;
  readonly #allTasks;
  readonly #putTask;
  readonly #delTask;

  constructor(db: Db) {
    this.#db = db;
    this.#getCluster = db.prepare<[], { data: string }>('SELECT data FROM swarm_cluster WHERE id = 1');
    this.#putCluster = db.prepare('INSERT INTO swarm_cluster(id, data) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET data = excluded.data');
    this.#allServices = db.prepare<[], Row>('SELECT id, name, data FROM swarm_services ORDER BY created_at');
    this.#putService = db.prepare(
      'INSERT INTO swarm_services(id, name, data, created_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name, data = excluded.data',
    );
    this.#delService = db.prepare('DELETE FROM swarm_services WHERE id = ?');
    this.#allTasks = db.prepare<[], Row>('SELECT id, data FROM swarm_tasks ORDER BY created_at');
    this.#putTask = db.prepare(
      'INSERT INTO swarm_tasks(id, service_id, data, created_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET data = excluded.data',
    );
    this.#delTask = db.prepare('DELETE FROM swarm_tasks WHERE id = ?');
  }

  /** The cluster document as stored (its JSON may not parse: the engine decides, swarm-record-repair.ts). */
  clusterRow(): StoredSwarmObject | undefined {
    const row = this.#getCluster.get();
    return row ? readDocument('cluster', row.data) : undefined;
  }

  saveCluster(data: unknown): void {
    this.#putCluster.run(JSON.stringify(data));
  }

  services(): StoredSwarmObject[] {
    return this.#allServices.all().map((r) => readDocument(r.id, r.data, r.name));
  }

  /** Names are not unique here: the facades and, in a cluster, etcd keep them unique (migration 9). */
  saveService(id: string, name: string, createdAt: number, data: unknown): void {
    this.#putService.run(id, name, JSON.stringify(data), createdAt);
  }

  deleteService(id: string): void {
    this.#delService.run(id);
  }

  tasks(): StoredSwarmObject[] {
    return this.#allTasks.all().map((r) => readDocument(r.id, r.data));
  }

  saveTask(id: string, serviceId: string, createdAt: number, data: unknown): void {
    this.#putTask.run(id, serviceId, JSON.stringify(data), createdAt);
  }

  deleteTask(id: string): void {
    this.#delTask.run(id);
  }

  /** Leaving the swarm forgets everything. */
  clear(): void {
    this.transaction(() => {
      this.#db.exec('DELETE FROM swarm_tasks; DELETE FROM swarm_services; DELETE FROM swarm_cluster;');
    });
  }

  transaction<T>(fn: () => T): T {
    return this.#db.transaction(fn)();
  }
}
