/** The classic builder's cache: which image a build step (by its key) produced. */
import type { Db } from './db.js';

export interface BuildCacheRecord {
  key: string;
  imageId: string;
  createdAt: number;
  lastUsed: number;
}

interface Row {
  key: string;
  image_id: string;
  created_at: number;
  last_used: number;
}

const toRecord = (r: Row): BuildCacheRecord => ({ key: r.key, imageId: r.image_id, createdAt: r.created_at, lastUsed: r.last_used });

export class BuildCacheRecords {
  readonly #get;
  readonly #put;
  readonly #touch;
  readonly #all;
  readonly #delete;

  constructor(db: Db) {
    this.#get = db.prepare<[string], Row>('SELECT * FROM build_cache WHERE key = ?');
    this.#put = db.prepare('INSERT OR REPLACE INTO build_cache (key, image_id, created_at, last_used) VALUES (?, ?, ?, ?)');
    this.#touch = db.prepare('UPDATE build_cache SET last_used = ? WHERE key = ?');
    this.#all = db.prepare<[], Row>('SELECT * FROM build_cache ORDER BY created_at DESC');
    this.#delete = db.prepare('DELETE FROM build_cache WHERE key = ?');
  }

  get(key: string): BuildCacheRecord | undefined {
    const r = this.#get.get(key);
    return r && toRecord(r);
  }

  put(key: string, imageId: string): void {
    const now = Date.now();
    this.#put.run(key, imageId, now, now);
  }

  touch(key: string): void {
    this.#touch.run(Date.now(), key);
  }

  /** Newest first. */
  all(): BuildCacheRecord[] {
    return this.#all.all().map(toRecord);
  }

  delete(key: string): void {
    this.#delete.run(key);
  }
}
