/**
 * This node's place in a cluster: init, join (and a manager's side of it, admitting a node), leave,
 * the link to etcd after each of those and after a restart, leadership, and promotion or demotion as
 * etcd membership. Certificates, the etcd member and the join listener are cluster/membership.ts's.
 */
import { isIP } from 'node:net';
import { join } from 'node:path';
import { errorMessage, invalidArgument, isKind, unavailable } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { advertiseOf, listenOf, newCluster, type InitRequest } from './cluster.js';
import { newJoinTokens, newSwarmId } from './swarm-ids.js';
import { Membership } from './cluster/membership.js';
import { caDigest } from './cluster/pki.js';
import { askToJoin, freeSwarmPort, malformedPort, roleOfToken, sourceAddressFor, tokenDigest, type JoinAnswer, type JoinAsk } from './cluster/join-protocol.js';
import { splitRemote } from './cluster/peer-tls.js';
import type { EtcdState } from './cluster/etcd-state.js';
import { sharedCluster } from './swarm-store.js';
import { SwarmPeers } from './swarm-peers.js';
import type { ClaimStore } from './overlay-addresses.js';
import { SwarmRoles } from './swarm-roles.js';
import type { BlobData } from './task-files.js';
import { NO_TOKENS } from './cluster/sealed-tokens.js';
import { roleOfNode, workerReadRanges, type NodeRole } from './cluster/etcd-auth.js';
import { SwarmAccess } from './swarm-access.js';
import { NOT_MANAGER, SwarmPart, type SwarmCore } from './swarm-core.js';
import { SwarmSync } from './swarm-sync.js';
import { KEYS_KIND, ManagerKeys } from './cluster/manager-keys.js';
import { certSeconds } from './node-certs.js';
import { type ClusterLocal, type ClusterRecord, type NodeRecord, type NodeSpec, type TaskRecord } from './swarm-model.js';
import { hostPart } from './cluster/etcd-member.js';

const ALREADY_IN_SWARM = 'This node is already part of a swarm. Use "docker swarm leave" to leave this swarm and join another one.';
const NOT_IN_SWARM = 'This node is not part of a swarm';
const BAD_TOKEN = 'rpc error: code = InvalidArgument desc = A valid join token is necessary to join this cluster';
const LEAVE_LOCKED = 'Swarm is encrypted and locked. Please unlock it first or use `--force` to ignore this message.';
const LEAVE_MANAGER =
  'You are attempting to leave the swarm on a node that is participating as a manager. Removing the last manager erases all current state of the swarm. Use `--force` to ignore this message.';

/** An address as the host of `host:port` (an IPv6 one bracketed). */

export class SwarmMembership extends SwarmPart {
  /** Certificates, etcd and the join listener of this node's cluster. */
  readonly members: Membership;
  /** The store kept as a cache of etcd. */
  readonly sync: SwarmSync;
  /** The keys only managers hold (the CA key, the data key, the unlock key). */
  readonly keys: ManagerKeys;
  /** Requests between nodes: task logs and secrets, managers' keys, node certificates. */
  readonly #peers: SwarmPeers;
  /** Leadership, promotion and demotion. */
  readonly roles: SwarmRoles;
  /** Nodes' etcd users, members and claims kept in step with their records. */
  readonly access: SwarmAccess;
  #joining = false;

  constructor(core: SwarmCore) {
    super(core);
    const { d } = core;
    this.members = new Membership(join(d.containers.dataRoot, 'swarm', 'cluster'), join(d.execRoot, 'swarm'), d.externalEtcd, (ask) => this.#admit(ask), (req, res) => this.#peers.serve(req, res));
    this.access = new SwarmAccess(core, this.members);
    this.sync = new SwarmSync(core, this.members, (role) => this.roleChanged(role), () => this.access.repair());
    this.keys = new ManagerKeys(this.members);
    this.#peers = new SwarmPeers(core, this.members, this.keys);
    this.roles = new SwarmRoles(core, this.members, this.keys, this.#peers, this.sync, this.access);
    this.sync.watchDocs(KEYS_KIND, (id, doc) => this.keys.heard(id, doc));
  }

  /** After a restart in a cluster: changes wait for etcd, which is reached in the background. */
  resume(): void {
    this.sync.holdBack(this.store.cluster!.node.id);
    // A manager of an auto-locked swarm: its keys stay sealed until `docker swarm unlock`.
    if (this.members.lockedOnDisk()) this.core.locked = true;
  }

  /** Reconnects to etcd after a restart (once the store is loaded and the node's own tasks are synced). */
  reconnect(): void {
    if (this.core.locked) return void log.info('the swarm is locked: this manager waits for "docker swarm unlock"');
    this.sync.linking();
    void this.#rejoin().catch((err) => log.error('reconnecting to the swarm failed', { err: errorMessage(err) }));
  }

  /** This node was promoted or demoted: its roles, and its certificate's. */
  roleChanged(role: 'manager' | 'worker'): void {
    this.roles.roleChanged(role);
    this.#peers.certs.roleChanged();
  }

  /** Resolves once the etcd client is closed (its queued writes flushed, leadership resigned). */
  async close(): Promise<void> {
    this.#peers.certs.stop();
    this.roles.stopGrace();
    await this.members.close(false);
  }

  /**
   * A new cluster with this node as its manager: a CA and this node's certificate, an etcd member
   * (or the external etcd), the cluster's first documents, the join listener on the swarm port.
   */
  async init(req: InitRequest): Promise<string> {
    if (this.store.cluster || this.#joining) throw unavailable(ALREADY_IN_SWARM);
    this.#refuseDamaged();
    const cluster = newCluster(req);
    const listen = listenOf(req);
    this.#joining = true;
    try {
      const node = cluster.node;
      node.description = this.#description();
      const files = await this.members.create({ nodeId: node.id, role: 'manager', clusterId: cluster.id, ips: [node.addr], seconds: certSeconds(cluster) });
      cluster.caCert = files.ca;
      cluster.joinTokens = newJoinTokens(caDigest(files.ca));
      const local: ClusterLocal = { endpoints: [], listenHost: listen.host, listenPort: listen.port };
      if (this.d.externalEtcd) {
        local.endpoints = this.d.externalEtcd.endpoints;
      } else {
        const ports = await this.members.memberPorts(node.addr);
        local.member = { ...ports, initialCluster: Membership.initialCluster(node.id, node.addr, ports.peerPort), initialState: 'new' };
        local.endpoints = [Membership.clientUrl(node.addr, ports.clientPort)];
        await this.members.startMember(node.id, node.addr, cluster.id, local.member);
      }
      const state = await this.members.connect(node.id, local.endpoints);
      const existing = await state.snapshot();
      if (existing.entries.has('cluster')) throw unavailable('the etcd already holds a swarm: join it instead');
      const port = await this.members.serveJoins(listen.host, listen.port, true);
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
      await this.core.overlay?.createIngress().catch((err) => log.warn('creating the ingress network failed', { err: errorMessage(err) }));
      log.info('swarm initialized', { cluster: cluster.id, node: node.id, etcd: local.endpoints });
      return node.id;
    } catch (err) {
      await this.members.close(true).catch(() => undefined);
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
    this.#refuseDamaged();
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
      const { key, csr } = await this.members.newCsr();
      const ports = this.d.externalEtcd ? undefined : await this.members.memberPorts(addr);
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
      await this.members.adopt(answer, key);
      const node = answer.node as NodeRecord;
      const cluster = { ...(answer.cluster as ClusterRecord), node } as ClusterRecord;
      const local: ClusterLocal = { endpoints: answer.endpoints, listenHost: listen.host, listenPort: listen.port };
      if (answer.role === 'manager' && answer.initialCluster && ports) {
        local.member = { ...ports, initialCluster: answer.initialCluster, initialState: 'existing' };
        // The new member is a learner until promoted: the others answer first.
        local.endpoints = [...answer.endpoints, Membership.clientUrl(addr, ports.clientPort)];
        await this.members.startMember(node.id, addr, cluster.id, local.member);
      }
      const state = await this.members.connect(node.id, local.endpoints, 30_000);
      if (local.member) await this.members.promoteSelf(Membership.peerUrl(addr, local.member.peerPort), 60_000);
      // Workers listen too: managers ask them for their tasks' logs there.
      local.listenPort = await this.members.serveJoins(listen.host, listen.port, answer.role === 'manager');
      if (answer.role === 'manager') node.managerAddr = `${addr.includes(':') ? `[${addr}]` : addr}:${local.listenPort}`;
      node.peerAddr = `${addr.includes(':') ? `[${addr}]` : addr}:${local.listenPort}`;
      cluster.local = local;
      this.store.cluster = cluster;
      this.store.nodes.clear();
      this.store.nodes.set(node.id, node);
      await this.#link(state, answer.role === 'manager');
      log.info('joined the swarm', { cluster: cluster.id, node: node.id, role: answer.role });
    } catch (err) {
      await this.members.close(true).catch(() => undefined);
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
    const files = this.members.files;
    if (!c || !files || c.node.spec.Role !== 'manager') throw unavailable(NOT_MANAGER);
    // Just promoted, this manager may not have opened the sealed tokens yet.
    if (!c.joinTokens.worker && this.members.state) await this.sync.openBlobs(this.members.state);
    const role = roleOfToken(ask.token, c.joinTokens);
    if (!role) throw invalidArgument(BAD_TOKEN);
    if (typeof ask.addr !== 'string' || !isIP(ask.addr) || typeof ask.csr !== 'string') throw invalidArgument('malformed join request');
    const badPort = malformedPort(ask);
    if (badPort) throw invalidArgument(`malformed join request: ${badPort} is no port`);
    const nodeId = newSwarmId();
    await this.keys.ensureCaKey();
    const cert = await this.members.sign(ask.csr, { nodeId, role, clusterId: c.id, ips: [ask.addr], seconds: certSeconds(c) });
    const state = this.members.state!;
    let endpoints = c.local?.endpoints ?? [];
    let initialCluster: string | undefined;
    let addedMember: string | undefined;
    if (!this.d.externalEtcd) {
      const members = await state.client.cluster.memberList({});
      endpoints = members.members.flatMap((m) => m.clientURLs);
      if (role === 'manager') {
        if (!ask.peerPort || !ask.clientPort) throw invalidArgument('malformed join request: no etcd ports');
        // As a learner first: it counts for the quorum only once it runs and has caught up (the joiner
        // promotes itself then), so a join that fails midway never costs the cluster its quorum.
        const added = await state.client.cluster.memberAdd({ peerURLs: [Membership.peerUrl(ask.addr, ask.peerPort)], isLearner: true });
        addedMember = added.member.ID;
        state.readMembers();
        initialCluster = added.members.map((m) => `${m.ID === added.member.ID ? nodeId : m.name}=${m.peerURLs[0]}`).join(',');
      }
    }
    const now = new Date().toISOString();
    const node: NodeRecord = {
      id: nodeId, version: 0, createdAt: now, updatedAt: now,
      spec: { Labels: {}, Role: role, Availability: (ask.availability || 'active') as NodeSpec['Availability'] },
      addr: ask.addr,
      managerAddr: role === 'manager' ? `${hostPart(ask.addr)}:${ask.listenPort || 2377}` : '',
      peerAddr: `${hostPart(ask.addr)}:${ask.listenPort || 2377}`,
      description: { hostname: String(ask.hostname), architecture: String(ask.architecture), ncpu: Number(ask.ncpu) || 1, memTotal: Number(ask.memTotal) || 0 },
    };
    try {
      this.store.touch(node);
      this.store.saveNode(node);
      await state.flushed();
      // Its etcd user after its record (the leader's repair drops users without one), before the
      // answer: the node reaches etcd with its certificate as soon as it has it.
      await this.access.auth(state)?.setNode(nodeId, role);
    } catch (err) {
      // The learner added for it goes with the refusal: etcd takes one learner at a time, and one
      // that never starts would refuse every later manager's join and promotion.
      if (addedMember !== undefined) await state.client.cluster.memberRemove({ ID: addedMember }).catch(() => undefined);
      throw err;
    }
    log.info('node joined', { node: nodeId, role, addr: ask.addr });
    return {
      nodeId, role, cert, ca: files.ca, ...(role === 'manager' && files.caKey ? { caKey: files.caKey } : {}),
      ...(role === 'manager' && files.dataKey ? { dataKey: files.dataKey.toString('base64') } : {}), endpoints, ...(initialCluster ? { initialCluster } : {}),
      ...(this.d.externalEtcd ? { externalEtcd: true } : {}),
      // A worker holds no join token (a manager's could promote it).
      cluster: role === 'manager' ? sharedCluster(c) : { ...sharedCluster(c), joinTokens: { ...NO_TOKENS } }, node,
    };
  }


  /** After a restart: the member, the client, the state again, then heartbeats and the campaign. */
  async #rejoin(): Promise<void> {
    const c = this.store.cluster!;
    const local = c.local!;
    await this.members.load();
    if (local.member) await this.members.startMember(c.node.id, c.node.addr, c.id, local.member);
    // etcd may have no quorum for a while yet (its other managers still down): tried again, with a
    // growing pause, until it answers, this node leaves, or berthd stops.
    let state: EtcdState | undefined;
    for (let pause = 1000; !state; pause = Math.min(pause * 2, 30_000)) {
      try {
        state = await this.members.connect(c.node.id, local.endpoints, 60_000);
      } catch (err) {
        if (this.core.closed || this.store.cluster !== c) return;
        log.warn('etcd does not answer yet; trying again', { err: errorMessage(err), inMs: pause });
        await new Promise((r) => setTimeout(r, pause));
        if (this.core.closed || this.store.cluster !== c) return;
      }
    }
    if (this.core.closed || this.store.cluster !== c) return;
    // A join cut short before its member was promoted finishes here.
    if (local.member && !this.d.externalEtcd) await this.members.promoteSelf(Membership.peerUrl(c.node.addr, local.member.peerPort), 60_000).catch((err) => log.warn('promoting this etcd member failed', { err: errorMessage(err) }));
    // A port taken meanwhile costs this node its listener (joins through it, its tasks' logs), not the cluster.
    await this.members.serveJoins(local.listenHost, local.listenPort, c.node.spec.Role === 'manager').catch((err) => log.error('the swarm port cannot be served', { err: errorMessage(err) }));
    await this.#link(state, c.node.spec.Role === 'manager');
  }

  /**
   * Ties the store to etcd: local changes go out, the cluster's state comes in (a snapshot, then the
   * watch), the heartbeat starts, managers campaign for leadership.
   */
  async #link(state: EtcdState, manager: boolean): Promise<void> {
    const c = this.store.cluster!;
    const self = c.node.id;
    // An unlock key (init --autolock) goes to etcd sealed, never plain in the cluster's record.
    const unlockKey = manager ? c.unlockKey : '';
    c.unlockKey = '';
    this.sync.attach(state, self);
    // A worker reads what etcd lets it (etcd-auth.ts), range by range.
    state.restrictReads(manager ? undefined : workerReadRanges(state.prefix));
    // The first manager writes the cluster and its node; joins and restarts read what etcd holds.
    const before = await state.snapshot(undefined, true);
    // etcd's auth goes on once: at init, or at the first manager link of a cluster from before.
    if (manager && !(before.entries.get('cluster') as ClusterRecord | undefined)?.etcdAuth) await this.#enableAuth(state, before.entries);
    if (manager && !before.entries.has('cluster')) this.store.saveCluster();
    if (manager) this.keys.share(state, before.entries);
    else await this.roles.dropKeys();
    if (!before.entries.has(`nodes/${self}`)) this.store.saveNode(c.node);
    await state.flushed();
    const snap = await state.snapshot(undefined, true);
    this.sync.applySnapshot(snap.entries);
    this.sync.synced();
    // A snapshot without `keys/unlock` is not heard as a change: auto-lock turned off while this
    // manager was away (or locked) leaves its files sealed unless looked at here.
    if (manager) void this.keys.applyLock();
    if (unlockKey) await this.keys.setUnlockKey(state, unlockKey);
    await state.watch(snap.revision, (key, doc) => this.sync.onRemote(key, doc, false));
    // The members as etcd lists them, now and whenever they change, are remembered for this node's
    // next start (it knew only the members of its join, or of its init: its own).
    if (!this.d.externalEtcd) {
      state.onMembers((urls) => {
        if (this.store.cluster !== c || !c.local) return;
        c.local.endpoints = urls;
        this.store.saveCluster(true);
      });
    }
    state.heartbeat(self, this.roles.heartbeatTtl());
    void state.observeLeader((id) => {
      this.core.leaderId = id;
      if (id && id !== self) this.sync.otherLeads();
    }).catch((err) => log.warn('observing the swarm leader failed', { err: errorMessage(err) }));
    if (manager) state.campaign(self, this.roles.campaignTtl(), (term) => this.roles.onLeadership(term));
    this.#peers.certs.start();
    // Answer once this node shows as ready, and a manager once there is a leader (this one, after init).
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && !(this.store.alive.has(self) && (!manager || this.core.leaderId !== undefined))) await new Promise((r) => setTimeout(r, 20));
  }

  /** A manager linking turns etcd's auth on (a cluster from before too), with a user for every node. */
  async #enableAuth(state: EtcdState, entries: Map<string, unknown>): Promise<void> {
    const auth = this.access.auth(state);
    if (!auth) return;
    const nodes = new Map<string, NodeRole>([[this.store.selfId, 'manager']]);
    for (const [key, doc] of entries) {
      const role = key.startsWith('nodes/') ? roleOfNode(doc) : undefined;
      if (role) nodes.set(key.slice(6), role);
    }
    try {
      await auth.enable([...nodes].map(([id, role]) => ({ id, role })));
      const c = this.store.cluster!;
      // The flag goes on the cluster's document as etcd holds it (the write compares its revision).
      if (entries.has('cluster')) this.sync.onRemote('cluster', entries.get('cluster'), true);
      c.etcdAuth = true;
      if (entries.has('cluster')) this.store.saveCluster();
    } catch (err) {
      log.error('turning on etcd auth failed', { err: errorMessage(err) });
    }
  }

  /** A manager here changed a node (`role`: its role, or removed it): its etcd access follows before the API answers. */
  nodeChanged(id: string, role: boolean): Promise<void> {
    return this.access.nodeChanged(id, role);
  }

  /** Where this node's address claims go (a worker's through a manager), undefined outside a cluster. */
  claimStore(): ClaimStore | undefined {
    return this.#peers.claimStore();
  }

  /** A task's secrets and configs: from this node's store, or (a worker) opened by a manager. */
  taskData(t: TaskRecord): Promise<BlobData> {
    return this.#peers.taskData(t);
  }

  /** For a manager's join: this host's facts as the node's description. */
  #description(): NonNullable<NodeRecord['description']> {
    return { hostname: this.d.host.name, architecture: this.d.host.architecture, ncpu: this.d.host.ncpu, memTotal: this.d.host.memTotal };
  }


  /** A stored cluster row that did not read may still be a membership: init and join would overwrite it. */
  #refuseDamaged(): void {
    const damaged = this.store.unreadable.clusterError();
    if (damaged) throw damaged;
  }

  /** Leaving erases the swarm: every task container is removed, as dockerd does. */
  async leave(force: boolean): Promise<void> {
    const c = this.store.cluster;
    if (!c && this.store.unreadable.clusterError()) {
      if (!force) this.#refuseDamaged();
      const tasks = [...this.store.tasks.values()];
      this.store.clear();
      for (const b of Object.values(this.blobs)) b.clear();
      await Promise.all(tasks.map((t) => this.runner.removeContainer(t)));
      // Its etcd data, certificates and keys go as in any leave.
      await this.members.close(true).catch((err) => log.warn('leaving the etcd cluster failed', { err: errorMessage(err) }));
      await this.core.files.clear().catch((err) => log.warn('removing task files failed', { err }));
      log.warn('left a swarm whose stored state was damaged', { tasks: tasks.length });
      return;
    }
    if (!c) throw unavailable(NOT_IN_SWARM);
    if (!force && this.core.locked) throw unavailable(LEAVE_LOCKED);
    if (!force && c.node.spec.Role !== 'worker') throw unavailable(LEAVE_MANAGER);
    this.core.locked = false;
    this.#peers.certs.stop();
    this.updater.close();
    await this.core.overlay?.addresses.leaving();
    const state = this.members.state;
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
      this.core.leader = false;
    }
    this.store.attach(undefined);
    for (const b of Object.values(this.blobs)) b.attach(undefined);
    await this.members.close(true).catch((err) => log.warn('leaving the etcd cluster failed', { err: errorMessage(err) }));
    this.core.leader = false;
    this.core.leaderId = undefined;
    this.roles.stopGrace();
    const tasks = [...this.store.tasks.values()].filter((t) => !t.nodeId || t.nodeId === c.node.id);
    this.store.clear();
    for (const b of Object.values(this.blobs)) b.clear();
    this.core.publish();
    await Promise.all(tasks.map((t) => this.runner.removeContainer(t)));
    await this.core.overlay?.left();
    await this.core.files.clear().catch((err) => log.warn('removing task files failed', { err }));
    log.info('left the swarm', { tasks: tasks.length });
  }

}
