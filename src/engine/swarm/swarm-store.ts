/**
 * The swarm's objects in memory, written through to SQLite on every change. One counter versions
 * every object (like the raft index swarmkit uses), so a client's `version` names one exact state.
 */
import type { SwarmRecords } from '../../state/swarm-records.js';
import { invalidArgument } from '../../lib/errors.js';
import type { ClusterRecord, ServiceRecord, TaskRecord } from './swarm-model.js';

export class SwarmStore {
  cluster: ClusterRecord | undefined;
  readonly services = new Map<string, ServiceRecord>();
  readonly tasks = new Map<string, TaskRecord>();
  readonly #byContainer = new Map<string, string>();
  #index = 0;

  constructor(readonly records: SwarmRecords) {}

  load(): void {
    this.cluster = this.records.cluster() as ClusterRecord | undefined;
    this.services.clear();
    this.tasks.clear();
    this.#byContainer.clear();
    for (const r of this.records.services()) this.services.set(r.id, r.data as ServiceRecord);
    for (const r of this.records.tasks()) {
      const t = r.data as TaskRecord;
      this.tasks.set(t.id, t);
      if (t.status.containerId) this.#byContainer.set(t.status.containerId, t.id);
    }
    const versions = [this.cluster?.version ?? 0, this.cluster?.node.version ?? 0, ...[...this.services.values()].map((s) => s.version), ...[...this.tasks.values()].map((t) => t.version)];
    this.#index = Math.max(0, ...versions);
  }

  /** A fresh version for a changed object, with its update time. */
  touch<T extends { version: number; updatedAt: string }>(o: T): T {
    o.version = ++this.#index;
    o.updatedAt = new Date().toISOString();
    return o;
  }

  nextVersion(): number {
    return ++this.#index;
  }

  saveCluster(): void {
    if (this.cluster) this.records.saveCluster(this.cluster);
  }

  saveService(s: ServiceRecord): void {
    this.records.saveService(s.id, s.spec.Name!, Date.parse(s.createdAt), s);
    this.services.set(s.id, s);
  }

  deleteService(id: string): void {
    this.records.deleteService(id);
    this.services.delete(id);
  }

  saveTask(t: TaskRecord): void {
    this.records.saveTask(t.id, t.serviceId, Date.parse(t.createdAt), t);
    this.tasks.set(t.id, t);
    if (t.status.containerId) this.#byContainer.set(t.status.containerId, t.id);
  }

  deleteTask(id: string): void {
    const t = this.tasks.get(id);
    this.records.deleteTask(id);
    this.tasks.delete(id);
    if (t?.status.containerId) this.#byContainer.delete(t.status.containerId);
  }

  transaction<T>(fn: () => T): T {
    return this.records.transaction(fn);
  }

  /** Forgets everything (leaving the swarm). */
  clear(): void {
    this.records.clear();
    this.cluster = undefined;
    this.services.clear();
    this.tasks.clear();
    this.#byContainer.clear();
  }

  taskByContainer(containerId: string): TaskRecord | undefined {
    const id = this.#byContainer.get(containerId);
    return id ? this.tasks.get(id) : undefined;
  }

  tasksOf(serviceId: string): TaskRecord[] {
    return [...this.tasks.values()].filter((t) => t.serviceId === serviceId);
  }

  /** By full id, then name, then unique id prefix, as dockerd resolves services. */
  findService(idOrName: string): ServiceRecord | undefined {
    const exact = this.services.get(idOrName);
    if (exact) return exact;
    for (const s of this.services.values()) if (s.spec.Name === idOrName) return s;
    return uniquePrefix(this.services, idOrName, 'service');
  }

  findTask(id: string): TaskRecord | undefined {
    return this.tasks.get(id) ?? uniquePrefix(this.tasks, id, 'task');
  }
}

function uniquePrefix<T>(map: Map<string, T>, prefix: string, what: string): T | undefined {
  if (!prefix) return undefined;
  let found: T | undefined;
  for (const [id, v] of map) {
    if (!id.startsWith(prefix)) continue;
    if (found) throw invalidArgument(`${what} ${prefix} is ambiguous (multiple ${what}s found with provided prefix)`);
    found = v;
  }
  return found;
}
