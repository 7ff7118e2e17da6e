/**
 * Rows of the swarm's secrets and configs (one table each, same shape): opaque JSON documents with a
 * unique name. The swarm engine keeps them in memory and writes each change through.
 */
import type { Db } from './db.js';
import { readDocument, type StoredSwarmObject } from './swarm-records.js';

export type SwarmObjectTable = 'swarm_secrets' | 'swarm_configs';

export class SwarmObjectRecords {
  readonly #all;
  readonly #put;
  readonly #del;
  readonly #clear;

  constructor(db: Db, table: SwarmObjectTable) {
    this.#all = db.prepare<[], { id: string; name: string; data: string }>(`SELECT id, name, data FROM ${table} ORDER BY created_at`);
    this.#put = db.prepare(`INSERT INTO ${table}(id, name, data, created_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name, data = excluded.data`);
    this.#del = db.prepare(`DELETE FROM ${table} WHERE id = ?`);
    this.#clear = db.prepare(`DELETE FROM ${table}`);
  }

  all(): StoredSwarmObject[] {
    return this.#all.all().map((r) => readDocument(r.id, r.data, r.name));
  }

  save(id: string, name: string, createdAt: number, data: unknown): void {
    this.#put.run(id, name, JSON.stringify(data), createdAt);
  }

  delete(id: string): void {
    this.#del.run(id);
  }

  clear(): void {
    this.#clear.run();
  }
}
