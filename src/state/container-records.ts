/**
 * Container rows. The engine keeps every container in memory and writes the whole record on each
 * change, so listing never touches the database and a change is durable once acknowledged.
 */
import type { Db } from './db.js';

export interface StoredContainer {
  id: string;
  name: string;
  createdAt: number;
  data: unknown;
  /** Set when the stored JSON could not be parsed (its message); data is then undefined. */
  unreadable?: string;
}

export class ContainerRecords {
  readonly #all;
  readonly #put;
  readonly #del;
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
    this.#all = db.prepare<[], { id: string; name: string; data: string; created_at: number }>('SELECT * FROM containers ORDER BY created_at');
    this.#put = db.prepare('INSERT INTO containers(id, name, data, created_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name, data = excluded.data');
    this.#del = db.prepare('DELETE FROM containers WHERE id = ?');
  }

  loadAll(): StoredContainer[] {
    return this.#all.all().map((r) => {
      try {
        return { id: r.id, name: r.name, createdAt: r.created_at, data: JSON.parse(r.data) as unknown };
      } catch (err) {
        // One damaged row must not keep the daemon from starting: the engine repairs what it can.
        return { id: r.id, name: r.name, createdAt: r.created_at, data: undefined, unreadable: (err as Error).message };
      }
    });
  }

  /** Inserts or replaces; a name already used by another id fails with SQLITE_CONSTRAINT_UNIQUE. */
  save(c: StoredContainer): void {
    this.#put.run(c.id, c.name, JSON.stringify(c.data), c.createdAt);
  }

  delete(id: string): void {
    this.#del.run(id);
  }

  transaction<T>(fn: () => T): T {
    return this.#db.transaction(fn)();
  }
}
