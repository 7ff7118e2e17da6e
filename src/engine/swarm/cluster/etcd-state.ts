/**
 * The cluster's state in etcd, under one prefix: `cluster`, `nodes/<id>`, `services/<id>`,
 * `tasks/<id>` (what managers decide) and `taskstatus/<node>/<id>` (what the node running the task
 * observes), `secrets/<id>`, `configs/<id>`, `networks/<id>`, `leader-term` (the last leader's
 * announcement, etcd-leadership.ts) and lease-bound `alive/<id>` heartbeats (etcd-heartbeat.ts),
 * each value as etcd-docs.ts says; and `names/<kind>/<name>`, the id of the object holding a name
 * (swarm-names.ts: a plain id, no document, so the cache never sees it). EtcdState is one node's link to it, made of parts with one job
 * each: the writes (etcd-writes.ts: queued or at once, each a transaction guarded by the writer's
 * leadership or by the revision its document was read at; one etcd refuses as stale is read back and
 * delivered as a change, so the cache holds what etcd holds), the watches (etcd-watches.ts; a worker
 * reads only the ranges it may, `restrictReads`), the heartbeat and the leadership.
 *
 * A link cut (a member's host gone, its cable pulled) drops packets and resets nothing: a call or a
 * stream (a watch, the election's, a lease's keep-alive) on that connection waits for ever. So calls
 * have a deadline (etcd-client.ts), and every member is asked for its status each second on a
 * connection of its own (etcd-probes.ts). When a member the client uses goes down and another is up,
 * the client is replaced by one without it, and the watches (from where they were), the leader
 * observer, the heartbeat and a candidate's campaign start again on it; a leader keeps its term,
 * its lease kept alive through the new client. The watches have a client of their own
 * whose connection is pinged: one a cut left dead fails the watch stream, which starts again from
 * where it was as soon as the member answers.
 *
 * With the etcd berthd runs, the members probed and used follow etcd's member list (etcd-members.ts),
 * not the endpoints the client started with: a client that left a member spreads back to it once it
 * answers steadily again, and one reaches the managers that joined after it connected (the first
 * manager's client starts with its own member only). Spreading back replaces the client too, so it
 * waits while this node leads (a leader carries its term over to a new client, but that is not worth
 * risking for a spread); a leader's client still leaves a member that goes down for any other that answers.
 */
import type { Etcd3, Range } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';
import { withDeadline } from '../../../lib/deadline.js';
import { MemberProbes, type ProbeRound } from './etcd-probes.js';
import { MemberList } from './etcd-members.js';
import { CALL_DEADLINE_MS, connectEtcd, type EtcdAccess } from './etcd-client.js';
import { decodeDoc, encodeDoc } from './etcd-docs.js';
import { EtcdWrites, type LeaderTerm, type WriteGuard, type WriteOutcome, type WriteRefusal } from './etcd-writes.js';
import { EtcdWatches, type ChangeFn } from './etcd-watches.js';
import { NodeHeartbeat } from './etcd-heartbeat.js';
import { EtcdLeadership } from './etcd-leadership.js';

export type { EtcdAccess } from './etcd-client.js';
export type { ChangeFn } from './etcd-watches.js';

export const ETCD_PREFIX = '/berth/swarm/';
/** At most one reconnection to spread the client back over the members this often. */
const SPREAD_EVERY_MS = 10_000;

export interface Snapshot {
  entries: Map<string, unknown>;
  revision: string;
}

export class EtcdState {
  #client: Etcd3;
  /** The watches' own client, its connection pinged (etcd-client.ts KEEPALIVE_MS). */
  #watchClient: Etcd3;
  #closed = false;
  readonly #writes: EtcdWrites;
  readonly #watches: EtcdWatches;
  readonly #heartbeat: NodeHeartbeat;
  /** The campaign, the new leader's announcement, the leader observer. */
  readonly #leadership: EtcdLeadership;
  /** The members the client uses now, and who watches them all. */
  #hosts: string[];
  #probes: MemberProbes | undefined;
  /** etcd's member list, followed (the etcd berthd runs; an external one's endpoints are its operator's). */
  readonly #members: MemberList | undefined;
  /** Who hears the member list whenever it changes. */
  #onMembers: ((urls: string[]) => void) | undefined;
  /** When the client was last replaced to spread back over the members (or made). */
  #spreadAt = Date.now();

  constructor(
    private access: EtcdAccess,
    readonly writer: string,
    readonly prefix = ETCD_PREFIX,
    /** Follow etcd's member list (the etcd berthd runs). */
    follow = false,
  ) {
    this.#hosts = access.endpoints;
    this.#client = connectEtcd(access, this.#hosts);
    this.#watchClient = connectEtcd(access, this.#hosts, 'watch');
    const client = () => this.#client;
    const closed = () => this.#closed;
    this.#writes = new EtcdWrites(client, prefix, (key, why, guard) => this.#refused(key, why, guard));
    this.#watches = new EtcdWatches({ client: () => this.#watchClient, prefix, writer, writes: this.#writes, renew: () => this.#renewWatchClient() });
    this.#heartbeat = new NodeHeartbeat({ client, closed, key: (id) => `${prefix}alive/${id}`, value: () => this.encode({ at: Date.now() }) });
    this.#leadership = new EtcdLeadership({
      client,
      prefix,
      closed,
      writes: this.#writes,
      reread: (keys) => this.reread(keys),
      watched: () => this.#watches.delivered,
      encode: (doc) => this.encode(doc),
    });
    if (follow) {
      this.#members = new MemberList(access.endpoints, () => this.#client.cluster.memberList({}), (urls) => {
        if (this.#closed) return;
        this.#probe();
        this.#onMembers?.(urls);
      });
    }
    this.#probe();
  }

  /** The members etcd lists (or the endpoints given, not following them). */
  get #memberUrls(): string[] {
    return this.#members?.urls ?? this.access.endpoints;
  }

  /** Probes every member, and every host the client still uses; none while there is only the one. */
  #probe(): void {
    const hosts = [...new Set([...this.#memberUrls, ...this.#hosts])];
    if (this.#probes) return this.#probes.setHosts(hosts);
    if (hosts.length > 1) this.#probes = new MemberProbes(hosts, (host) => connectEtcd(this.access, [host], 'probe'), (round) => this.#checkHosts(round));
  }

  /** Reads etcd's member list again now (a member was just added: the list follows it until promoted). */
  readMembers(): void {
    void this.#members?.refresh();
  }

  /** Calls `fn` with the members' client URLs as etcd lists them, and again whenever they change (following it). */
  onMembers(fn: (urls: string[]) => void): void {
    this.#onMembers = fn;
    if (this.#members?.listed) fn(this.#members.urls);
  }

  /**
   * This node's certificate was renewed: new probes on it, and the clients too when `reconnect` (the
   * old one nears its end: connections made with it would outlive it, but one made again after a cut
   * would not). Without, they move to it at their next reconnection: a renewal for a role change
   * (etcd knows a node by its certificate's CN, which stays) must not drop the watches and the
   * campaign while that change is being carried out.
   */
  async renewCert(cert: string, key: string, reconnect: boolean): Promise<void> {
    if (this.#closed) return;
    this.access = { ...this.access, cert, key };
    this.#probes?.close();
    this.#probes = undefined;
    this.#probe();
    if (reconnect) await this.#reconnect(this.#hosts);
  }

  /** The client to etcd now (a new one after a reconnection: read it anew for each call). */
  get client(): Etcd3 {
    return this.#client;
  }

  /**
   * A member the client uses is down and another is up: a client without it. Otherwise, following the
   * member list, a client that lacks a member answering steadily, or uses one that is no member any
   * more, is replaced by one on every member that answers steadily and those it uses that still
   * answer (see above).
   */
  #checkHosts({ down, answering, steady }: ProbeRound): void {
    if (this.#closed) return;
    const members = this.#memberUrls;
    const up = members.filter((h) => !down.has(h));
    // Only for a member that answers now: one cut off itself sees every other member fail, some later than others.
    if (up.some((h) => answering.has(h)) && this.#hosts.some((h) => down.has(h))) {
      log.warn('an etcd member does not answer; connecting to the others', { down: [...down], up });
      return this.#replace(up);
    }
    if (!this.#members || this.term || Date.now() - this.#spreadAt < SPREAD_EVERY_MS) return;
    if (!members.some((h) => steady.has(h) && !this.#hosts.includes(h)) && this.#hosts.every((h) => members.includes(h))) return;
    // The members it uses that still answer stay, with every one that answers steadily.
    const spread = members.filter((h) => steady.has(h) || (this.#hosts.includes(h) && !down.has(h)));
    if (!spread.length) return;
    this.#spreadAt = Date.now();
    log.info('connecting to every etcd member that answers', { before: this.#hosts, now: spread });
    this.#replace(spread);
  }

  #replace(hosts: string[]): void {
    void this.#reconnect(hosts).catch((err) => log.warn('reconnecting to etcd failed', { err: errorMessage(err) }));
  }

  /**
   * A new client on `hosts` in place of one that uses a member that is down: the watches from where
   * they were, the heartbeat on a new lease, the observer, a candidate's campaign anew (a leader's
   * term carries over: etcd-leadership.ts leave). The old client's streams are left to die with it; it is closed once the calls still
   * under way on it have had their deadline (a snapshot being read, a write: retried on its other
   * members if need be, not cut short).
   */
  async #reconnect(hosts: string[]): Promise<void> {
    const old = this.#client;
    const oldWatches = this.#watchClient;
    this.#watches.leave();
    this.#hosts = hosts;
    this.#client = connectEtcd(this.access, hosts);
    this.#watchClient = connectEtcd(this.access, hosts, 'watch');
    this.#probe();
    this.#heartbeat.moveOn();
    const campaignAnew = this.#leadership.leave(this.#client);
    setTimeout(() => old.close(), CALL_DEADLINE_MS).unref();
    oldWatches.close();
    // Before the watches: a watch waits on its member to start, and one that went silent meanwhile
    // must not hold the campaign back (a new leader waits for its watch to catch up all the same).
    this.#leadership.resume(campaignAnew);
    // Nothing waits for this: a member that goes silent while a watch starts on it is left by the
    // next reconnection (which closes this watch client, and the start waiting on it with it).
    await this.#watches.resume();
    log.info('connected to etcd again', { hosts, revision: String(this.#watches.delivered) });
  }

  /** The watches' client anew, on the members the client uses now (the old one closed). */
  #renewWatchClient(): void {
    const old = this.#watchClient;
    this.#watchClient = connectEtcd(this.access, this.#hosts, 'watch');
    old.close();
  }

  /** Reads and watches only these ranges from now on (undefined: the whole prefix); see rewatch. */
  restrictReads(ranges: Range[] | undefined): void {
    this.#watches.restrict(ranges);
  }

  /**
   * Every document under the prefix (or in the readable ranges, read at one revision), with the
   * revision to watch from. `adopt`: the cache takes these documents (their revisions are kept).
   */
  async snapshot(timeoutMs = 10_000, adopt = false): Promise<Snapshot> {
    const ranges = this.#watches.ranges;
    const read = ranges
      ? this.client.kv.txn({ compare: [], success: ranges.map((r) => ({ request_range: { key: r.start, range_end: r.end } })), failure: [] }).then((t) => ({
          kvs: t.responses.flatMap((op) => op.response_range?.kvs ?? []),
          header: t.header,
        }))
      : this.client.getAll().prefix(this.prefix).exec();
    const res = await withDeadline(read, timeoutMs, () => new Error(`reading the cluster state from etcd: no answer within ${timeoutMs} ms`));
    const entries = new Map<string, unknown>();
    const revisions = new Map<string, string>();
    for (const kv of res.kvs) {
      const key = kv.key.toString().slice(this.prefix.length);
      revisions.set(key, kv.mod_revision);
      const doc = decodeDoc(kv);
      if (doc) entries.set(key, doc.d);
    }
    if (adopt) this.#writes.adopt(revisions, res.header.revision);
    return { entries, revision: res.header.revision };
  }

  /** Whether etcd holds any of these keys now (one read, at one revision; keys only). */
  async anyExists(keys: string[]): Promise<boolean> {
    const read = this.client.kv.txn({ compare: [], success: keys.map((k) => ({ request_range: { key: Buffer.from(this.prefix + k), count_only: true } })), failure: [] });
    const res = await withDeadline(read, CALL_DEADLINE_MS, () => new Error(`reading from etcd: no answer within ${CALL_DEADLINE_MS} ms`));
    return res.responses.some((op) => Number(op.response_range?.count ?? 0) > 0);
  }

  /** Follows changes after `revision`; own writes are skipped. */
  watch(revision: string, onChange: ChangeFn): Promise<void> {
    return this.#watches.start(revision, onChange);
  }

  /** Watches again after `revision`, the readable ranges as they are now (a promoted or demoted node). */
  async rewatch(revision: string): Promise<void> {
    if (!this.#closed) await this.#watches.rewatch(revision);
  }

  /** The mod revision of `key` as this node last heard it ('0': absent), which a read-modify-write compares. */
  revisionOf(key: string): string {
    return this.#writes.revisionOf(key);
  }

  /** The leadership this node holds now (undefined: it does not lead). */
  get term(): LeaderTerm | undefined {
    return this.#leadership.term;
  }

  /** Queues a write of `doc` under `key` as this node (guarded: etcd-writes.ts). */
  put(key: string, doc: unknown, guard?: WriteGuard): void {
    this.#writes.put(key, this.encode(doc), guard);
  }

  del(key: string, guard?: WriteGuard): void {
    this.#writes.del(key, guard);
  }

  /** Writes now and answers etcd's verdict (throws when etcd does not answer); a refused write is not read back. */
  commit(key: string, doc: unknown | undefined, guard: WriteGuard): Promise<WriteOutcome> {
    return this.#writes.commit(key, doc === undefined ? null : this.encode(doc), guard);
  }

  /** The value this node writes for `doc`. */
  encode(doc: unknown): string {
    return encodeDoc(this.writer, doc);
  }

  /** Resolves once every queued write was answered (or after `timeoutMs`). */
  flushed(timeoutMs = 5000): Promise<void> {
    return this.#writes.flushed(timeoutMs);
  }

  /**
   * A queued write etcd refused as stale: the cache takes what etcd holds instead. Refused for its
   * term, the campaign is over (its key went without the lease saying so: its lease expired unheard,
   * or an operator deleted the key).
   */
  #refused(key: string, why: WriteRefusal, guard: WriteGuard): void {
    if (why === 'denied') return;
    log.info('etcd refused a stale write of this node; reading it back', { key, why });
    this.reread([key]);
    if (why === 'deposed' && guard.term) this.#leadership.deposed(guard.term);
  }

  /**
   * Reads `keys` from etcd again (once it answers) and delivers what it holds, whoever wrote it, as
   * a change: the cache held a write etcd never took (a deposed leader's decisions). A key this node
   * writes again meanwhile is left to that write (a leader elected again may decide it anew; refused,
   * that write is read back in turn). Delivered through the watches: an answer that comes after
   * close() is dropped with their events, not written into a store the node has cleared meanwhile.
   */
  reread(keys: string[]): void {
    void (async () => {
      // Tried again each second at most: a node whose link just came back takes etcd's state soon.
      for (let delay = 250; !this.#closed; delay = Math.min(delay * 2, 1000)) {
        try {
          const client = this.#client;
          for (const key of keys) {
            const res = await client.get(this.prefix + key).exec();
            const kv = res.kvs[0];
            if (this.#writes.pending(key) || !this.#writes.heard(key, kv?.mod_revision ?? '0', res.header.revision)) continue;
            this.#watches.deliver(key, kv ? decodeDoc(kv)?.d : undefined);
          }
          return;
        } catch {
          await new Promise((r) => setTimeout(r, delay));
        }
      }
    })();
  }

  /**
   * Takes `key` for this node (or, a manager's claim on a worker's behalf, for `writer`) in one
   * transaction, unless it exists: then answers its holder's document. Unlike put, nothing is
   * queued: the answer is etcd's.
   */
  async claim(key: string, doc: unknown, writer = this.writer): Promise<{ taken: true } | { taken: false; holder: unknown }> {
    const k = this.prefix + key;
    const res = await this.client.if(k, 'Create', '==', 0).then(this.client.put(k).value(encodeDoc(writer, doc))).else(this.client.get(k)).commit();
    if (res.succeeded) return { taken: true };
    const kv = res.responses[0]?.response_range?.kvs[0];
    return kv ? { taken: false, holder: decodeDoc(kv)?.d } : { taken: false, holder: undefined };
  }

  /** Deletes `key` only while it holds `doc` as this node (or `writer`) wrote it (a newer claim stays). */
  async release(key: string, doc: unknown, writer = this.writer): Promise<void> {
    const k = this.prefix + key;
    await this.client.if(k, 'Value', '==', encodeDoc(writer, doc)).then(this.client.delete().key(k)).commit();
  }

  /** Keeps `alive/<node>` bound to a lease of `ttlSeconds` (etcd-heartbeat.ts). */
  heartbeat(nodeId: string, ttlSeconds: number): void {
    this.#heartbeat.start(nodeId, ttlSeconds);
  }

  /** Campaigns for leadership: `onChange(term)` once elected, `onChange(undefined)` once no longer (etcd-leadership.ts). */
  campaign(nodeId: string, ttlSeconds: number, onChange: (term: LeaderTerm | undefined) => void): void {
    this.#leadership.campaign(nodeId, ttlSeconds, onChange);
  }

  /** Once elected: the term announced, and this node's watch caught up with it (false: the term ended meanwhile). */
  announce(term: LeaderTerm, nodeId: string): Promise<boolean> {
    return this.#leadership.announce(term, nodeId);
  }

  /** Stops campaigning (and resigns, when leading). */
  resign(): Promise<void> {
    return this.#leadership.resign();
  }

  /** Calls `onLeader` with the leader's node id whenever it changes. */
  observeLeader(onLeader: (id: string | undefined) => void): Promise<void> {
    return this.#leadership.observeLeader(onLeader);
  }

  /**
   * Stops watching, campaigning and writing. `leaving`: the heartbeat goes at once (the node is down
   * for the others now); otherwise it lapses by itself, so a quick restart is no death.
   */
  async close(leaving: boolean): Promise<void> {
    if (this.#closed) return;
    await this.flushed(2000);
    this.#closed = true;
    this.#writes.close();
    this.#members?.close();
    this.#probes?.close();
    await this.#watches.close();
    await this.#leadership.close();
    await this.#heartbeat.close(leaving);
    this.client.close();
    this.#watchClient.close();
  }
}
