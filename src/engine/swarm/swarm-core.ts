/**
 * What the swarm's parts share: the store and the workers that act on it (task runner, orchestrator,
 * updater, overlays with the routing mesh), secrets and configs, who leads and whether this manager is locked.
 * Joining (swarm-membership.ts), roles (swarm-roles.ts), the etcd sync (swarm-sync.ts), auto-lock
 * (swarm-lock.ts) and the nodes and services APIs (swarm-nodes.ts, swarm-services.ts) each get this
 * one object; SwarmService (swarm.ts) is the facade routes call.
 */
import type { ContainerService } from '../containers/container-service.js';
import type { ImageService } from '../images/image-service.js';
import type { EventBus } from '../events.js';
import type { HostFacts } from '../system.js';
import type { SwarmRecords } from '../../state/swarm-records.js';
import type { SwarmObjectRecords } from '../../state/swarm-object-records.js';
import type { NetworkController } from '../networks/network-controller.js';
import { join } from 'node:path';
import { SwarmBlobs, type BlobKind } from './secrets.js';
import { TaskFiles, type BlobData } from './task-files.js';
import { unavailable } from '../../lib/errors.js';
import { hostPortKeys, schedule } from './placement.js';
import type { ExternalEtcd } from './cluster/membership.js';
import { SwarmStore, type NameChange } from './swarm-store.js';
import { TaskRunner, type PullFn } from './task-runner.js';
import { Orchestrator } from './orchestrator.js';
import { Updater } from './updater.js';
import { OverlayNetworks } from './overlay-networks.js';
import type { ClaimStore } from './overlay-addresses.js';
import { isTerminal, type ClusterRecord, type NodeRecord, type ServiceRecord, type TaskRecord } from './swarm-model.js';

export const SWARM_LOCKED = 'Swarm is encrypted and needs to be unlocked before it can be used. Please use "docker swarm unlock" to unlock it.';
export const NOT_MANAGER =
  'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
/** What dockerd answers a cluster read or change on a worker (its daemon/cluster errNoManager). */
export const WORKER_NOT_MANAGER =
  "This node is not a swarm manager. Worker nodes can't be used to view or modify cluster state. Please run this command on a manager node or promote the current node to a manager.";

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
  network?: NetworkController;
  /** An etcd cluster to keep the swarm in, instead of one berthd runs. */
  externalEtcd?: ExternalEtcd;
  /** berthd's exec root (a tmpfs): the etcd member's key file while it runs (cluster/membership.ts). */
  execRoot: string;
  /** `docker network disconnect -f`: a plain container leaves a swarm network the node is leaving. */
  disconnect?: (network: string, container: string) => Promise<void>;
}

export class SwarmCore {
  readonly store: SwarmStore;
  readonly runner: TaskRunner;
  readonly orchestrator: Orchestrator;
  readonly updater: Updater;
  readonly overlay: OverlayNetworks | undefined;
  /** Secrets and configs, by kind. */
  readonly blobs: Record<BlobKind, SwarmBlobs>;
  readonly files: TaskFiles;
  /** Whether this node won the leader election (always so in a swarm without etcd). */
  leader = false;
  leaderId: string | undefined;
  closed = false;
  /** A manager of an auto-locked swarm after a restart, until `docker swarm unlock`. */
  locked = false;

  constructor(
    readonly d: SwarmDeps,
    /** Writes a cluster-wide document (SwarmSync.putDoc). */
    share: (kind: string, id: string, doc: unknown) => void,
    /** A service rolls back on its own (its update failed). */
    rollback: (s: ServiceRecord, message: string) => void,
    /** A task's secrets and configs (SwarmPeers.taskData). */
    taskData: (t: TaskRecord) => Promise<BlobData>,
    /** The cluster's store for atomic claims (the link to etcd), undefined outside a cluster. */
    claims: () => ClaimStore | undefined,
    /** Writes a cluster-wide document now, taking or freeing its name (SwarmSync.commitDoc). */
    commit: (kind: string, id: string, doc: unknown | undefined, name: NameChange) => Promise<void>,
  ) {
    this.store = new SwarmStore(d.records);
    const nextVersion = () => this.store.nextVersion();
    this.blobs = { secret: new SwarmBlobs('secret', d.secretRecords, nextVersion, this.store.unreadable), config: new SwarmBlobs('config', d.configRecords, nextVersion, this.store.unreadable) };
    this.files = new TaskFiles(join(d.containers.dataRoot, 'swarm', 'task-files'), taskData);
    this.overlay = d.network
      ? new OverlayNetworks({ store: this.store, driver: d.network, events: d.events, peers: () => [...this.store.nodes.values()].map((n) => n.addr), share, commit, claims, disconnect: d.disconnect })
      : undefined;
    this.runner = new TaskRunner({
      files: this.files,
      store: this.store,
      containers: d.containers,
      images: d.images,
      pull: d.pull,
      place: (t) => this.#place(t),
      mine: (nodeId) => nodeId === this.store.selfId,
      elsewhere: (t) => this.#elsewhere(t),
      decides: () => this.leads || !this.store.clustered,
      host: d.host,
      onChange: (t) => this.#taskChanged(t),
      networks: async (t) => this.overlay?.containerNetworks(t),
    });
    this.orchestrator = new Orchestrator(this.store, this.runner, (s, t) => this.overlay?.attachTask(s, t));
    this.updater = new Updater(this.store, this.orchestrator, this.runner, rollback);
  }

  /** The cluster, or dockerd's 503 for a node outside any swarm, on a worker, or locked. */
  cluster(): ClusterRecord {
    if (this.locked) throw unavailable(SWARM_LOCKED);
    const c = this.store.cluster;
    if (!c) throw this.store.unreadable.clusterError() ?? unavailable(NOT_MANAGER);
    if (c.node.spec.Role === 'worker') throw unavailable(WORKER_NOT_MANAGER);
    return c;
  }

  /** Whether this node decides: the elected leader (or the node of a swarm without etcd). */
  get leads(): boolean {
    return this.leader;
  }

  reconcile(serviceId: string, fill: 'live' | 'known' | 'none' = 'none'): void {
    if (this.leads) this.orchestrator.reconcile(serviceId, fill);
  }

  reconcileAll(fill: 'live' | 'known' | 'none'): void {
    if (!this.leads) return;
    const ids = new Set([...this.store.services.keys(), ...[...this.store.tasks.values()].map((t) => t.serviceId)]);
    for (const id of ids) this.orchestrator.reconcile(id, fill);
  }

  /** What the leader does when it starts leading: every service reconciled, updates carried on. */
  takeOver(): void {
    const serviceIds = new Set([...this.store.services.keys(), ...[...this.store.tasks.values()].map((t) => t.serviceId)]);
    for (const id of serviceIds) this.orchestrator.reconcile(id, 'known');
    for (const s of this.store.services.values()) this.updater.resume(s);
    this.publish();
  }

  /** Overlay networking and the routing mesh follow the services and tasks (overlay-networks.ts). */
  publish(): void {
    this.overlay?.sync();
  }

  /** Placement of a task: its preset node checked, or the best node found. */
  #place(t: TaskRecord): { node?: NodeRecord; problem?: string } {
    const nodes = t.nodeId ? [this.store.nodes.get(t.nodeId)].filter((n): n is NodeRecord => !!n) : [...this.store.nodes.values()].filter((n) => this.store.nodeUp(n.id));
    return schedule(t, nodes, this.store.tasks.values(), this.d.host, (x) => hostPortKeys(this.store.services.get(x.serviceId)?.ports));
  }

  /**
   * The leader deletes the records of other nodes' tasks to remove: once their node reports the
   * container gone (task-runner.ts, #remove), or at once when their node is gone.
   */
  #elsewhere(t: TaskRecord): void {
    if (this.leads && t.desiredState === 'remove' && ((isTerminal(t.status.state) && t.containerGone) || !this.store.nodeUp(t.nodeId))) {
      this.store.deleteTask(t.id);
      this.runner.observed(t);
    }
  }

  #taskChanged(t: TaskRecord): void {
    this.reconcile(t.serviceId);
    if (t.status.state === 'running' || !this.store.tasks.has(t.id) || t.desiredState !== 'running') this.publish();
  }
}

/**
 * A part of the swarm working on the shared parts, which it reads under their short names
 * (`this.store`, `this.d`...), as the methods did when they all lived in SwarmService.
 */
export abstract class SwarmPart {
  constructor(protected readonly core: SwarmCore) {}

  protected get store(): SwarmStore {
    return this.core.store;
  }

  protected get d(): SwarmDeps {
    return this.core.d;
  }

  protected get runner(): TaskRunner {
    return this.core.runner;
  }

  protected get updater(): Updater {
    return this.core.updater;
  }

  protected get blobs(): Record<BlobKind, SwarmBlobs> {
    return this.core.blobs;
  }

  protected get overlay(): OverlayNetworks | undefined {
    return this.core.overlay;
  }
}
