/**
 * The swarm's objects in memory, written through to SQLite on every change. One counter versions
 * every object (like the raft index swarmkit uses), so a client's `version` names one exact state.
 * In a cluster the maps are also a cache of etcd: local changes go out through the sink, changes
 * from other nodes come in through `applyRemote*` (which never write back). A task is two documents
 * there: what the leader decides (`tasks/<id>`) and what its node observes (`taskstatus/<id>`), each
 * written only by its owner, so neither overwrites the other's news.
 */
import type { SwarmRecords } from '../../state/swarm-records.js';
import { invalidArgument } from '../../lib/errors.js';
import type { ClusterRecord, NodeRecord, ServiceRecord, TaskRecord } from './swarm-model.js';
import { UnreadableRows } from './swarm-record-repair.js';
import type { NamedKind } from './swarm-names.js';

/** The name an API call's write takes (a creation) or frees (a removal): unique per kind cluster-wide (swarm-names.ts). */
export interface NameChange {
  takes?: string;
  frees?: string;
}

/** Where a cluster member's local changes go (etcd). */
export interface StoreSink {
  put(key: string, doc: unknown): void;
  del(key: string): void;
  /**
   * Writes now, compared with the revision the cache holds `key` at: rejects with dockerd's "update
   * out of sequence" when another change got to etcd first, and with its name conflict when a
   * creation's name is taken. `doc` undefined: a removal (no comparison).
   */
  commit(key: string, doc: unknown | undefined, name?: NameChange): Promise<void>;
  /** Resolves once changes reach etcd (after a restart: once etcd answered), or rejects with a 503. */
  linked(): Promise<void>;
  /** Whether etcd holds a name the cache says `holders` hold (see SwarmStore.nameHeld). */
  nameHeld(kind: NamedKind, name: string, holders: string[]): Promise<boolean>;
  /** Resolves once the cache holds etcd's state (after a restart or an unlock), or rejects as dockerd does without a leader. */
  current(): Promise<void>;
  /** This node's id. */
  self(): string;
  /** Whether this node decides (writes tasks' desired states). */
  leading(): boolean;
}

/**
 * Where a task's status lives in etcd: under its node (`taskstatus/<node>/<task>`, `-` while it has
 * none), so that etcd can let each node write its own tasks' status only. Clusters from before keep
 * `taskstatus/<task>`: still read, deleted with the task.
 */
export const statusKey = (t: { id: string; nodeId: string }) => `taskstatus/${t.nodeId || '-'}/${t.id}`;
const statusKeys = (t: { id: string; nodeId: string }) => [...new Set([statusKey(t), `taskstatus/-/${t.id}`, `taskstatus/${t.id}`])];

/** The fields of a task its node reports; the rest is the leader's. */
const STATUS_FIELDS = ['status', 'runningSince', 'containerGone'] as const;
type TaskStatusField = (typeof STATUS_FIELDS)[number];
export type TaskStatusDoc = Pick<TaskRecord, (typeof STATUS_FIELDS)[number]>;

export function splitTask(t: TaskRecord): { main: Omit<TaskRecord, (typeof STATUS_FIELDS)[number]>; status: TaskStatusDoc } {
  const { status, runningSince, containerGone, ...main } = t;
  return { main, status: { status, runningSince, containerGone } };
}

/** The cluster document shared through etcd: everything but this node's own view. */
export function sharedCluster(c: ClusterRecord): Omit<ClusterRecord, 'node' | 'local' | 'nodeCache'> {
  const { node: _node, local: _local, nodeCache: _cache, ...shared } = c;
  return shared;
}

export class SwarmStore {
  cluster: ClusterRecord | undefined;
  readonly services = new Map<string, ServiceRecord>();
  readonly tasks = new Map<string, TaskRecord>();
  /** Every node of the cluster (this one included). */
  readonly nodes = new Map<string, NodeRecord>();
  /** Nodes whose heartbeat is current. */
  readonly alive = new Set<string>();
  /** Until then (epoch ms) a node without heartbeat is not yet taken for down (a new leader's grace). */
  graceUntil = 0;
  readonly #byContainer = new Map<string, string>();
  /** The JSON last written or received per etcd key, so only real changes go out. */
  readonly #seen = new Map<string, string>();
  /** Task status documents that arrived before their task. */
  readonly #earlyStatus = new Map<string, TaskStatusDoc>();
  #sink: StoreSink | undefined;
  #index = 0;
  /** Rows load() left out as damaged (swarm-record-repair.ts); secrets' and configs' too. */
  readonly unreadable = new UnreadableRows();

  constructor(readonly records: SwarmRecords) {}

  /** Sends local changes to the cluster from now on (undefined: a swarm of one again). */
  attach(sink: StoreSink | undefined): void {
    this.#sink = sink;
    this.#seen.clear();
  }

  get clustered(): boolean {
    return this.#sink !== undefined;
  }

  /** This node's id, in or out of a cluster. */
  get selfId(): string {
    return this.cluster?.node.id ?? '';
  }

  /** Whether the node may get new tasks: it exists and its heartbeat is current (or in grace). */
  nodeUp(id: string): boolean {
    if (!this.nodes.has(id)) return false;
    if (!this.#sink) return true;
    return this.alive.has(id) || Date.now() < this.graceUntil;
  }

  #out(key: string, doc: unknown): void {
    const json = JSON.stringify(doc);
    if (this.#seen.get(key) === json) return;
    this.#seen.set(key, json);
    this.#sink!.put(key, doc);
  }

  #gone(key: string): void {
    this.#seen.delete(key);
    this.#sink!.del(key);
  }

  /** Raises the version counter past a version another node gave out. */
  bump(version: number): void {
    if (version > this.#index) this.#index = version;
  }

  load(): void {
    this.unreadable.clear();
    this.cluster = this.unreadable.readCluster(this.records.clusterRow());
    this.services.clear();
    this.tasks.clear();
    this.#byContainer.clear();
    for (const r of this.records.services()) {
      const s = this.unreadable.read('service', r);
      if (s) this.services.set(r.id, s);
    }
    for (const r of this.records.tasks()) {
      const t = this.unreadable.read('task', r);
      if (!t) continue;
      this.tasks.set(t.id, t);
      if (t.status.containerId) this.#byContainer.set(t.status.containerId, t.id);
    }
    const versions = [this.cluster?.version ?? 0, this.cluster?.node.version ?? 0, ...[...this.services.values()].map((s) => s.version), ...[...this.tasks.values()].map((t) => t.version)];
    this.#index = Math.max(0, ...versions);
    this.nodes.clear();
    if (this.cluster) for (const n of [this.cluster.node, ...(this.cluster.nodeCache ?? [])]) if (!this.nodes.has(n.id)) this.nodes.set(n.id, n);
    if (this.cluster) this.cluster.node = this.nodes.get(this.cluster.node.id)!;
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

  /** Writes the cluster (and the node cache) locally, and the shared part to the cluster. */
  saveCluster(remote = false): void {
    const c = this.cluster;
    if (!c) return;
    c.nodeCache = [...this.nodes.values()].filter((n) => n.id !== c.node.id);
    this.records.saveCluster(c);
    if (this.#sink && !remote) this.#out('cluster', sharedCluster(c));
  }

  saveNode(n: NodeRecord, remote = false): void {
    const existing = this.nodes.get(n.id);
    const node = existing && existing !== n ? Object.assign(existing, n) : n;
    this.nodes.set(n.id, node);
    if (this.cluster?.node.id === n.id) this.cluster.node = node;
    this.saveCluster(true);
    if (this.#sink && !remote) this.#out(`nodes/${n.id}`, node);
  }

  deleteNode(id: string, remote = false): void {
    this.nodes.delete(id);
    this.saveCluster(true);
    if (this.#sink && !remote) this.#gone(`nodes/${id}`);
  }

  saveService(s: ServiceRecord, remote = false): void {
    this.records.saveService(s.id, s.spec.Name!, Date.parse(s.createdAt), s);
    this.services.set(s.id, s);
    if (this.#sink && !remote) this.#out(`services/${s.id}`, s);
  }

  deleteService(id: string, remote = false): void {
    this.records.deleteService(id);
    this.services.delete(id);
    if (this.#sink && !remote) this.#gone(`services/${id}`);
  }

  saveTask(t: TaskRecord, remote = false): void {
    this.records.saveTask(t.id, t.serviceId, Date.parse(t.createdAt), t);
    this.tasks.set(t.id, t);
    if (t.status.containerId) this.#byContainer.set(t.status.containerId, t.id);
    const sink = this.#sink;
    if (!sink || remote) return;
    const { main, status } = splitTask(t);
    const mine = t.nodeId === sink.self();
    if (sink.leading()) this.#out(`tasks/${t.id}`, main);
    if (mine || (sink.leading() && (!t.nodeId || !this.nodeUp(t.nodeId) || t.status.state === 'assigned' || t.status.state === 'pending'))) {
      const key = statusKey(t);
      this.#out(key, status);
      // The leader clears what an assigned task's status was kept as before (no node yet, or the old layout).
      if (sink.leading()) for (const k of statusKeys(t)) if (k !== key && this.#seen.has(k)) this.#gone(k);
    }
  }

  deleteTask(id: string, remote = false): void {
    const t = this.tasks.get(id);
    this.records.deleteTask(id);
    this.tasks.delete(id);
    if (t?.status.containerId) this.#byContainer.delete(t.status.containerId);
    if (this.#sink && !remote) {
      this.#gone(`tasks/${id}`);
      const key = t ? statusKey(t) : `taskstatus/-/${id}`;
      this.#gone(key);
      for (const k of statusKeys({ id, nodeId: t?.nodeId ?? '' })) if (k !== key && this.#seen.has(k)) this.#gone(k);
    }
  }

  /** Resolves once this node's changes reach the cluster (at once outside one): an API call that changes a record waits for it first. */
  async linked(): Promise<void> {
    await this.#sink?.linked();
  }

  /**
   * Whether a name this node's cache says `holders` hold is held in etcd too: by its name key, or by
   * one of those records (one an older berthd made has no key). The cache may be behind a removal
   * another manager just made: the name is free again there, as dockerd's leader would say. Outside
   * a cluster the cache is all there is.
   */
  async nameHeld(kind: NamedKind, name: string, holders: string[]): Promise<boolean> {
    return this.#sink ? this.#sink.nameHeld(kind, name, holders) : true;
  }

  /**
   * Resolves once the cache holds what etcd holds (at once outside a cluster): a manager's API read
   * waits for it first, so that after a restart it never answers from the records saved before.
   */
  async current(): Promise<void> {
    await this.#sink?.current();
  }

  /**
   * An API call's change of a record it read (`current`; undefined: a new one): in a cluster written
   * to etcd first, compared with the revision the cache holds it at (another change that got there
   * first fails the call with dockerd's "update out of sequence"), then kept here in place of `current`.
   */
  async commitService(next: ServiceRecord, current?: ServiceRecord): Promise<ServiceRecord> {
    await this.#commit(`services/${next.id}`, next, current ? {} : { takes: next.spec.Name });
    const s = current ? replaceInPlace(current, next) : next;
    this.saveService(s, true);
    return s;
  }

  /** A service removed (in etcd first, its name freed with it, in a cluster), then here. */
  async commitServiceRemoval(s: ServiceRecord): Promise<void> {
    await this.#commit(`services/${s.id}`, undefined, { frees: s.spec.Name });
    this.deleteService(s.id, true);
  }

  async commitNode(next: NodeRecord, current: NodeRecord): Promise<NodeRecord> {
    await this.#commit(`nodes/${next.id}`, next);
    const n = replaceInPlace(current, next);
    this.saveNode(n, true);
    return n;
  }

  /** The cluster's spec and join tokens changed (`swarm update`), as commitService. */
  async commitCluster(next: ClusterRecord): Promise<void> {
    const c = this.cluster;
    if (!c) return;
    await this.#commit('cluster', sharedCluster(next));
    replaceInPlace(c, next);
    this.saveCluster(true);
  }

  async #commit(key: string, doc: unknown | undefined, name?: NameChange): Promise<void> {
    if (!this.#sink) return;
    await this.#sink.commit(key, doc, name);
    if (doc === undefined) this.#seen.delete(key);
    else this.#seen.set(key, JSON.stringify(doc));
  }

  /** A task document from another node: kept in place (callers hold references), status kept. */
  applyRemoteTask(main: Omit<TaskRecord, TaskStatusField>, json: string): TaskRecord {
    this.#seen.set(`tasks/${main.id}`, json);
    this.bump(main.version);
    const existing = this.tasks.get(main.id);
    if (existing) {
      Object.assign(existing, main);
      this.saveTask(existing, true);
      return existing;
    }
    const early = this.#earlyStatus.get(main.id);
    this.#earlyStatus.delete(main.id);
    const now = new Date().toISOString();
    const t = { ...main, ...(early ?? { status: { timestamp: now, state: 'new', message: 'created', err: '', containerId: '', pid: 0 } }) } as TaskRecord;
    this.saveTask(t, true);
    return t;
  }

  /** A task status from another node, etcd's `key` (the caller keeps this node's own tasks out). */
  applyRemoteStatus(key: string, id: string, doc: TaskStatusDoc, json: string): TaskRecord | undefined {
    this.#seen.set(key, json);
    const t = this.tasks.get(id);
    if (!t) {
      this.#earlyStatus.set(id, doc);
      return undefined;
    }
    if (t.status.containerId && t.status.containerId !== doc.status.containerId) this.#byContainer.delete(t.status.containerId);
    t.status = doc.status;
    t.runningSince = doc.runningSince;
    t.containerGone = doc.containerGone;
    this.saveTask(t, true);
    return t;
  }

  /** Remembers what a key holds in the cluster (snapshot or watch), so it is not written back. */
  seen(key: string, json: string): void {
    this.#seen.set(key, json);
  }

  transaction<T>(fn: () => T): T {
    return this.records.transaction(fn);
  }

  /** Forgets everything (leaving the swarm). */
  clear(): void {
    this.records.clear();
    this.unreadable.clear();
    this.cluster = undefined;
    this.services.clear();
    this.tasks.clear();
    this.nodes.clear();
    this.alive.clear();
    this.#earlyStatus.clear();
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

/** `target` becomes `source` (its own fields only), staying the object callers hold. */
export function replaceInPlace<T extends object>(target: T, source: T): T {
  if (target === source) return target;
  for (const k of Object.keys(target)) if (!(k in source)) delete (target as Record<string, unknown>)[k];
  return Object.assign(target, source);
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
