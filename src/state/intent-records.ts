/**
 * Intent rows: an operation that changes a container's state for a moment (commit's pause, an exec's
 * set-up, a restart) is written here before it acts and deleted once it is over, so a daemon killed
 * in between finds on restart what it must finish or undo.
 */
import type { Db } from './db.js';

export interface StoredIntent {
  id: string;
  containerId: string;
  kind: string;
  data: Record<string, unknown>;
  createdAt: number;
}

export class IntentRecords {
  readonly #all;
  readonly #put;
  readonly #del;

  constructor(db: Db) {
    this.#all = db.prepare<[], { id: string; container_id: string; kind: string; data: string; created_at: number }>('SELECT * FROM container_intents ORDER BY created_at');
    this.#put = db.prepare('INSERT INTO container_intents(id, container_id, kind, data, created_at) VALUES (?, ?, ?, ?, ?)');
    this.#del = db.prepare('DELETE FROM container_intents WHERE id = ?');
  }

  /** Every intent, oldest first; a row whose data cannot be read counts as having none. */
  all(): StoredIntent[] {
    return this.#all.all().map((r) => ({ id: r.id, containerId: r.container_id, kind: r.kind, data: parseData(r.data), createdAt: r.created_at }));
  }

  put(i: StoredIntent): void {
    this.#put.run(i.id, i.containerId, i.kind, JSON.stringify(i.data), i.createdAt);
  }

  delete(id: string): void {
    this.#del.run(id);
  }
}

function parseData(s: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(s);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
