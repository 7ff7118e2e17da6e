/**
 * Swarm mode on one node, as the API sees it: init/leave/update of the cluster, this node, services
 * and their tasks. The orchestrator, task runner and updater do the work; this class checks requests,
 * keeps versions honest and wires container events in. Every call but init needs an active swarm.
 */
import type { ContainerService } from '../containers.js';
import type { ImageService } from '../images.js';
import type { EventBus } from '../events.js';
import type { HostFacts } from '../system.js';
import type { SwarmRecords } from '../../state/swarm-records.js';
import type { SwarmObjectRecords } from '../../state/swarm-object-records.js';
import { join } from 'node:path';
import { SwarmBlobs, type BlobKind, type BlobRecord } from './secrets.js';
import { TaskFiles } from './task-files.js';
import { conflict, invalidArgument, notFound, notImplemented, unavailable } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { generateName } from '../container-create.js';
import { newCluster, withSwarmDefaults, type InitRequest } from './cluster.js';
import { joinToken, newUnlockKey, newSwarmId, tokenCaPart } from './swarm-ids.js';
import { normalizeServiceSpec, resolvePorts, templateChanged } from './service-spec.js';
import { SwarmStore } from './swarm-store.js';
import { TaskRunner, type PullFn } from './task-runner.js';
import { Orchestrator, isCurrent } from './orchestrator.js';
import { Updater } from './updater.js';
import { IngressProxy } from './ingress-proxy.js';
import { OverlayNetworks } from './overlay-networks.js';
import { meshPeers } from './mesh-peers.js';
import type { NetworkDriver } from '../../network/network-driver.js';
import {
  TASK_LABELS,
  isGlobal,
  isJob,
  modeName,
  replicas,
  type ClusterRecord,
  type NodeRecord,
  type NodeSpec,
  type ServiceRecord,
  type ServiceSpec,
  type SwarmSpec,
  type TaskRecord,
} from './swarm-model.js';

export type { InitRequest } from './cluster.js';
export type { PullFn } from './task-runner.js';

export const NOT_MANAGER =
  'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
const ALREADY_IN_SWARM = 'This node is already part of a swarm. Use "docker swarm leave" to leave this swarm and join another one.';
const NOT_IN_SWARM = 'This node is not part of a swarm';
const LEAVE_MANAGER =
  'You are attempting to leave the swarm on a node that is participating as a manager. Removing the last manager erases all current state of the swarm. Use `--force` to ignore this message.';

export interface SwarmDeps {
  records: SwarmRecords;
  secretRecords: SwarmObjectRecords;
  configRecords: SwarmObjectRecords;
  containers: ContainerService;
  images: ImageService;
  events: EventBus;
  host: HostFacts;
  pull: PullFn;
  /** Overlay networks need the node's network driver; without it services take no networks. */
  network?: NetworkDriver;
}

export interface ServiceCounts {
  running: number;
  desired: number;
  completed: number;
}

/** Something that follows the services' published ports (the ingress listener). */
export interface PortPublisher {
  sync(services: ServiceRecord[], tasks: TaskRecord[]): void;
  close(): void;
}

export class SwarmService {
  readonly store: SwarmStore;
  readonly runner: TaskRunner;
  readonly orchestrator: Orchestrator;
  readonly updater: Updater;
  readonly overlay: OverlayNetworks | undefined;
  /** Secrets and configs, by kind. */
  readonly blobs: Record<BlobKind, SwarmBlobs>;
  readonly #files: TaskFiles;
  /** Serves the ingress ports services publish. */
  publisher: PortPublisher;
  #unsubscribe: (() => void) | undefined;

  constructor(private readonly d: SwarmDeps) {
    this.store = new SwarmStore(d.records);
    const nextVersion = () => this.store.nextVersion();
    this.blobs = { secret: new SwarmBlobs('secret', d.secretRecords, nextVersion), config: new SwarmBlobs('config', d.configRecords, nextVersion) };
    this.#files = new TaskFiles(join(d.containers.dataRoot, 'swarm', 'task-files'), this.blobs);
    this.overlay = d.network ? new OverlayNetworks({ store: this.store, driver: d.network, events: d.events, peers: () => (this.store.cluster ? this.nodes().map((n) => n.addr) : []) }) : undefined;
    this.runner = new TaskRunner({
      files: this.#files,
      store: this.store,
      containers: d.containers,
      images: d.images,
      pull: d.pull,
      node: () => this.store.cluster?.node,
      host: d.host,
      onChange: (t) => this.#taskChanged(t),
      networks: async (t) => this.overlay?.containerNetworks(t),
    });
    this.orchestrator = new Orchestrator(this.store, this.runner, (s, t) => this.overlay?.attachTask(s, t));
    this.updater = new Updater(this.store, this.orchestrator, this.runner, (s, message) => this.#rollback(s, message));
    const nodes = () => (this.store.cluster ? this.nodes() : []);
    this.publisher = new IngressProxy((serviceId) => this.#taskAddresses(serviceId), '0.0.0.0', meshPeers(this.store, nodes));
  }

  /** Loads the swarm, catches up with what the containers did meanwhile, and takes over again. */
  start(): void {
    this.store.load();
    for (const b of Object.values(this.blobs)) b.load();
    this.#unsubscribe = this.d.events.subscribe((ev) => this.runner.onContainerEvent(ev));
    const known = new Set(this.store.tasks.keys());
    // Task containers no task knows about (a crash between creating one and recording it, or a leave cut short).
    for (const c of this.d.containers.all()) {
      const taskId = c.config.Labels?.[TASK_LABELS.taskId];
      if (taskId !== undefined && (!known.has(taskId) || this.store.tasks.get(taskId)!.status.containerId !== c.id)) {
        this.d.containers.remove(c.id, { force: true, volumes: false }).catch((err) => log.warn('removing orphaned task container failed', { id: c.id, err }));
      }
    }
    if (!this.store.cluster) return;
    for (const t of this.store.tasks.values()) this.runner.syncWithContainers(t);
    const serviceIds = new Set([...this.store.services.keys(), ...[...this.store.tasks.values()].map((t) => t.serviceId)]);
    for (const id of serviceIds) this.orchestrator.reconcile(id, 'known');
    for (const s of this.store.services.values()) this.updater.resume(s);
    this.#publish();
    log.info('swarm resumed', { node: this.store.cluster.node.id, services: this.store.services.size, tasks: this.store.tasks.size });
  }

  close(): void {
    this.#unsubscribe?.();
    this.updater.close();
    this.runner.close();
    this.publisher.close();
    this.overlay?.close();
  }

  get active(): boolean {
    return this.store.cluster !== undefined;
  }

  /** The cluster, or dockerd's 503 for a node outside any swarm. */
  cluster(): ClusterRecord {
    const c = this.store.cluster;
    if (!c) throw unavailable(NOT_MANAGER);
    return c;
  }

  // --- the swarm ---

  init(req: InitRequest): string {
    if (this.store.cluster) throw unavailable(ALREADY_IN_SWARM);
    const cluster = newCluster(req);
    this.store.touch(cluster);
    this.store.touch(cluster.node);
    this.store.cluster = cluster;
    this.store.saveCluster();
    log.info('swarm initialized', { cluster: cluster.id, node: cluster.node.id });
    return cluster.node.id;
  }

  join(): never {
    if (this.store.cluster) throw unavailable(ALREADY_IN_SWARM);
    throw notImplemented('Berth runs a swarm of one node: joining another swarm is not supported');
  }

  /** Leaving erases the swarm: every task container is removed, as dockerd does. */
  async leave(force: boolean): Promise<void> {
    if (!this.store.cluster) throw unavailable(NOT_IN_SWARM);
    if (!force) throw unavailable(LEAVE_MANAGER);
    this.updater.close();
    const tasks = [...this.store.tasks.values()];
    this.store.clear();
    for (const b of Object.values(this.blobs)) b.clear();
    this.#publish();
    await Promise.all(tasks.map((t) => this.runner.removeContainer(t)));
    await this.#files.clear().catch((err) => log.warn('removing task files failed', { err }));
    log.info('left the swarm', { tasks: tasks.length });
  }

  update(version: number, spec: SwarmSpec, rotate: { workerToken: boolean; managerToken: boolean; unlockKey: boolean }): void {
    const c = this.cluster();
    if (version !== c.version) throw conflict('update out of sequence');
    const next = withSwarmDefaults(spec);
    const autolock = !!next.EncryptionConfig?.AutoLockManagers;
    if (!autolock) c.unlockKey = '';
    else if (!c.unlockKey || rotate.unlockKey) c.unlockKey = newUnlockKey();
    const ca = tokenCaPart(c.joinTokens.worker);
    if (rotate.workerToken) c.joinTokens.worker = joinToken(ca);
    if (rotate.managerToken) c.joinTokens.manager = joinToken(ca);
    c.spec = next;
    this.store.touch(c);
    this.store.saveCluster();
  }

  unlockKey(): string {
    return this.cluster().unlockKey;
  }

  unlock(): never {
    this.cluster();
    throw conflict('swarm is not locked!');
  }

  // --- nodes ---

  nodes(): NodeRecord[] {
    return [this.cluster().node];
  }

  /** By id, id prefix, hostname or name. */
  node(idOrName: string): NodeRecord {
    const n = this.cluster().node;
    if (idOrName && (n.id.startsWith(idOrName) || idOrName === this.d.host.name || idOrName === n.spec.Name)) return n;
    throw notFound(`node ${idOrName} not found`);
  }

  get host(): HostFacts {
    return this.d.host;
  }

  updateNode(idOrName: string, version: number, spec: NodeSpec): void {
    const n = this.node(idOrName);
    if (version !== n.version) throw conflict('update out of sequence');
    const availability = spec.Availability || 'active';
    if (!['active', 'pause', 'drain'].includes(availability)) throw invalidArgument(`invalid availability: ${availability}`);
    if (spec.Role && spec.Role !== 'manager') throw invalidArgument('attempting to demote the last manager of the swarm');
    n.spec = { ...(spec.Name ? { Name: spec.Name } : {}), Labels: spec.Labels ?? {}, Role: 'manager', Availability: availability };
    this.store.touch(n);
    this.store.saveCluster();
    for (const id of this.store.services.keys()) this.orchestrator.reconcile(id, 'live');
  }

  removeNode(idOrName: string): never {
    const n = this.node(idOrName);
    throw invalidArgument(`node ${n.id} is a cluster manager and is a member of the raft cluster. It must be demoted to worker before removal`);
  }

  // --- secrets and configs ---

  blobList(kind: BlobKind): BlobRecord[] {
    this.cluster();
    return this.blobs[kind].list();
  }

  blob(kind: BlobKind, idOrName: string): BlobRecord {
    this.cluster();
    return this.blobs[kind].get(idOrName);
  }

  createBlob(kind: BlobKind, body: unknown): BlobRecord {
    this.cluster();
    return this.blobs[kind].create(body);
  }

  updateBlob(kind: BlobKind, idOrName: string, version: number, body: unknown): void {
    this.cluster();
    this.blobs[kind].update(idOrName, version, body);
  }

  removeBlob(kind: BlobKind, idOrName: string): void {
    this.cluster();
    this.blobs[kind].remove(idOrName, this.store.services.values());
  }

  #checkRefs(spec: ServiceSpec): void {
    this.blobs.secret.checkRefs(spec);
    this.blobs.config.checkRefs(spec);
  }

  // --- services ---

  services(): ServiceRecord[] {
    this.cluster();
    return [...this.store.services.values()];
  }

  service(idOrName: string): ServiceRecord {
    this.cluster();
    const s = this.store.findService(idOrName);
    if (!s) throw notFound(`service ${idOrName} not found`);
    return s;
  }

  createService(body: unknown, registryAuth: string | undefined): { id: string } {
    this.cluster();
    const spec = normalizeServiceSpec(body);
    this.#checkRefs(spec);
    const names = new Set([...this.store.services.values()].map((s) => s.spec.Name));
    spec.Name ||= generateName((n) => names.has(n));
    if (names.has(spec.Name)) throw conflict(`rpc error: code = AlreadyExists desc = name conflicts with an existing object: service ${spec.Name} already exists`);
    const ports = resolvePorts(spec.EndpointSpec, [], this.#ingressPorts());
    const vips = this.#virtualIPs(spec);
    const now = new Date().toISOString();
    const s: ServiceRecord = { id: newSwarmId(), version: 0, createdAt: now, updatedAt: now, spec, templateVersion: 0, ports, ...(registryAuth ? { registryAuth } : {}), ...vips };
    this.store.touch(s);
    s.templateVersion = s.version;
    this.store.saveService(s);
    this.orchestrator.reconcile(s.id, 'live');
    this.#publish();
    return { id: s.id };
  }

  updateService(idOrName: string, version: number, body: unknown, opts: { rollback?: boolean; registryAuth?: string }): void {
    const s = this.service(idOrName);
    if (version !== s.version) throw conflict('update out of sequence');
    let spec: ServiceSpec;
    if (opts.rollback) {
      if (!s.previousSpec) throw invalidArgument(`service ${s.id} does not have a previous spec`);
      spec = s.previousSpec;
    } else {
      spec = normalizeServiceSpec(body);
      this.#checkRefs(spec);
      spec.Name ||= s.spec.Name;
      if (spec.Name !== s.spec.Name) throw invalidArgument('renaming services is not supported');
      if (modeName(spec) !== modeName(s.spec)) throw invalidArgument('service mode change is not allowed');
    }
    const ports = resolvePorts(spec.EndpointSpec, s.ports, this.#ingressPorts(s.id));
    const vips = this.#virtualIPs(spec, s);
    const dirty = templateChanged(s.spec, spec);
    s.previousSpec = s.spec;
    s.spec = spec;
    s.ports = ports;
    Object.assign(s, vips);
    if (opts.registryAuth) s.registryAuth = opts.registryAuth;
    this.store.touch(s);
    if (dirty) s.templateVersion = s.version;
    this.store.saveService(s);
    // A rollback always reports its progress, even when only the replica count goes back.
    // A job's new iteration replaces its tasks at once; there is no rolling update of jobs.
    if ((dirty || opts.rollback) && !isJob(s.spec)) this.updater.start(s, opts.rollback ? 'rollback' : 'update');
    this.orchestrator.reconcile(s.id, 'live');
    this.#publish();
  }

  /** The service goes at once; its tasks' containers are stopped and removed behind it. */
  removeService(idOrName: string): void {
    const s = this.service(idOrName);
    this.updater.cancel(s.id);
    this.store.deleteService(s.id);
    this.orchestrator.reconcile(s.id);
    this.#publish();
  }

  counts(s: ServiceRecord): ServiceCounts {
    let running = 0;
    let notShutdown = 0;
    let completed = 0;
    for (const t of this.store.tasksOf(s.id)) {
      if (t.status.state === 'running' && isCurrent(t)) running++;
      if (t.status.state === 'complete') completed++;
      if (isCurrent(t)) notShutdown++;
    }
    if (isJob(s.spec)) {
      const done = this.store.tasksOf(s.id).filter((t) => t.status.state === 'complete' && t.templateVersion === s.templateVersion).length;
      const job = s.spec.Mode?.ReplicatedJob;
      return { running, desired: job ? Math.max(0, Math.min(job.MaxConcurrent ?? 1, (job.TotalCompletions ?? 0) - done)) : notShutdown, completed };
    }
    return { running, desired: isGlobal(s.spec) ? notShutdown : replicas(s.spec), completed };
  }

  // --- tasks ---

  tasks(): TaskRecord[] {
    this.cluster();
    return [...this.store.tasks.values()];
  }

  task(id: string): TaskRecord {
    this.cluster();
    const t = this.store.findTask(id);
    if (!t) throw notFound(`task ${id} not found`);
    return t;
  }

  #rollback(s: ServiceRecord, message: string): void {
    if (!s.previousSpec || this.store.services.get(s.id) !== s) return;
    const current = s.spec;
    s.spec = s.previousSpec;
    s.previousSpec = current;
    s.ports = resolvePorts(s.spec.EndpointSpec, s.ports, this.#ingressPorts(s.id));
    Object.assign(s, this.#virtualIPs(s.spec, s));
    this.store.touch(s);
    s.templateVersion = s.version;
    this.store.saveService(s);
    this.updater.start(s, 'rollback', message);
    this.orchestrator.reconcile(s.id, 'live');
    this.#publish();
  }

  #taskChanged(t: TaskRecord): void {
    this.orchestrator.reconcile(t.serviceId);
    if (t.status.state === 'running' || !this.store.tasks.has(t.id) || t.desiredState !== 'running') this.#publish();
  }

  /** Ingress ports in use by services other than `except`: "8080/tcp" → service name. */
  #ingressPorts(except?: string): Map<string, string> {
    const taken = new Map<string, string>();
    for (const s of this.store.services.values()) {
      if (s.id === except) continue;
      for (const p of s.ports) if (p.PublishMode === 'ingress' && p.PublishedPort) taken.set(`${p.PublishedPort}/${p.Protocol}`, s.spec.Name!);
    }
    return taken;
  }

  /** The container addresses of the service's running tasks, on whatever networks they are attached to. */
  #taskAddresses(serviceId: string): string[] {
    const out: string[] = [];
    for (const t of this.store.tasksOf(serviceId)) {
      if (t.status.state !== 'running' || t.desiredState !== 'running') continue;
      const c = this.d.containers.find(t.status.containerId);
      for (const ep of Object.values(c?.network.endpoints ?? {})) {
        const ip = ep.IPAddress ?? ep.ipAddress;
        if (typeof ip === 'string' && ip) {
          out.push(ip);
          break;
        }
      }
    }
    return out;
  }

  #publish(): void {
    this.publisher.sync([...this.store.services.values()], [...this.store.tasks.values()]);
    this.overlay?.sync();
  }

  /** The service's VIPs for this spec (kept where its networks stay); throws for a network it cannot use. */
  #virtualIPs(spec: ServiceSpec, s?: ServiceRecord): Pick<ServiceRecord, 'virtualIPs'> {
    const vips = this.overlay?.virtualIPs(spec, s?.virtualIPs, s?.id) ?? [];
    if (!this.overlay && (spec.TaskTemplate as { Networks?: unknown[] } | undefined)?.Networks?.length) throw invalidArgument('services with networks need the network driver');
    return { virtualIPs: vips.length ? vips : undefined };
  }
}
