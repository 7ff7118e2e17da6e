/**
 * Volume rows: the volume service keeps every volume in memory and writes the record through on
 * each change (create, remove), so a volume acknowledged is a volume kept across a kill -9.
 */
import type { Db } from './db.js';

export interface StoredVolume {
  name: string;
  createdAt: number;
  data: unknown;
  /** Set when the row's JSON does not parse (data is then undefined); the engine repairs the record. */
  unreadable?: string;
}

export class VolumeRecords {
  readonly #all;
  readonly #put;
  readonly #del;

  constructor(db: Db) {
    this.#all = db.prepare<[], { name: string; data: string; created_at: number }>('SELECT * FROM volumes ORDER BY created_at');
    this.#put = db.prepare('INSERT INTO volumes(name, data, created_at) VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET data = excluded.data');
    this.#del = db.prepare('DELETE FROM volumes WHERE name = ?');
  }

  loadAll(): StoredVolume[] {
    return this.#all.all().map((r) => {
      try {
        return { name: r.name, createdAt: r.created_at, data: JSON.parse(r.data) as unknown };
      } catch (err) {
        return { name: r.name, createdAt: r.created_at, data: undefined, unreadable: (err as Error).message };
      }
    });
  }

  save(v: StoredVolume): void {
    this.#put.run(v.name, JSON.stringify(v.data), v.createdAt);
  }

  delete(name: string): void {
    this.#del.run(name);
  }
}
