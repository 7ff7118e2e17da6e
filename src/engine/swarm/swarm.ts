/**
 * Swarm mode, as the API sees it: the facade routes call. Init/join/leave and the link to etcd are
 * SwarmMembership's (swarm-membership.ts, with swarm-sync.ts keeping the store a cache of etcd and
 * swarm-roles.ts leadership and promotion); auto-lock is SwarmLock's; the nodes and services APIs are
 * SwarmNodes' and SwarmServices'; what they share is SwarmCore's. This class starts and stops them,
 * checks requests that need a manager and keeps versions honest.
 *
 * A manager's API reads (and the changes that find their object in the cache first) wait, after a
 * restart or an unlock, until the cache holds etcd's state (`#current`): answered from the records saved
 * before, `node ls` or `service ls` would show the cluster as it was when the node stopped.
 */
import type { HostFacts } from '../system.js';
import type { BlobKind, BlobRecord } from './secrets.js';
import { log } from '../../lib/log.js';
import { withSwarmDefaults, type InitRequest } from './cluster.js';
import { joinToken, tokenCaPart } from './swarm-ids.js';
import { SwarmCore, type SwarmDeps } from './swarm-core.js';
import { SwarmMembership } from './swarm-membership.js';
import { SwarmNodes } from './swarm-nodes.js';
import { SwarmServices, type ServiceCounts } from './swarm-services.js';
import { SwarmLock } from './swarm-lock.js';
import type { SharedNetwork } from './overlay-networks.js';
import type { AddressClaim } from './overlay-addresses.js';
import type { LogRecord } from '../containers/log-reader.js';
import { TASK_LABELS, outOfSequence, type ClusterRecord, type NodeRecord, type NodeSpec, type ServiceRecord, type SwarmSpec, type TaskRecord, type TaskLogQuery } from './swarm-model.js';

export type { InitRequest } from './cluster.js';
export { tlsInfo } from './cluster/pki.js';
export type { PullFn } from './task-runner.js';
export { NOT_MANAGER, SWARM_LOCKED, type SwarmDeps } from './swarm-core.js';
export type { ServiceCounts } from './swarm-services.js';

export class SwarmService {
  readonly #core: SwarmCore;
  readonly #membership: SwarmMembership;
  readonly #nodes: SwarmNodes;
  readonly #services: SwarmServices;
  readonly #lock: SwarmLock;
  #unsubscribe: (() => void) | undefined;

  constructor(private readonly d: SwarmDeps) {
    this.#core = new SwarmCore(d, (kind, id, doc) => this.putDoc(kind, id, doc), (s, message) => this.#services.rollback(s, message), (t) => this.#membership.taskData(t), () => this.#membership.claimStore(), (kind, id, doc, name) => this.#membership.sync.commitDoc(kind, id, doc, name));
    this.#membership = new SwarmMembership(this.#core);
    this.#nodes = new SwarmNodes(this.#core, (role) => this.#membership.roleChanged(role), (id, role) => this.#membership.nodeChanged(id, role));
    this.#services = new SwarmServices(this.#core, () => this.#membership.members.files);
    this.#lock = new SwarmLock(this.#core, this.#membership.members, this.#membership.keys, () => this.#membership.reconnect());
    this.watchDocs('networks', (id, doc) => this.overlay?.applyRemote(id, doc as SharedNetwork | undefined));
    this.watchDocs('attachments', (id, doc) => this.overlay?.addresses.applyRemoteAttachments(id, doc as Record<string, string[]> | undefined));
    this.watchDocs('addresses', (id, doc) => this.overlay?.addresses.applyRemoteClaim(id, doc as AddressClaim | undefined));
  }

  get store() {
    return this.#core.store;
  }

  get runner() {
    return this.#core.runner;
  }

  get orchestrator() {
    return this.#core.orchestrator;
  }

  get updater() {
    return this.#core.updater;
  }

  get overlay() {
    return this.#core.overlay;
  }

  /** Secrets and configs, by kind. */
  get blobs() {
    return this.#core.blobs;
  }

  /** Loads the swarm, catches up with what the containers did meanwhile, and takes over again. */
  start(): void {
    const core = this.#core;
    const store = core.store;
    store.load();
    for (const b of Object.values(core.blobs)) b.load();
    this.#unsubscribe = this.d.events.subscribe((ev) => core.runner.onContainerEvent(ev));
    const known = new Set(store.tasks.keys());
    // Task containers no task knows about (a crash between creating one and recording it, or a leave cut short).
    for (const c of this.d.containers.all()) {
      const taskId = c.config.Labels?.[TASK_LABELS.taskId];
      if (taskId !== undefined && (!known.has(taskId) || store.tasks.get(taskId)!.status.containerId !== c.id)) {
        this.d.containers.remove(c.id, { force: true, volumes: false }).catch((err) => log.warn('removing orphaned task container failed', { id: c.id, err }));
      }
    }
    if (!store.cluster) return;
    // The cluster's state comes from etcd; until this node leads, it only runs its own tasks.
    // What changes before etcd answers is kept and sent once it does.
    if (store.cluster.local) this.#membership.resume();
    for (const t of store.tasks.values()) if (!t.nodeId || t.nodeId === store.selfId) core.runner.syncWithContainers(t);
    if (store.cluster.local) {
      for (const t of store.tasks.values()) if (t.nodeId === store.selfId) core.runner.advance(t);
      core.publish();
      this.#membership.reconnect();
      return;
    }
    core.leader = true;
    core.takeOver();
    log.info('swarm resumed', { node: store.cluster.node.id, services: store.services.size, tasks: store.tasks.size });
  }

  /** Resolves once the link to etcd is closed: berthd must not exit with writes still queued. */
  async close(): Promise<void> {
    const core = this.#core;
    core.closed = true;
    const membership = this.#membership.close();
    this.#unsubscribe?.();
    core.updater.close();
    core.runner.close();
    core.overlay?.close();
    await membership;
    log.info('swarm closed');
  }

  get active(): boolean {
    return this.store.cluster !== undefined;
  }

  /** The cluster, or dockerd's 503 for a node outside any swarm. */
  cluster(): ClusterRecord {
    return this.#core.cluster();
  }

  /**
   * The cluster once the cache holds etcd's state: dockerd's 503 at once outside a swarm, on a worker
   * or while locked; after a restart or an unlock it waits for etcd's snapshot (store.current, bounded),
   * then checks again (the node may have been demoted meanwhile).
   */
  async #current(): Promise<ClusterRecord> {
    this.cluster();
    await this.store.current();
    return this.cluster();
  }

  /** GET /swarm: the cluster as etcd holds it. */
  inspect(): Promise<ClusterRecord> {
    return this.#current();
  }

  /** The cluster as this node's cache holds it now (no wait for etcd: GET /info), or none outside a swarm. */
  get clusterNow(): ClusterRecord | undefined {
    return this.store.cluster;
  }

  /** The nodes as the cache holds them now (no wait for etcd: GET /info). */
  nodesNow(): NodeRecord[] {
    return [...this.store.nodes.values()];
  }

  /** Whether this node is a manager of an active swarm. */
  get isManager(): boolean {
    return !!this.store.cluster && this.store.cluster.node.spec.Role !== 'worker';
  }

  /** The current leader's node id, when known. */
  get leaderId(): string | undefined {
    return this.store.cluster?.local ? this.#core.leaderId : this.store.cluster?.node.id;
  }

  /** Whether the node's heartbeat is current (a swarm without etcd: its one node is). */
  nodeReady(id: string): boolean {
    return this.#nodes.nodeReady(id);
  }

  // --- the swarm ---

  /**
   * A new cluster with this node as its manager: a CA and this node's certificate, an etcd member
   * (or the external etcd), the cluster's first documents, the join listener on the swarm port.
   */
  init(req: InitRequest): Promise<string> {
    return this.#membership.init(req);
  }

  /** Joins the cluster of the manager(s) at RemoteAddrs, as the token's role. */
  join(req: { RemoteAddrs?: string[]; JoinToken?: string; ListenAddr?: string; AdvertiseAddr?: string; Availability?: string }): Promise<void> {
    return this.#membership.join(req);
  }

  /** Leaving erases the swarm: every task container is removed, as dockerd does. */
  leave(force: boolean): Promise<void> {
    return this.#membership.leave(force);
  }

  /**
   * A new spec (and rotated tokens or unlock key) for the swarm at `version`; in a cluster it is in
   * etcd first, compared as a service's update is. Settles once this node's key files are sealed as
   * auto-lock now says.
   */
  async update(version: number, spec: SwarmSpec, rotate: { workerToken: boolean; managerToken: boolean; unlockKey: boolean }): Promise<void> {
    this.cluster();
    await this.store.linked();
    const c = this.cluster();
    if (version !== c.version) throw outOfSequence();
    const ca = tokenCaPart(c.joinTokens.worker);
    const next: ClusterRecord = { ...c, spec: withSwarmDefaults(spec), joinTokens: { ...c.joinTokens } };
    if (rotate.workerToken) next.joinTokens.worker = joinToken(ca);
    if (rotate.managerToken) next.joinTokens.manager = joinToken(ca);
    this.store.touch(next);
    await this.store.commitCluster(next);
    await this.#lock.update(!!next.spec.EncryptionConfig?.AutoLockManagers, rotate.unlockKey);
  }

  async unlockKey(): Promise<string> {
    await this.#current();
    return this.#lock.unlockKey();
  }

  /** `docker swarm unlock` of a locked manager. */
  unlock(unlockKey: unknown): Promise<void> {
    return this.#lock.unlock(unlockKey);
  }

  /** A manager of an auto-locked swarm, restarted and not unlocked yet. */
  get locked(): boolean {
    return this.#core.locked;
  }

  /**
   * Other cluster-wide records kept beside the swarm's (e.g. `networks`, for the overlay driver):
   * `putDoc` writes `<kind>/<id>` to etcd (undefined deletes; nothing happens outside a cluster),
   * `watchDocs` hears every such document, from the snapshot at link time and then every change.
   */
  putDoc(kind: string, id: string, doc: unknown | undefined): void {
    this.#membership.sync.putDoc(kind, id, doc);
  }

  watchDocs(kind: string, fn: (id: string, doc: unknown | undefined) => void): void {
    this.#membership.sync.watchDocs(kind, fn);
  }

  // --- nodes ---

  async nodes(): Promise<NodeRecord[]> {
    await this.#current();
    return this.#nodes.nodes();
  }

  /** By id, name, hostname, then unique id prefix. */
  async node(idOrName: string): Promise<NodeRecord> {
    await this.#current();
    return this.#nodes.node(idOrName);
  }

  get host(): HostFacts {
    return this.d.host;
  }

  updateNode(idOrName: string, version: number, spec: NodeSpec): Promise<void> {
    return this.#nodes.updateNode(idOrName, version, spec);
  }

  /** A node that is down (or any worker, with force) leaves the node list; managers must be demoted first. */
  async removeNode(idOrName: string, force = false): Promise<void> {
    await this.#current();
    return this.#nodes.removeNode(idOrName, force);
  }

  // --- secrets and configs ---

  async blobList(kind: BlobKind): Promise<BlobRecord[]> {
    await this.#current();
    return this.blobs[kind].list();
  }

  async blob(kind: BlobKind, idOrName: string): Promise<BlobRecord> {
    await this.#current();
    return this.blobs[kind].get(idOrName);
  }

  /** In a cluster, in etcd (its name taken there) before the answer. */
  async createBlob(kind: BlobKind, body: unknown): Promise<BlobRecord> {
    await this.#current();
    return this.blobs[kind].create(body);
  }

  async updateBlob(kind: BlobKind, idOrName: string, version: number, body: unknown): Promise<void> {
    this.cluster();
    await this.store.linked();
    await this.blobs[kind].update(idOrName, version, body);
  }

  async removeBlob(kind: BlobKind, idOrName: string): Promise<void> {
    await this.#current();
    await this.blobs[kind].remove(idOrName, this.store.services.values());
  }

  // --- services and tasks ---

  async services(): Promise<ServiceRecord[]> {
    await this.#current();
    return this.#services.services();
  }

  async service(idOrName: string): Promise<ServiceRecord> {
    await this.#current();
    return this.#services.service(idOrName);
  }

  createService(body: unknown, registryAuth: string | undefined): Promise<{ id: string }> {
    return this.#services.createService(body, registryAuth);
  }

  updateService(idOrName: string, version: number, body: unknown, opts: { rollback?: boolean; registryAuth?: string }): Promise<void> {
    return this.#services.updateService(idOrName, version, body, opts);
  }

  /** The service goes at once (in a cluster, once etcd took it); its tasks' containers are stopped and removed behind it. */
  async removeService(idOrName: string): Promise<void> {
    await this.#current();
    return this.#services.removeService(idOrName);
  }

  counts(s: ServiceRecord): ServiceCounts {
    return this.#services.counts(s);
  }

  async tasks(): Promise<TaskRecord[]> {
    await this.#current();
    return this.#services.tasks();
  }

  /** The service's tasks as the cache holds them now (no wait for etcd: the caller resolved the service). */
  tasksOfService(serviceId: string): TaskRecord[] {
    return this.store.tasksOf(serviceId);
  }

  /** Whether the task is still in the cache (not removed since it was read). */
  hasTask(id: string): boolean {
    return this.store.tasks.has(id);
  }

  /** Whether the task was made from its service's current spec (`_up-to-date`); false once the service is gone. */
  taskUpToDate(t: TaskRecord): boolean {
    const s = this.store.services.get(t.serviceId);
    return s !== undefined && t.templateVersion === s.templateVersion;
  }

  /** Hears every task change this node observes, until the returned function is called. */
  onTaskChange(fn: (t: TaskRecord) => void): () => void {
    return this.#core.runner.onTaskChange(fn);
  }

  /**
   * A task's log records: from its container here, or streamed from the node running it (over the
   * swarm port, with this node's certificate). Empty when the task has no container.
   */
  taskLogRecords(t: TaskRecord, q: TaskLogQuery, signal: AbortSignal): AsyncIterable<LogRecord> | undefined {
    return this.#services.taskLogRecords(t, q, signal);
  }

  async task(id: string): Promise<TaskRecord> {
    await this.#current();
    return this.#services.task(id);
  }
}
