/**
 * Every container record in memory, by id and by name, written through to SQLite on each change:
 * lookups by name or id prefix never hit the disk. A revision counter, bumped by every save and
 * removal, lets views derived from the records (the list's JSON) tell what changed.
 */
import { conflict, invalidArgument, notFound } from '../../lib/errors.js';
import type { ContainerRecords, StoredContainer } from '../../state/container-records.js';
import type { ContainerRecord } from './container-model.js';
import { isRunningLike } from './container-model.js';

export class ContainerTable {
  readonly #byId = new Map<string, ContainerRecord>();
  readonly #byName = new Map<string, string>();
  #revision = 0;
  readonly #revisions = new WeakMap<ContainerRecord, number>();

  constructor(readonly records: ContainerRecords) {}

  /** Loads every stored row, each turned into a record by `toRecord` (which repairs what it must). */
  load(toRecord: (row: StoredContainer) => ContainerRecord): void {
    for (const row of this.records.loadAll()) {
      const c = toRecord(row);
      this.#byId.set(c.id, c);
      this.#byName.set(c.name, c.id);
    }
  }

  all(): ContainerRecord[] {
    return [...this.#byId.values()];
  }

  /** By full id only. */
  byId(id: string): ContainerRecord | undefined {
    return this.#byId.get(id);
  }

  has(id: string): boolean {
    return this.#byId.has(id);
  }

  nameTaken(name: string): boolean {
    return this.#byName.has(name);
  }

  /** Refuses a name (without '/') another container holds, with dockerd's text. */
  checkNameFree(name: string): void {
    const holder = this.#byName.get(name);
    if (holder) throw conflict(`Conflict. The container name "/${name}" is already in use by container "${holder}". You have to remove (or rename) that container to be able to reuse that name.`);
  }

  /** By full id, name (with or without '/'), or unique id prefix, as dockerd resolves them. */
  get(idOrName: string): ContainerRecord {
    const c = this.find(idOrName);
    if (!c) throw notFound(`No such container: ${idOrName}`);
    return c;
  }

  find(idOrName: string): ContainerRecord | undefined {
    if (!idOrName) return undefined;
    const exact = this.#byId.get(idOrName);
    if (exact) return exact;
    const name = idOrName.startsWith('/') ? idOrName.slice(1) : idOrName;
    const byName = this.#byName.get(name);
    if (byName) return this.#byId.get(byName);
    if (!/^[a-f0-9]+$/.test(idOrName)) return undefined;
    let found: ContainerRecord | undefined;
    for (const [id, c] of this.#byId) {
      if (id.startsWith(idOrName)) {
        if (found) throw invalidArgument(`multiple IDs found with provided prefix: ${idOrName}`);
        found = c;
      }
    }
    return found;
  }

  /** Changes with every save, creation or removal of any container. */
  get revision(): number {
    return this.#revision;
  }

  /** Changes with every save of this record (0 for a record unchanged since load). */
  revisionOf(c: ContainerRecord): number {
    return this.#revisions.get(c) ?? 0;
  }

  save(c: ContainerRecord): void {
    this.#revisions.set(c, ++this.#revision);
    this.records.save({ id: c.id, name: c.name, createdAt: Date.parse(c.created), data: c });
  }

  /** Stores a new record and indexes it; a name taken meanwhile in the store is the same conflict as in memory. */
  insert(c: ContainerRecord): void {
    try {
      this.save(c);
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') {
        throw conflict(`Conflict. The container name "/${c.name}" is already in use. You have to remove (or rename) that container to be able to reuse that name.`);
      }
      throw err;
    }
    this.#byId.set(c.id, c);
    this.#byName.set(c.name, c.id);
  }

  /** Gives `c` the (validated, free) name `name`; returns the old one. */
  rename(c: ContainerRecord, name: string): string {
    const old = c.name;
    c.name = name;
    this.save(c);
    this.#byName.delete(old);
    this.#byName.set(name, c.id);
    return old;
  }

  /** Deletes the record, stored and in memory. */
  delete(c: ContainerRecord): void {
    this.records.delete(c.id);
    this.#byId.delete(c.id);
    this.#revision++;
    if (this.#byName.get(c.name) === c.id) this.#byName.delete(c.name);
  }

  /** The containers of an image, running and not (image removal and list's Containers count). */
  imageUsage(imageId: string): { running: string[]; stopped: string[] } {
    const running: string[] = [];
    const stopped: string[] = [];
    for (const c of this.#byId.values()) if (c.imageId === imageId) (isRunningLike(c.state) ? running : stopped).push(c.id);
    return { running, stopped };
  }

  counts(): { total: number; running: number; paused: number; stopped: number } {
    let running = 0;
    let paused = 0;
    for (const c of this.#byId.values()) {
      if (c.state.status === 'running' || c.state.status === 'restarting') running++;
      else if (c.state.status === 'paused') paused++;
    }
    return { total: this.#byId.size, running, paused, stopped: this.#byId.size - running - paused };
  }
}
