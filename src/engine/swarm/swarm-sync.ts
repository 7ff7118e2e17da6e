/**
 * The store as a cache of etcd: local changes go out (held back while etcd is not reached yet after a
 * restart), etcd's snapshot replaces the cache at link time, and every change another node makes
 * comes in through the watch. Secrets and configs travel sealed under the cluster's data key.
 */
import type { BlobRecord } from './secrets.js';
import { errorMessage, internal, unavailable } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { withDeadline } from '../../lib/deadline.js';
import type { Membership } from './cluster/membership.js';
import { seal, unseal, type Sealed } from './cluster/data-key.js';
import type { EtcdState } from './cluster/etcd-state.js';
import { TERM_KEY } from './cluster/etcd-leadership.js';
import { openTokens, sealTokens } from './cluster/sealed-tokens.js';
import { replaceInPlace, sharedCluster, statusKey, type NameChange, type TaskStatusDoc } from './swarm-store.js';
import type { SwarmCore } from './swarm-core.js';
import { NameFitter, nameKey, nameTaken, NAMED_KINDS, type NamedKind } from './swarm-names.js';
import { outOfSequence, type ClusterRecord, type NodeRecord, type ServiceRecord, type TaskRecord } from './swarm-model.js';

/** Records an API call may read, modify and write back (with `services/`, which the leader writes too). */
const RECORDS = new Set(['cluster', 'nodes', 'secrets', 'configs']);
/** How long an API call made right after a restart waits for etcd. */
const LINK_WAIT_MS = 30_000;
const NOT_LINKED = 'this node has not reached the swarm\'s etcd yet';
/**
 * How long after a restart (or an unlock) a manager's reads wait for etcd's state before answering as
 * dockerd's manager does when its raft has had no leader for a while (20 s: dockerd's request timeout).
 * Counted from when the node began linking, not per read: once it has waited that long, reads fail at
 * once, as dockerd's do once swarmkit takes the quorum for lost.
 */
const READ_WAIT_MS = 20_000;
/** swarmkit's lost-quorum error as dockerd passes it on: a plain error through gRPC (code Unknown), so a 500. */
const NO_LEADER =
  "rpc error: code = Unknown desc = The swarm does not have a leader. It's possible that too few managers are online. Make sure more than half of the managers are online.";

/** `services/abc` → ['services', 'abc']; `cluster` → ['cluster', '']. */
function splitKey(key: string): [string, string] {
  const i = key.indexOf('/');
  return i < 0 ? [key, ''] : [key.slice(0, i), key.slice(i + 1)];
}

export class SwarmSync {
  /** Changes made after a restart before etcd answered (key → document, null: deleted). */
  readonly #early = new Map<string, unknown>();
  /**
   * Until the cache holds etcd's state (the snapshot at link time), an API call that changes a record
   * waits (`linked`): its version check and the revision its write compares must be etcd's, not
   * what this node had before (after a restart, or while it was locked). `synced` resolves it.
   */
  #linked: Promise<void> = Promise.resolve();
  #link: (() => void) | undefined;
  /** When this node began linking (reads wait for the link until READ_WAIT_MS after it). */
  #linkingSince = 0;
  /** Tasks decided here as leader that etcd never got (applySnapshot). */
  readonly #unsent = new Set<string>();
  readonly #docWatchers = new Map<string, (id: string, doc: unknown | undefined) => void>();
  /** The leader's fitting of name keys to records an older berthd made (swarm-names.ts). */
  readonly #names: NameFitter;

  constructor(
    private readonly core: SwarmCore,
    private readonly members: Membership,
    /** This node was promoted or demoted (by another manager). */
    private readonly roleChanged: (role: 'manager' | 'worker') => void,
    /** A node record changed on another manager (the leader repairs etcd access then). */
    private readonly nodeChanged: () => void,
  ) {
    this.#names = new NameFitter({
      state: () => this.members.state,
      leads: () => this.core.leads,
      records: () => [
        ...[...core.store.services.values()].map((s) => ({ kind: 'services' as const, id: s.id, name: s.spec.Name ?? '' })),
        ...(['secret', 'config'] as const).flatMap((k) => core.blobs[k].list().map((b) => ({ kind: `${k}s` as const, id: b.id, name: b.spec.Name }))),
        ...(core.overlay?.swarmNetworks() ?? []).map((n) => ({ kind: 'networks' as const, id: n.id, name: n.name })),
      ],
    });
  }

  /** After a restart, until etcd answers: changes are kept, to be sent once it does. */
  holdBack(self: string): void {
    const { store, blobs } = this.core;
    this.#unsynced();
    const notYet = () => Promise.reject(unavailable(NOT_LINKED));
    store.attach({
      put: (k, d) => this.#early.set(k, d),
      del: (k) => this.#early.set(k, null),
      commit: notYet,
      linked: () => this.#waitLinked(),
      nameHeld: async () => true,
      current: () => this.#current(),
      self: () => self,
      leading: () => this.core.leader,
    });
    for (const b of Object.values(blobs)) b.attach((id, rec) => this.#early.set(`${b.kind}s/${id}`, rec ? { sealLater: rec } : null), notYet);
  }

  /** Local changes go to etcd from now on, those held back first. */
  attach(state: EtcdState, self: string): void {
    this.#unsynced();
    for (const [k, d] of this.#early) {
      if (d === null) this.#del(state, self, k);
      else this.#put(state, self, k, d);
    }
    this.#early.clear();
    this.core.store.attach({
      put: (k, d) => this.#put(state, self, k, d),
      del: (k) => this.#del(state, self, k),
      commit: (k, d, name) => this.#commit(state, k, d, name),
      linked: () => this.#waitLinked(),
      nameHeld: (kind, name, holders) => this.#nameHeld(state, kind, name, holders),
      current: () => this.#current(),
      self: () => self,
      leading: () => this.core.leader,
    });
    for (const b of Object.values(this.core.blobs)) {
      const key = (id: string) => `${b.kind}s/${id}`;
      b.attach(
        (id, rec) => (rec ? this.#put(state, self, key(id), { sealLater: rec }) : this.#del(state, self, key(id))),
        (id, rec, name) => this.#commit(state, key(id), rec && { sealLater: rec }, name),
        (name, holders) => this.#nameHeld(state, `${b.kind}s`, name, holders),
      );
    }
  }

  #unsynced(): void {
    if (this.#link) return;
    this.#linked = new Promise<void>((resolve) => (this.#link = resolve));
    this.#linkingSince = Date.now();
  }

  /** Linking starts (again) now: after a restart, or once a locked manager is unlocked. */
  linking(): void {
    if (this.#link) this.#linkingSince = Date.now();
  }

  /**
   * Resolves once the cache holds etcd's state (at once when it does: no timer for every API change),
   * dockerd's 503 if it does not within LINK_WAIT_MS.
   */
  #waitLinked(): Promise<void> {
    if (!this.#link) return Promise.resolve();
    return withDeadline(this.#linked, LINK_WAIT_MS, () => unavailable(NOT_LINKED));
  }

  /** Resolves once the cache holds etcd's state; dockerd's no-leader error if it does not within READ_WAIT_MS of linking. */
  #current(): Promise<void> {
    if (!this.#link) return Promise.resolve();
    return withDeadline(this.#linked, Math.max(0, this.#linkingSince + READ_WAIT_MS - Date.now()), () => internal(NO_LEADER));
  }

  /** The cache holds etcd's state now: API changes go ahead. */
  synced(): void {
    this.#link?.();
    this.#link = undefined;
  }

  /**
   * A queued write, guarded as its kind says (cluster/etcd-writes.ts). The leader's decisions
   * (`tasks/`, other nodes' task status, a service's changes outside the API: its update's progress,
   * a rollback) hold only while it leads; records an API call may change too (`cluster`, `nodes/`,
   * `secrets/`, `configs/`, and `services/`) only while etcd holds them at the revision the cache
   * does. A leader's decision this node makes without leading is not sent: the cache takes etcd's.
   */
  #put(state: EtcdState, self: string, key: string, doc: unknown): void {
    const [kind, rest] = splitKey(key);
    const leaders = kind === 'tasks' || kind === 'services' || (kind === 'taskstatus' && !rest.startsWith(`${self}/`));
    const term = state.term;
    if (leaders && !term) return state.reread([key]);
    const base = kind === 'services' || RECORDS.has(kind) ? state.revisionOf(key) : undefined;
    const out = this.#encode(key, doc);
    if (out !== undefined) state.put(key, out, { term: leaders ? term : undefined, base });
  }

  /** Deletes the leader's decisions only while it leads; others (an API call's removal) as they come. */
  #del(state: EtcdState, self: string, key: string): void {
    const [kind, rest] = splitKey(key);
    if (kind !== 'tasks' && !(kind === 'taskstatus' && !rest.startsWith(`${self}/`))) return state.del(key);
    const term = state.term;
    if (!term) return state.reread([key]);
    state.del(key, { term });
  }

  /**
   * An API call's change, compared with the revision the cache holds the key at; a creation takes
   * its name in the same transaction (swarm-names.ts). A removal (`doc` undefined) compares nothing,
   * as dockerd's removals take no version, and frees its name with it.
   */
  async #commit(state: EtcdState, key: string, doc: unknown | undefined, name: NameChange = {}): Promise<void> {
    const [kind, id] = splitKey(key);
    const named = (NAMED_KINDS as readonly string[]).includes(kind) ? (kind as NamedKind) : undefined;
    const hold = (n: string | undefined) => (named && n !== undefined ? { key: nameKey(named, n), id } : undefined);
    const out = doc === undefined ? undefined : this.#encode(key, doc);
    if (doc === undefined) this.#names.forgotten(kind, id); // this node's removal: no more to fit
    if (doc !== undefined && out === undefined) throw unavailable('this node cannot write that record: it holds no data key');
    let outcome;
    try {
      outcome = await state.commit(key, out, doc === undefined ? { frees: hold(name.frees) } : { base: state.revisionOf(key), takes: hold(name.takes) });
    } catch (err) {
      throw unavailable(`the swarm's etcd did not answer: ${errorMessage(err)}`);
    }
    if (outcome.landed) return;
    if (outcome.why === 'taken' && named && name.takes !== undefined) throw nameTaken(named, name.takes);
    throw outcome.why === 'conflict' ? outOfSequence() : unavailable(`etcd refused the change (${outcome.why})`);
  }

  /** See SwarmStore.nameHeld. etcd out of reach: the cache's word stands (a create would fail there anyway). */
  async #nameHeld(state: EtcdState, kind: NamedKind, name: string, holders: string[]): Promise<boolean> {
    return state.anyExists([nameKey(kind, name), ...holders.map((id) => `${kind}/${id}`)]).catch(() => true);
  }

  /**
   * What goes to etcd for a document: the cluster's with its join tokens sealed, secrets and configs
   * (`sealLater`) sealed whole; undefined when this node holds no data key to seal them with (only
   * managers write them, a promoted one once it has the key).
   */
  #encode(key: string, doc: unknown): unknown | undefined {
    const dataKey = this.members.files?.dataKey;
    if (doc && typeof doc === 'object' && 'sealLater' in doc) {
      if (dataKey) return seal(dataKey, (doc as { sealLater: unknown }).sealLater);
      log.warn('a secret or config was not shared: this node holds no data key', { key });
      return undefined;
    }
    if (key !== 'cluster') return doc;
    return sealTokens(dataKey, doc as ClusterRecord);
  }

  /** A node that just got the data key opens the join tokens, secrets, configs and managers' keys etcd holds. */
  async openBlobs(state: EtcdState): Promise<string> {
    const snap = await state.snapshot();
    for (const [key, doc] of snap.entries) if (key === 'cluster' || /^(secrets|configs|keys)\//.test(key)) this.onRemote(key, doc, true);
    return snap.revision;
  }

  /** Replaces the cache with etcd's state (at link time: what this node missed meanwhile). */
  applySnapshot(entries: Map<string, unknown>): void {
    const { store, blobs } = this.core;
    const keep = { services: new Set<string>(), tasks: new Set<string>(), nodes: new Set<string>(), secrets: new Set<string>(), configs: new Set<string>() };
    store.alive.clear();
    for (const [key, doc] of entries) {
      const [kind, id] = splitKey(key);
      if (kind in keep) keep[kind as keyof typeof keep].add(id);
      this.onRemote(key, doc, true);
    }
    // Something here that etcd lacks was deleted meanwhile, or is a decision etcd never took (this
    // node crashed, or lost the lead, first): no longer anybody's, the leader decides again. An API
    // call's change is in etcd before its answer. But the decisions of the last leader that crashed
    // before etcd had them (newer than anything etcd holds) are kept, to be sent if it leads again
    // before any other node does (`leads`), as they were shown: dropped once another leads.
    let newest = 0;
    for (const doc of entries.values()) newest = Math.max(newest, Number((doc as { version?: number } | undefined)?.version ?? 0));
    const lastLeader = (entries.get(TERM_KEY) as { node?: string } | undefined)?.node;
    this.#unsent.clear();
    for (const s of [...store.services.values()]) if (!keep.services.has(s.id)) store.deleteService(s.id, true);
    for (const t of [...store.tasks.values()]) {
      if (keep.tasks.has(t.id)) continue;
      if (lastLeader === store.selfId && t.version > newest && store.services.has(t.serviceId)) {
        this.#unsent.add(t.id);
        continue;
      }
      store.deleteTask(t.id, true);
      this.#dropOwn(t);
    }
    for (const id of [...store.nodes.keys()]) if (!keep.nodes.has(id) && id !== store.selfId) store.deleteNode(id, true);
    for (const kind of ['secret', 'config'] as const) for (const id of blobs[kind].ids()) if (!keep[`${kind}s`].has(id)) blobs[kind].applyRemote(id, undefined);
    // This node's tasks go on from the state as a whole: one advanced as its record came in may have
    // waited for a task whose status came in after it (`tasks/` sorts before `taskstatus/`).
    for (const t of store.tasks.values()) if (t.nodeId === store.selfId) this.core.runner.advance(t);
    this.core.publish();
  }

  /** This node leads (before it decides anything): the decisions etcd never got go out now. */
  leads(): void {
    this.#names.fitAll();
    const { store } = this.core;
    for (const id of this.#unsent) {
      const t = store.tasks.get(id);
      if (t) store.saveTask(t);
    }
    if (this.#unsent.size) log.info('sent the task decisions etcd had not taken before this node stopped', { tasks: this.#unsent.size });
    this.#unsent.clear();
  }

  /** Another node leads: the decisions etcd never got are not this node's to make any more. */
  otherLeads(): void {
    const { store, runner } = this.core;
    for (const id of this.#unsent) {
      const t = store.tasks.get(id);
      if (!t) continue;
      store.deleteTask(id, true);
      this.#dropOwn(t);
      runner.observed(t);
    }
    this.#unsent.clear();
  }

  /**
   * A task of this node's that etcd holds no record of (any more) goes: its container, and the status
   * this node reported (etcd may have it without the record: a deposed leader's own task, placed on
   * itself, whose record etcd refused).
   */
  #dropOwn(t: TaskRecord): void {
    if (t.nodeId !== this.core.store.selfId) return;
    void this.core.runner.discard(t);
    this.members.state?.del(statusKey(t));
  }

  /** A change another node made (or, with `snapshot`, the state as etcd holds it). */
  onRemote(key: string, doc: unknown, snapshot: boolean): void {
    const { store, runner, updater } = this.core;
    const [kind, id] = splitKey(key);
    const json = doc === undefined ? '' : JSON.stringify(doc);
    if (doc === undefined) this.#names.forgotten(kind, id); // another's removal: no more to fit
    switch (kind) {
      case 'cluster': {
        const c = store.cluster;
        if (!c || !doc) return;
        const { sealedJoinTokens: _sealed, ...shared } = doc as ClusterRecord & { sealedJoinTokens?: unknown };
        let opened;
        try {
          opened = openTokens(this.members.files?.dataKey, doc as ClusterRecord);
        } catch (err) {
          log.warn('the join tokens could not be opened', { err: errorMessage(err) });
          opened = { tokens: c.joinTokens, plain: false };
        }
        const next = sharedCluster({ ...shared, joinTokens: opened.tokens, node: c.node } as ClusterRecord);
        // As etcd holds it: a shared field its document lacks goes here too (`etcdAuth` where an
        // older berthd wrote it), or this node would take its own record for what etcd holds.
        for (const k of Object.keys(sharedCluster(c))) if (!(k in next) && k !== 'unlockKey') delete (c as unknown as Record<string, unknown>)[k];
        Object.assign(c, next);
        store.bump(shared.version);
        // Remembered as this node would write it (sealing differs each time): no echo back. A manager
        // seals a document from before that holds the tokens plain.
        store.seen('cluster', opened.plain && this.members.files?.dataKey ? '' : JSON.stringify(sharedCluster(c)));
        store.saveCluster(!(opened.plain && this.members.files?.dataKey));
        return;
      }
      case 'nodes': {
        if (doc) {
          const n = doc as NodeRecord;
          const wasRole = store.cluster?.node.id === id ? store.cluster.node.spec.Role : undefined;
          store.seen(key, json);
          store.bump(n.version);
          store.saveNode(n, true);
          if (wasRole && wasRole !== n.spec.Role) this.roleChanged(n.spec.Role ?? 'worker');
        } else {
          store.deleteNode(id, true);
        }
        if (!snapshot) {
          this.nodeChanged();
          this.#nodesChanged();
        }
        return;
      }
      case 'alive':
        if (doc) store.alive.add(id);
        else store.alive.delete(id);
        if (!snapshot) this.#nodesChanged();
        return;
      case 'services': {
        if (!doc) {
          updater.cancel(id);
          store.deleteService(id, true);
          this.core.reconcile(id);
          this.core.publish();
          return;
        }
        const incoming = doc as ServiceRecord;
        const s = store.services.get(id);
        if (s) replaceInPlace(s, incoming);
        store.seen(key, json);
        store.bump(incoming.version);
        store.saveService(s ?? incoming, true);
        if (!snapshot) this.#names.heard(kind, id, incoming.spec.Name ?? '');
        const state = (s ?? incoming).updateStatus?.State;
        if (this.core.leads && !snapshot && (state === 'updating' || state === 'rollback_started') && !updater.isRunning(id)) updater.resume(s ?? incoming);
        if (!snapshot) this.core.reconcile(id, 'live');
        this.core.publish();
        return;
      }
      case 'tasks': {
        if (!doc) {
          const t = store.tasks.get(id);
          if (!t) return;
          store.deleteTask(id, true);
          this.#dropOwn(t);
          runner.observed(t);
          return;
        }
        const t = store.applyRemoteTask(doc as TaskRecord, json);
        if (t.nodeId === store.selfId) runner.advance(t);
        if (!snapshot) runner.observed(t);
        return;
      }
      case 'taskstatus': {
        if (!doc) return;
        // `<node>/<task>`, or `<task>` as clusters from before keep it.
        const taskId = id.slice(id.lastIndexOf('/') + 1);
        const local = store.tasks.get(taskId);
        if (local && local.nodeId === store.selfId) {
          // This node is the one that knows its tasks' state; after a restart etcd may lag behind it.
          store.seen(key, json);
          if (snapshot) store.saveTask(local);
          return;
        }
        const t = store.applyRemoteStatus(key, taskId, doc as TaskStatusDoc, json);
        if (!t) return;
        // A task that waited (restart delay, update order) and started on its node wants to run now.
        if (this.core.leads && t.desiredState === 'ready' && ['starting', 'running'].includes(t.status.state)) {
          t.desiredState = 'running';
          store.touch(t);
          store.saveTask(t);
        }
        if (!snapshot) runner.observed(t);
        // A task to remove whose node reports it gone: the leader deletes its record.
        if (this.core.leads && t.desiredState === 'remove') runner.advance(t);
        return;
      }
      case 'secrets':
      case 'configs': {
        const blobs = this.core.blobs[kind === 'secrets' ? 'secret' : 'config'];
        if (!doc) return blobs.applyRemote(id, undefined);
        // A worker holds no data key: managers open its tasks' secrets and configs for it.
        const dataKey = this.members.files?.dataKey;
        if (!dataKey) return;
        try {
          const rec = unseal<BlobRecord>(dataKey, doc as Sealed);
          store.bump(rec.version);
          blobs.applyRemote(id, rec);
          if (!snapshot) this.#names.heard(kind, id, rec.spec.Name);
        } catch (err) {
          log.warn('a sealed swarm object could not be opened', { key, err: errorMessage(err) });
        }
        return;
      }
      default:
        // networks/ and whatever other parts of Berth keep there (watchDocs).
        this.#docWatchers.get(kind)?.(id, doc);
        if (doc && !snapshot) this.#names.heard(kind, id, String((doc as { name?: unknown }).name ?? ''));
        return;
    }
  }

  /**
   * Other cluster-wide records kept beside the swarm's (e.g. `networks`, for the overlay driver):
   * `putDoc` writes `<kind>/<id>` to etcd (undefined deletes; nothing happens outside a cluster),
   * `watchDocs` hears every such document, from the snapshot at link time and then every change.
   */
  putDoc(kind: string, id: string, doc: unknown | undefined): void {
    const state = this.members.state;
    if (!state || !this.core.store.clustered) return;
    if (doc === undefined) state.del(`${kind}/${id}`);
    else state.put(`${kind}/${id}`, doc);
  }

  /**
   * An API call's change of such a document, answered once etcd took it, taking or freeing its name
   * as swarm-names.ts says (`networks`); nothing happens outside a cluster.
   */
  async commitDoc(kind: string, id: string, doc: unknown | undefined, name: NameChange): Promise<void> {
    const state = this.members.state;
    if (!state || !this.core.store.clustered) return;
    await this.#commit(state, `${kind}/${id}`, doc, name);
  }

  watchDocs(kind: string, fn: (id: string, doc: unknown | undefined) => void): void {
    this.#docWatchers.set(kind, fn);
  }

  /** A node joined, left, came back, went down or changed: the leader places tasks again. */
  #nodesChanged(): void {
    this.core.reconcileAll('live');
    // The overlays' vxlan devices flood to every node there is.
    this.core.overlay?.sync();
  }
}
