/**
 * Swarm mode on one node, as the API sees it: init/leave/update of the cluster, this node, services
 * and their tasks. The orchestrator, task runner and updater do the work; this class checks requests,
 * keeps versions honest and wires container events in. Every call but init needs an active swarm.
 */
import type { ContainerService } from '../containers/container-service.js';
import type { ImageService } from '../images/image-service.js';
import type { EventBus } from '../events.js';
import type { HostFacts } from '../system.js';
import type { SwarmRecords } from '../../state/swarm-records.js';
import type { SwarmObjectRecords } from '../../state/swarm-object-records.js';
import { join } from 'node:path';
import { SwarmBlobs, type BlobKind, type BlobRecord } from './secrets.js';
import { TaskFiles } from './task-files.js';
import { conflict, errorMessage, invalidArgument, isKind, notFound, unavailable } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { generateName } from '../containers/container-create.js';
import { advertiseOf, listenOf, newCluster, withSwarmDefaults, type InitRequest } from './cluster.js';
import { joinToken, newJoinTokens, newUnlockKey, newSwarmId, tokenCaPart } from './swarm-ids.js';
import { schedule } from './placement.js';
import { Membership, type ExternalEtcd } from './cluster/membership.js';
import { caDigest } from './cluster/pki.js';
import { askToJoin, freeSwarmPort, splitRemote, sourceAddressFor, tokenDigest, type JoinAnswer, type JoinAsk } from './cluster/join-protocol.js';
import { seal, unseal, type Sealed } from './cluster/data-key.js';
import type { EtcdState } from './cluster/etcd-state.js';
import { sharedCluster, type TaskStatusDoc } from './swarm-store.js';
import { normalizeServiceSpec, resolvePorts, templateChanged } from './service-spec.js';
import { SwarmStore } from './swarm-store.js';
import { TaskRunner, type PullFn } from './task-runner.js';
import { Orchestrator, isCurrent } from './orchestrator.js';
import { Updater } from './updater.js';
import { IngressProxy } from './ingress-proxy.js';
import { OverlayNetworks, type SharedNetwork } from './overlay-networks.js';
import { meshPeers } from './mesh-peers.js';
import { containerRecords, remoteTaskRecords, serveTaskLogs } from './task-logs.js';
import type { LogRecord } from '../containers/log-reader.js';
import type { NetworkController } from '../networks/network-controller.js';
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
  type TaskLogQuery,
  type ClusterLocal,
  SECOND_NS,
} from './swarm-model.js';

export type { InitRequest } from './cluster.js';
export { tlsInfo } from './cluster/pki.js';
export type { PullFn } from './task-runner.js';

export const NOT_MANAGER =
  'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
const ALREADY_IN_SWARM = 'This node is already part of a swarm. Use "docker swarm leave" to leave this swarm and join another one.';
const NOT_IN_SWARM = 'This node is not part of a swarm';
const BAD_TOKEN = 'rpc error: code = InvalidArgument desc = A valid join token is necessary to join this cluster';
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
  network?: NetworkController;
  /** An etcd cluster to keep the swarm in, instead of one berthd runs. */
  externalEtcd?: ExternalEtcd;
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

function uniqueNodePrefix(all: NodeRecord[], prefix: string): NodeRecord | undefined {
  const hits = all.filter((n) => n.id.startsWith(prefix));
  if (hits.length > 1) throw invalidArgument(`node ${prefix} is ambiguous (${hits.length} matches found)`);
  return hits[0];
}

/** `services/abc` → ['services', 'abc']; `cluster` → ['cluster', '']. */
function splitKey(key: string): [string, string] {
  const i = key.indexOf('/');
  return i < 0 ? [key, ''] : [key.slice(0, i), key.slice(i + 1)];
}

/** Node certificates live as long as CAConfig.NodeCertExpiry says (90 days by default). */
function certDays(c: ClusterRecord): number {
  return Math.max(1, Math.ceil(Number(c.spec.CAConfig?.NodeCertExpiry ?? 90 * 24 * 3600 * SECOND_NS) / SECOND_NS / 86400));
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
  /** Certificates, etcd and the join listener of this node's cluster. */
  readonly #members: Membership;
  /** Whether this node won the leader election (always so in a swarm without etcd). */
  #leader = false;
  #leaderId: string | undefined;
  #graceTimer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Changes made after a restart before etcd answered (key → document, null: deleted). */
  readonly #early = new Map<string, unknown>();

  constructor(private readonly d: SwarmDeps) {
    this.store = new SwarmStore(d.records);
    const nextVersion = () => this.store.nextVersion();
    this.blobs = { secret: new SwarmBlobs('secret', d.secretRecords, nextVersion), config: new SwarmBlobs('config', d.configRecords, nextVersion) };
    this.#files = new TaskFiles(join(d.containers.dataRoot, 'swarm', 'task-files'), this.blobs);
    this.overlay = d.network
      ? new OverlayNetworks({ store: this.store, driver: d.network, events: d.events, peers: () => [...this.store.nodes.values()].map((n) => n.addr), share: (kind, id, doc) => this.putDoc(kind, id, doc), claims: () => (this.store.clustered ? this.#members.state : undefined) })
      : undefined;
    this.watchDocs('networks', (id, doc) => this.overlay?.applyRemote(id, doc as SharedNetwork | undefined));
    this.watchDocs('attachments', (id, doc) => this.overlay?.applyRemoteAttachments(id, doc as Record<string, string[]> | undefined));
    this.watchDocs('addresses', (id, doc) => this.overlay?.applyRemoteClaim(id, doc as { node: string; container: string } | undefined));
    this.runner = new TaskRunner({
      files: this.#files,
      store: this.store,
      containers: d.containers,
      images: d.images,
      pull: d.pull,
      place: (t) => this.#place(t),
      mine: (nodeId) => nodeId === this.store.selfId,
      elsewhere: (t) => this.#elsewhere(t),
      host: d.host,
      onChange: (t) => this.#taskChanged(t),
      networks: async (t) => this.overlay?.containerNetworks(t),
    });
    this.orchestrator = new Orchestrator(this.store, this.runner, (s, t) => this.overlay?.attachTask(s, t));
    this.updater = new Updater(this.store, this.orchestrator, this.runner, (s, message) => this.#rollback(s, message));
    // Workers too: not nodes(), which is for managers.
    const nodes = () => [...this.store.nodes.values()];
    this.publisher = new IngressProxy((serviceId) => this.#taskAddresses(serviceId), '0.0.0.0', meshPeers(this.store, nodes));
    this.#members = new Membership(join(d.containers.dataRoot, 'swarm', 'cluster'), d.externalEtcd, (ask) => this.#admit(ask), (req, res) =>
      void serveTaskLogs(req, res, (id) => {
        const t = this.store.tasks.get(id);
        return t && t.nodeId === this.store.selfId ? t.status.containerId : undefined;
      }, d.containers));
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
    if (this.store.cluster.local) {
      // The cluster's state comes from etcd; until this node leads, it only runs its own tasks.
      // What changes before etcd answers is kept and sent once it does.
      const self = this.store.cluster.node.id;
      this.store.attach({ put: (k, d) => this.#early.set(k, d), del: (k) => this.#early.set(k, null), self: () => self, leading: () => this.#leader });
      for (const b of Object.values(this.blobs)) b.attach((id, rec) => this.#early.set(`${b.kind}s/${id}`, rec ? { sealLater: rec } : null));
    }
    for (const t of this.store.tasks.values()) if (!t.nodeId || t.nodeId === this.store.selfId) this.runner.syncWithContainers(t);
    if (this.store.cluster.local) {
      for (const t of this.store.tasks.values()) if (t.nodeId === this.store.selfId) this.runner.advance(t);
      this.#publish();
      void this.#rejoin().catch((err) => log.error('reconnecting to the swarm failed', { err: errorMessage(err) }));
      return;
    }
    this.#leader = true;
    this.#takeOver();
    log.info('swarm resumed', { node: this.store.cluster.node.id, services: this.store.services.size, tasks: this.store.tasks.size });
  }

  /** What the leader does when it starts leading: every service reconciled, updates carried on. */
  #takeOver(): void {
    const serviceIds = new Set([...this.store.services.keys(), ...[...this.store.tasks.values()].map((t) => t.serviceId)]);
    for (const id of serviceIds) this.orchestrator.reconcile(id, 'known');
    for (const s of this.store.services.values()) this.updater.resume(s);
    this.#publish();
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#graceTimer);
    void this.#members.close(false);
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
    if (!c || c.node.spec.Role === 'worker') throw unavailable(NOT_MANAGER);
    return c;
  }

  /** Whether this node is a manager of an active swarm. */
  get isManager(): boolean {
    return !!this.store.cluster && this.store.cluster.node.spec.Role !== 'worker';
  }

  /** The current leader's node id, when known. */
  get leaderId(): string | undefined {
    return this.store.cluster?.local ? this.#leaderId : this.store.cluster?.node.id;
  }

  /** Whether the node's heartbeat is current (a swarm without etcd: its one node is). */
  nodeReady(id: string): boolean {
    return this.store.clustered ? this.store.alive.has(id) : this.store.nodes.has(id);
  }

  /** Whether this node decides: the elected leader (or the node of a swarm without etcd). */
  get #leads(): boolean {
    return this.#leader;
  }

  #reconcile(serviceId: string, fill: 'live' | 'known' | 'none' = 'none'): void {
    if (this.#leads) this.orchestrator.reconcile(serviceId, fill);
  }

  #reconcileAll(fill: 'live' | 'known' | 'none'): void {
    if (!this.#leads) return;
    const ids = new Set([...this.store.services.keys(), ...[...this.store.tasks.values()].map((t) => t.serviceId)]);
    for (const id of ids) this.orchestrator.reconcile(id, fill);
  }

  // --- the swarm ---

  #joining = false;

  /**
   * A new cluster with this node as its manager: a CA and this node's certificate, an etcd member
   * (or the external etcd), the cluster's first documents, the join listener on the swarm port.
   */
  async init(req: InitRequest): Promise<string> {
    if (this.store.cluster || this.#joining) throw unavailable(ALREADY_IN_SWARM);
    const cluster = newCluster(req);
    const listen = listenOf(req);
    this.#joining = true;
    try {
      const node = cluster.node;
      node.description = this.#description();
      const files = await this.#members.create({ nodeId: node.id, role: 'manager', clusterId: cluster.id, ips: [node.addr], days: certDays(cluster) });
      cluster.caCert = files.ca;
      cluster.joinTokens = newJoinTokens(caDigest(files.ca));
      const local: ClusterLocal = { endpoints: [], listenHost: listen.host, listenPort: listen.port };
      if (this.d.externalEtcd) {
        local.endpoints = this.d.externalEtcd.endpoints;
      } else {
        const ports = await this.#members.memberPorts(node.addr);
        local.member = { ...ports, initialCluster: Membership.initialCluster(node.id, node.addr, ports.peerPort), initialState: 'new' };
        local.endpoints = [Membership.clientUrl(node.addr, ports.clientPort)];
        await this.#members.startMember(node.id, node.addr, cluster.id, local.member);
      }
      const state = await this.#members.connect(node.id, local.endpoints);
      const existing = await state.snapshot();
      if (existing.entries.has('cluster')) throw unavailable('the etcd already holds a swarm: join it instead');
      const port = await this.#members.serveJoins(listen.host, listen.port, true);
      local.listenPort = port;
      node.managerAddr = `${node.addr.includes(':') ? `[${node.addr}]` : node.addr}:${port}`;
      node.peerAddr = node.managerAddr;
      cluster.local = local;
      this.store.touch(cluster);
      this.store.touch(node);
      this.store.cluster = cluster;
      this.store.nodes.clear();
      this.store.nodes.set(node.id, node);
      await this.#link(state, true);
      await this.overlay?.createIngress().catch((err) => log.warn('creating the ingress network failed', { err: errorMessage(err) }));
      log.info('swarm initialized', { cluster: cluster.id, node: node.id, etcd: local.endpoints });
      return node.id;
    } catch (err) {
      await this.#members.close(true).catch(() => undefined);
      this.store.attach(undefined);
      this.store.cluster = undefined;
      throw err;
    } finally {
      this.#joining = false;
    }
  }

  /** Joins the cluster of the manager(s) at RemoteAddrs, as the token's role. */
  async join(req: { RemoteAddrs?: string[]; JoinToken?: string; ListenAddr?: string; AdvertiseAddr?: string; Availability?: string }): Promise<void> {
    if (this.store.cluster || this.#joining) throw unavailable(ALREADY_IN_SWARM);
    const remotes = req.RemoteAddrs ?? [];
    if (!remotes.length) throw invalidArgument('at least 1 RemoteAddr is required to join');
    tokenDigest(req.JoinToken ?? '');
    const availability = req.Availability || 'active';
    if (!['active', 'pause', 'drain'].includes(availability)) throw invalidArgument(`invalid availability: ${availability}`);
    const listen = listenOf(req);
    this.#joining = true;
    try {
      const first = splitRemote(remotes[0]!);
      listen.port = await freeSwarmPort(listen.host, listen.port);
      const addr = req.AdvertiseAddr || (listen.host !== '0.0.0.0' && listen.host !== '::' && req.ListenAddr) ? advertiseOf(req).addr : await sourceAddressFor(first.host, first.port);
      const { key, csr } = await this.#members.newCsr();
      const ports = this.d.externalEtcd ? undefined : await this.#members.memberPorts(addr);
      const ask: JoinAsk = {
        token: req.JoinToken!, csr, addr, hostname: this.d.host.name, architecture: this.d.host.architecture, ncpu: this.d.host.ncpu, memTotal: this.d.host.memTotal,
        availability, ...(ports ?? {}), listenPort: listen.port,
      };
      let answer: JoinAnswer | undefined;
      let lastErr: unknown;
      for (const remote of remotes) {
        try {
          answer = await askToJoin(remote, ask);
          break;
        } catch (err) {
          lastErr = err;
          if (isKind(err, 'invalid-argument')) throw err;
        }
      }
      if (!answer) throw lastErr;
      if (answer.externalEtcd && !this.d.externalEtcd) throw unavailable('the swarm keeps its state in an external etcd: configure swarm-etcd-endpoints and its certificates on this node first');
      await this.#members.adopt(answer, key);
      const node = answer.node as NodeRecord;
      const cluster = { ...(answer.cluster as ClusterRecord), node } as ClusterRecord;
      const local: ClusterLocal = { endpoints: answer.endpoints, listenHost: listen.host, listenPort: listen.port };
      if (answer.role === 'manager' && answer.initialCluster && ports) {
        local.member = { ...ports, initialCluster: answer.initialCluster, initialState: 'existing' };
        // The new member is a learner until promoted: the others answer first.
        local.endpoints = [...answer.endpoints, Membership.clientUrl(addr, ports.clientPort)];
        await this.#members.startMember(node.id, addr, cluster.id, local.member);
      }
      const state = await this.#members.connect(node.id, local.endpoints, 30_000);
      if (local.member) await this.#members.promoteSelf(node.id, 60_000);
      // Workers listen too: managers ask them for their tasks' logs there.
      local.listenPort = await this.#members.serveJoins(listen.host, listen.port, answer.role === 'manager');
      if (answer.role === 'manager') node.managerAddr = `${addr.includes(':') ? `[${addr}]` : addr}:${local.listenPort}`;
      node.peerAddr = `${addr.includes(':') ? `[${addr}]` : addr}:${local.listenPort}`;
      cluster.local = local;
      this.store.cluster = cluster;
      this.store.nodes.clear();
      this.store.nodes.set(node.id, node);
      await this.#link(state, answer.role === 'manager');
      log.info('joined the swarm', { cluster: cluster.id, node: node.id, role: answer.role });
    } catch (err) {
      await this.#members.close(true).catch(() => undefined);
      this.store.attach(undefined);
      this.store.cluster = undefined;
      this.store.nodes.clear();
      throw err;
    } finally {
      this.#joining = false;
    }
  }

  /** A manager's side of a join: the token says the role; the node gets its certificate and etcd. */
  async #admit(ask: JoinAsk): Promise<JoinAnswer> {
    const c = this.store.cluster;
    const files = this.#members.files;
    if (!c || !files || c.node.spec.Role !== 'manager') throw unavailable(NOT_MANAGER);
    const role = ask.token === c.joinTokens.manager ? 'manager' : ask.token === c.joinTokens.worker ? 'worker' : undefined;
    if (!role) throw invalidArgument(BAD_TOKEN);
    if (typeof ask.addr !== 'string' || typeof ask.csr !== 'string') throw invalidArgument('malformed join request');
    const nodeId = newSwarmId();
    const cert = await this.#members.sign(ask.csr, { nodeId, role, clusterId: c.id, ips: [ask.addr], days: certDays(c) });
    const state = this.#members.state!;
    let endpoints = c.local?.endpoints ?? [];
    let initialCluster: string | undefined;
    if (!this.d.externalEtcd) {
      const members = await state.client.cluster.memberList({});
      endpoints = members.members.flatMap((m) => m.clientURLs);
      if (role === 'manager') {
        if (!ask.peerPort || !ask.clientPort) throw invalidArgument('malformed join request: no etcd ports');
        // As a learner first: it counts for the quorum only once it runs and has caught up (the joiner
        // promotes itself then), so a join that fails midway never costs the cluster its quorum.
        const added = await state.client.cluster.memberAdd({ peerURLs: [Membership.peerUrl(ask.addr, ask.peerPort)], isLearner: true });
        initialCluster = added.members.map((m) => `${m.ID === added.member.ID ? nodeId : m.name}=${m.peerURLs[0]}`).join(',');
      }
    }
    const now = new Date().toISOString();
    const node: NodeRecord = {
      id: nodeId, version: 0, createdAt: now, updatedAt: now,
      spec: { Labels: {}, Role: role, Availability: (ask.availability || 'active') as NodeSpec['Availability'] },
      addr: ask.addr,
      managerAddr: role === 'manager' ? `${ask.addr}:${ask.listenPort || 2377}` : '',
      peerAddr: `${ask.addr.includes(':') ? `[${ask.addr}]` : ask.addr}:${ask.listenPort || 2377}`,
      description: { hostname: String(ask.hostname), architecture: String(ask.architecture), ncpu: Number(ask.ncpu) || 1, memTotal: Number(ask.memTotal) || 0 },
    };
    this.store.touch(node);
    this.store.saveNode(node);
    await state.flushed();
    log.info('node joined', { node: nodeId, role, addr: ask.addr });
    return {
      nodeId, role, cert, ca: files.ca, ...(role === 'manager' && files.caKey ? { caKey: files.caKey } : {}),
      dataKey: files.dataKey.toString('base64'), endpoints, ...(initialCluster ? { initialCluster } : {}),
      ...(this.d.externalEtcd ? { externalEtcd: true } : {}),
      cluster: sharedCluster(c), node,
    };
  }

  /** After a restart: the member, the client, the state again, then heartbeats and the campaign. */
  async #rejoin(): Promise<void> {
    const c = this.store.cluster!;
    const local = c.local!;
    await this.#members.load();
    if (local.member) await this.#members.startMember(c.node.id, c.node.addr, c.id, local.member);
    const state = await this.#members.connect(c.node.id, local.endpoints, 60_000);
    if (this.#closed || this.store.cluster !== c) return;
    // A join cut short before its member was promoted finishes here.
    if (local.member && !this.d.externalEtcd) await this.#members.promoteSelf(c.node.id, 60_000).catch((err) => log.warn('promoting this etcd member failed', { err: errorMessage(err) }));
    // A port taken meanwhile costs this node its listener (joins through it, its tasks' logs), not the cluster.
    await this.#members.serveJoins(local.listenHost, local.listenPort, c.node.spec.Role === 'manager').catch((err) => log.error('the swarm port cannot be served', { err: errorMessage(err) }));
    await this.#link(state, c.node.spec.Role === 'manager');
  }

  /**
   * Ties the store to etcd: local changes go out, the cluster's state comes in (a snapshot, then the
   * watch), the heartbeat starts, managers campaign for leadership.
   */
  async #link(state: EtcdState, manager: boolean): Promise<void> {
    const c = this.store.cluster!;
    const self = c.node.id;
    const dataKey = this.#members.files!.dataKey;
    for (const [k, d] of this.#early) {
      if (d === null) state.del(k);
      else state.put(k, d && typeof d === 'object' && 'sealLater' in d ? seal(dataKey, (d as { sealLater: unknown }).sealLater) : d);
    }
    this.#early.clear();
    this.store.attach({ put: (k, d) => state.put(k, d), del: (k) => state.del(k), self: () => self, leading: () => this.#leader });
    for (const b of Object.values(this.blobs)) b.attach((id, rec) => (rec ? state.put(`${b.kind}s/${id}`, seal(dataKey, rec)) : state.del(`${b.kind}s/${id}`)));
    // The first manager writes the cluster and its node; joins and restarts read what etcd holds.
    const before = await state.snapshot();
    if (manager && !before.entries.has('cluster')) this.store.saveCluster();
    if (!before.entries.has(`nodes/${self}`)) this.store.saveNode(c.node);
    await state.flushed();
    const snap = await state.snapshot();
    this.#applySnapshot(snap.entries);
    await state.watch(snap.revision, (key, doc) => this.#onRemote(key, doc, false));
    // Members added since this node joined are remembered for its next start (a worker knew only
    // the members of its join).
    if (!this.d.externalEtcd && c.local) {
      const members = await state.client.cluster.memberList({}).catch(() => undefined);
      const urls = members?.members.flatMap((m) => m.clientURLs) ?? [];
      if (urls.length) {
        c.local.endpoints = [...new Set([...c.local.endpoints, ...urls])];
        this.store.saveCluster(true);
      }
    }
    state.heartbeat(self, this.#heartbeatTtl());
    void state.observeLeader((id) => {
      this.#leaderId = id;
    }).catch((err) => log.warn('observing the swarm leader failed', { err: errorMessage(err) }));
    if (manager) state.campaign(self, this.#heartbeatTtl(), (leading) => this.#onLeadership(leading));
    // Answer once this node shows as ready, and a manager once there is a leader (this one, after init).
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && !(this.store.alive.has(self) && (!manager || this.#leaderId !== undefined))) await new Promise((r) => setTimeout(r, 20));
  }

  /** Seconds without a heartbeat after which a node is down (3 heartbeat periods, at least 2 s). */
  #heartbeatTtl(): number {
    const period = Number(this.store.cluster?.spec.Dispatcher?.HeartbeatPeriod ?? 5 * SECOND_NS) / SECOND_NS;
    return Math.max(2, Math.ceil(3 * period));
  }

  #onLeadership(leading: boolean): void {
    if (this.#leader === leading) return;
    this.#leader = leading;
    log.info(leading ? 'this node leads the swarm' : 'this node no longer leads the swarm', { node: this.store.selfId });
    if (!leading) {
      this.updater.close();
      return;
    }
    // Nodes without a heartbeat get one period of grace: a new leader must not take a restart for a death.
    const ttl = this.#heartbeatTtl() * 1000;
    this.store.graceUntil = Date.now() + ttl;
    clearTimeout(this.#graceTimer);
    this.#graceTimer = setTimeout(() => this.#reconcileAll('live'), ttl + 100);
    this.#graceTimer.unref();
    this.#takeOver();
    for (const t of this.store.tasks.values()) if (!t.nodeId) this.runner.advance(t);
  }

  /** Replaces the cache with etcd's state (at link time: what this node missed meanwhile). */
  #applySnapshot(entries: Map<string, unknown>): void {
    const keep = { services: new Set<string>(), tasks: new Set<string>(), nodes: new Set<string>(), secrets: new Set<string>(), configs: new Set<string>() };
    this.store.alive.clear();
    for (const [key, doc] of entries) {
      const [kind, id] = splitKey(key);
      if (kind in keep) keep[kind as keyof typeof keep].add(id);
      this.#onRemote(key, doc, true);
    }
    // Something here that etcd lacks is either a write that never reached it (this node crashed
    // first: newer than anything etcd holds) or was deleted meanwhile (older): sent again, or dropped.
    let newest = 0;
    for (const doc of entries.values()) newest = Math.max(newest, Number((doc as { version?: number })?.version ?? 0));
    for (const s of [...this.store.services.values()]) {
      if (keep.services.has(s.id)) continue;
      if (s.version > newest) this.store.republish({ service: s });
      else this.store.deleteService(s.id, true);
    }
    for (const t of [...this.store.tasks.values()]) {
      if (keep.tasks.has(t.id)) continue;
      if (t.version > newest && this.store.services.has(t.serviceId)) {
        this.store.republish({ task: t });
        continue;
      }
      this.store.deleteTask(t.id, true);
      if (t.nodeId === this.store.selfId) void this.runner.removeContainer(t);
    }
    for (const id of [...this.store.nodes.keys()]) if (!keep.nodes.has(id) && id !== this.store.selfId) this.store.deleteNode(id, true);
    for (const kind of ['secret', 'config'] as const) for (const id of this.blobs[kind].ids()) if (!keep[`${kind}s`].has(id)) this.blobs[kind].applyRemote(id, undefined);
    this.#publish();
  }

  /** A change another node made (or, with `snapshot`, the state as etcd holds it). */
  #onRemote(key: string, doc: unknown, snapshot: boolean): void {
    const [kind, id] = splitKey(key);
    const json = doc === undefined ? '' : JSON.stringify(doc);
    switch (kind) {
      case 'cluster': {
        const c = this.store.cluster;
        if (!c || !doc) return;
        const shared = doc as ClusterRecord;
        Object.assign(c, sharedCluster({ ...shared, node: c.node } as ClusterRecord));
        this.store.bump(shared.version);
        this.store.seen('cluster', json);
        this.store.saveCluster(true);
        return;
      }
      case 'nodes': {
        if (doc) {
          const n = doc as NodeRecord;
          const wasRole = this.store.cluster?.node.id === id ? this.store.cluster.node.spec.Role : undefined;
          this.store.seen(key, json);
          this.store.bump(n.version);
          this.store.saveNode(n, true);
          if (wasRole && wasRole !== n.spec.Role) this.#roleChanged(n.spec.Role ?? 'worker');
        } else {
          this.store.deleteNode(id, true);
        }
        if (!snapshot) this.#nodesChanged();
        return;
      }
      case 'alive':
        if (doc) this.store.alive.add(id);
        else this.store.alive.delete(id);
        if (!snapshot) this.#nodesChanged();
        return;
      case 'services': {
        if (!doc) {
          this.updater.cancel(id);
          this.store.deleteService(id, true);
          this.#reconcile(id);
          this.#publish();
          return;
        }
        const incoming = doc as ServiceRecord;
        const s = this.store.services.get(id);
        if (s) {
          for (const k of Object.keys(s)) if (!(k in incoming)) delete (s as unknown as Record<string, unknown>)[k];
          Object.assign(s, incoming);
        }
        this.store.seen(key, json);
        this.store.bump(incoming.version);
        this.store.saveService(s ?? incoming, true);
        const state = (s ?? incoming).updateStatus?.State;
        if (this.#leads && !snapshot && (state === 'updating' || state === 'rollback_started') && !this.updater.isRunning(id)) this.updater.resume(s ?? incoming);
        if (!snapshot) this.#reconcile(id, 'live');
        this.#publish();
        return;
      }
      case 'tasks': {
        if (!doc) {
          const t = this.store.tasks.get(id);
          if (!t) return;
          this.store.deleteTask(id, true);
          if (t.nodeId === this.store.selfId) void this.runner.removeContainer(t);
          this.runner.observed(t);
          return;
        }
        const t = this.store.applyRemoteTask(doc as TaskRecord, json);
        if (t.nodeId === this.store.selfId) this.runner.advance(t);
        if (!snapshot) this.runner.observed(t);
        return;
      }
      case 'taskstatus': {
        if (!doc) return;
        const local = this.store.tasks.get(id);
        if (local && local.nodeId === this.store.selfId) {
          // This node is the one that knows its tasks' state; after a restart etcd may lag behind it.
          this.store.seen(key, json);
          if (snapshot) this.store.saveTask(local);
          return;
        }
        const t = this.store.applyRemoteStatus(id, doc as TaskStatusDoc, json);
        if (!t) return;
        // A task that waited (restart delay, update order) and started on its node wants to run now.
        if (this.#leads && t.desiredState === 'ready' && ['starting', 'running'].includes(t.status.state)) {
          t.desiredState = 'running';
          this.store.touch(t);
          this.store.saveTask(t);
        }
        if (!snapshot) this.runner.observed(t);
        return;
      }
      case 'secrets':
      case 'configs': {
        const blobs = this.blobs[kind === 'secrets' ? 'secret' : 'config'];
        if (!doc) return blobs.applyRemote(id, undefined);
        try {
          const rec = unseal<BlobRecord>(this.#members.files!.dataKey, doc as Sealed);
          this.store.bump(rec.version);
          blobs.applyRemote(id, rec);
        } catch (err) {
          log.warn('a sealed swarm object could not be opened', { key, err: errorMessage(err) });
        }
        return;
      }
      default:
        // networks/ and whatever other parts of Berth keep there (watchDocs).
        this.#docWatchers.get(kind)?.(id, doc);
        return;
    }
  }

  readonly #docWatchers = new Map<string, (id: string, doc: unknown | undefined) => void>();

  /**
   * Other cluster-wide records kept beside the swarm's (e.g. `networks`, for the overlay driver):
   * `putDoc` writes `<kind>/<id>` to etcd (undefined deletes; nothing happens outside a cluster),
   * `watchDocs` hears every such document, from the snapshot at link time and then every change.
   */
  putDoc(kind: string, id: string, doc: unknown | undefined): void {
    const state = this.#members.state;
    if (!state || !this.store.clustered) return;
    if (doc === undefined) state.del(`${kind}/${id}`);
    else state.put(`${kind}/${id}`, doc);
  }

  watchDocs(kind: string, fn: (id: string, doc: unknown | undefined) => void): void {
    this.#docWatchers.set(kind, fn);
  }

  /** A node joined, left, came back, went down or changed: the leader places tasks again. */
  #nodesChanged(): void {
    this.#reconcileAll('live');
    // The overlays' vxlan devices flood to every node there is.
    this.overlay?.sync();
  }

  /** This node was promoted or demoted. */
  #roleChanged(role: 'manager' | 'worker'): void {
    const state = this.#members.state;
    if (!state) return;
    log.info('this node\'s role changed', { role });
    if (role === 'manager') {
      state.campaign(this.store.selfId, this.#heartbeatTtl(), (leading) => this.#onLeadership(leading));
    } else {
      void state.resign();
      this.#onLeadership(false);
    }
    // One change at a time, each for the role the node has by then (a quick demote and promote again).
    this.#membershipChange = this.#membershipChange
      .then(() => this.#memberFor())
      .catch((err) => log.error('changing this node\'s etcd membership failed', { role, err: errorMessage(err) }));
  }

  #membershipChange: Promise<void> = Promise.resolve();

  /** A promoted node becomes an etcd member (learner first), a demoted one leaves etcd's member list. */
  async #memberFor(): Promise<void> {
    const c = this.store.cluster;
    const local = c?.local;
    if (!c || !local || this.d.externalEtcd || this.#closed) return;
    const role = c.node.spec.Role === 'worker' ? 'worker' : 'manager';
    if (role === 'manager' && !local.member) {
      const { clientUrl, ...member } = await this.#members.becomeMember(c.node.id, c.node.addr, c.id);
      local.member = member;
      local.endpoints = [...local.endpoints.filter((e) => e !== clientUrl), clientUrl];
    } else if (role === 'worker' && local.member) {
      const own = Membership.clientUrl(c.node.addr, local.member.clientPort);
      await this.#members.leaveMember(c.node.id);
      local.member = undefined;
      local.endpoints = local.endpoints.filter((e) => e !== own);
    } else {
      return;
    }
    this.store.saveCluster(true);
    log.info('this node\'s etcd membership changed', { role, endpoints: local.endpoints });
  }

  /** For a manager's join: this host's facts as the node's description. */
  #description(): NonNullable<NodeRecord['description']> {
    return { hostname: this.d.host.name, architecture: this.d.host.architecture, ncpu: this.d.host.ncpu, memTotal: this.d.host.memTotal };
  }

  /** Placement of a task: its preset node checked, or the best node found. */
  #place(t: TaskRecord): { node?: NodeRecord; problem?: string } {
    const nodes = t.nodeId ? [this.store.nodes.get(t.nodeId)].filter((n): n is NodeRecord => !!n) : [...this.store.nodes.values()].filter((n) => this.store.nodeUp(n.id));
    return schedule(t, nodes, this.store.tasks.values(), this.d.host);
  }

  /** The leader cleans up after a node that is gone: its tasks to remove are just deleted. */
  #elsewhere(t: TaskRecord): void {
    if (this.#leads && t.desiredState === 'remove' && !this.store.nodeUp(t.nodeId)) {
      this.store.deleteTask(t.id);
      this.runner.observed(t);
    }
  }

  /** Leaving erases the swarm: every task container is removed, as dockerd does. */
  async leave(force: boolean): Promise<void> {
    const c = this.store.cluster;
    if (!c) throw unavailable(NOT_IN_SWARM);
    if (!force && c.node.spec.Role !== 'worker') throw unavailable(LEAVE_MANAGER);
    this.updater.close();
    const state = this.#members.state;
    if (c.local && state) {
      // A manager's etcd member leaves the etcd cluster first, so the others keep their quorum.
      if (c.local.member) {
        try {
          const list = await state.client.cluster.memberList({});
          const me = list.members.find((m) => m.name === c.node.id);
          if (me && list.members.length > 1) await state.client.cluster.memberRemove({ ID: me.ID });
        } catch (err) {
          log.warn('removing this etcd member failed', { err: errorMessage(err) });
        }
      }
      this.#leader = false;
    }
    this.store.attach(undefined);
    for (const b of Object.values(this.blobs)) b.attach(undefined);
    await this.#members.close(true).catch((err) => log.warn('leaving the etcd cluster failed', { err: errorMessage(err) }));
    this.#leader = false;
    this.#leaderId = undefined;
    clearTimeout(this.#graceTimer);
    const tasks = [...this.store.tasks.values()].filter((t) => !t.nodeId || t.nodeId === c.node.id);
    this.store.clear();
    for (const b of Object.values(this.blobs)) b.clear();
    this.#publish();
    await Promise.all(tasks.map((t) => this.runner.removeContainer(t)));
    await this.overlay?.left();
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
    this.cluster();
    return [...this.store.nodes.values()];
  }

  /** By id, name, hostname, then unique id prefix. */
  node(idOrName: string): NodeRecord {
    this.cluster();
    const all = [...this.store.nodes.values()];
    const found =
      this.store.nodes.get(idOrName) ??
      all.find((n) => n.spec.Name === idOrName) ??
      all.find((n) => (n.description?.hostname ?? this.d.host.name) === idOrName) ??
      (idOrName ? uniqueNodePrefix(all, idOrName) : undefined);
    if (!found) throw notFound(`node ${idOrName} not found`);
    return found;
  }

  get host(): HostFacts {
    return this.d.host;
  }

  updateNode(idOrName: string, version: number, spec: NodeSpec): void {
    const n = this.node(idOrName);
    if (version !== n.version) throw conflict('update out of sequence');
    const availability = spec.Availability || 'active';
    if (!['active', 'pause', 'drain'].includes(availability)) throw invalidArgument(`invalid availability: ${availability}`);
    const role = spec.Role || n.spec.Role || 'manager';
    if (role !== 'manager' && role !== 'worker') throw invalidArgument(`invalid role: ${role}`);
    const managers = [...this.store.nodes.values()].filter((x) => x.spec.Role !== 'worker');
    if (role === 'worker' && n.spec.Role !== 'worker' && managers.length <= 1) throw invalidArgument('attempting to demote the last manager of the swarm');
    if (role !== n.spec.Role && !this.store.clustered) throw invalidArgument('attempting to demote the last manager of the swarm');
    const before = n.spec.Role;
    n.spec = { ...(spec.Name ? { Name: spec.Name } : {}), Labels: spec.Labels ?? {}, Role: role, Availability: availability };
    if (role === 'manager' && !n.managerAddr) n.managerAddr = `${n.addr}:2377`;
    this.store.touch(n);
    this.store.saveNode(n);
    if (n.id === this.store.selfId && this.store.clustered && role !== before) this.#roleChanged(role);
    this.#reconcileAll('live');
  }

  /** A node that is down (or any worker, with force) leaves the node list; managers must be demoted first. */
  removeNode(idOrName: string, force = false): void {
    const n = this.node(idOrName);
    if (n.spec.Role !== 'worker') throw invalidArgument(`rpc error: code = FailedPrecondition desc = node ${n.id} is a cluster manager and is a member of the raft cluster. It must be demoted to worker before removal`);
    if (this.nodeReady(n.id) && !force) throw invalidArgument(`rpc error: code = FailedPrecondition desc = node ${n.id} is not down and can't be removed`);
    this.store.deleteNode(n.id);
    this.#reconcileAll('live');
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
    this.#reconcile(s.id, 'live');
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
    if ((dirty || opts.rollback) && !isJob(s.spec)) {
      const kind = opts.rollback ? 'rollback' : 'update';
      // Another manager's update is carried out by the leader, which sees the status in etcd.
      if (this.#leads) this.updater.start(s, kind);
      else this.#markUpdate(s, kind);
    }
    this.#reconcile(s.id, 'live');
    this.#publish();
  }

  /** The service goes at once; its tasks' containers are stopped and removed behind it. */
  removeService(idOrName: string): void {
    const s = this.service(idOrName);
    this.updater.cancel(s.id);
    this.store.deleteService(s.id);
    this.#reconcile(s.id);
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

  /**
   * A task's log records: from its container here, or streamed from the node running it (over the
   * swarm port, with this node's certificate). Empty when the task has no container.
   */
  taskLogRecords(t: TaskRecord, q: TaskLogQuery, signal: AbortSignal): AsyncIterable<LogRecord> | undefined {
    if (!t.nodeId || t.nodeId === this.store.selfId) return t.status.containerId && this.d.containers.find(t.status.containerId) ? containerRecords(this.d.containers, t.status.containerId, q, signal) : undefined;
    const node = this.store.nodes.get(t.nodeId);
    const files = this.#members.files;
    if (!node?.peerAddr || !files || !t.status.containerId) return undefined;
    return remoteTaskRecords(node.peerAddr, files, t.id, q, signal);
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
    this.#reconcile(s.id, 'live');
    this.#publish();
  }

  #markUpdate(s: ServiceRecord, kind: 'update' | 'rollback'): void {
    s.updateStatus = { State: kind === 'update' ? 'updating' : 'rollback_started', StartedAt: new Date().toISOString(), Message: kind === 'update' ? 'update in progress' : 'manually requested rollback' };
    this.store.touch(s);
    this.store.saveService(s);
  }

  #taskChanged(t: TaskRecord): void {
    this.#reconcile(t.serviceId);
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
