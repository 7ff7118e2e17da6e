/**
 * The cluster's state in etcd, under one prefix: `cluster`, `nodes/<id>`, `services/<id>`,
 * `tasks/<id>` (what managers decide) and `taskstatus/<node>/<id>` (what the node running the task
 * observes), `secrets/<id>`, `configs/<id>`, `networks/<id>`, and lease-bound `alive/<id>` heartbeats.
 * Each value is `{"w": writer node, "d": document}`, so a node skips its own writes coming back
 * through the watch. Writes are queued per key (the latest wins) and retried until etcd takes them:
 * a node cut off from etcd keeps working on its cache and catches up when it is back. A write etcd
 * refuses (a worker's, beyond what etcd-auth.ts grants it) is dropped, never retried.
 * A worker reads only the ranges it may (`restrictReads`): several of them instead of the prefix.
 *
 * A link cut (a member's host gone, its cable pulled) drops packets and resets nothing: a call or a
 * stream (a watch, the election's, a lease's keep-alive) on that connection waits for ever. So calls
 * have a deadline, and every member is asked for its status each second on a connection of its own:
 * one that does not answer, or knows no leader, three times in a row is down. When a member the
 * client uses goes down and another is up, the client is replaced by one without it, and the watches
 * (from where they were), the leader observer, the heartbeat and the campaign start again on it.
 * The watches have a client of their own, whose connection is pinged (KEEPALIVE_MS): one the cut
 * left dead fails the watch stream, which starts again from where it was as soon as the member answers.
 */
import { circuitBreaker, ConsecutiveBreaker, ExponentialBackoff, handleWhen, noop, retry } from 'cockatiel';
import { Etcd3, EtcdPermissionDeniedError, isRecoverableError, type IKeyValue, type Range, type Watcher, type Lease, type Campaign, type ElectionObserver } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';
import { MemberProbes, PROBE_DEADLINE_MS } from './etcd-probes.js';

export const ETCD_PREFIX = '/berth/swarm/';

/** How long a call may take before the client gives up on that member. */
const CALL_DEADLINE_MS = 10_000;
/**
 * The watch client's gRPC keep-alive: a ping this often while the watch stream is open (etcd's least
 * allowed interval, --grpc-keepalive-min-time), the connection closed when one is unanswered this long.
 * Without it the stream outlived a cut on its dead connection and, after the link was back, delivered
 * nothing until TCP's backed-off retransmission got through: 13 s after a 44 s cut, longer after longer
 * ones. The other calls and streams keep a client without pings: etcd3 closes a client's connections
 * after a failed call, and a ping on one closed that way fails, dropping the streams still on it.
 */
const KEEPALIVE_MS = 5000;

export interface EtcdAccess {
  endpoints: string[];
  ca: string;
  cert: string;
  key: string;
}

export interface Snapshot {
  entries: Map<string, unknown>;
  revision: string;
}

export type ChangeFn = (key: string, doc: unknown | undefined) => void;

export class EtcdState {
  #client: Etcd3;
  /** The watches' own client (see KEEPALIVE_MS). */
  #watchClient: Etcd3;
  readonly #pending = new Map<string, string | null>();
  #flushing = false;
  #closed = false;
  #watchers: Watcher[] = [];
  #onChange: ChangeFn | undefined;
  /** The key ranges this node may read (undefined: the whole prefix). */
  #ranges: Range[] | undefined;
  readonly #refused = new Set<string>();
  #lease: Lease | undefined;
  #campaign: Campaign | undefined;
  #observer: ElectionObserver | undefined;
  /** What started the heartbeat, the campaign and the observer: started again on a new client. */
  #heartbeatOf: { nodeId: string; ttlSeconds: number } | undefined;
  #campaignOf: { nodeId: string; ttlSeconds: number; onChange: (leader: boolean) => void } | undefined;
  #observerOf: ((id: string | undefined) => void) | undefined;
  /** The revision the watches delivered everything up to. */
  #revision = '0';
  /** The members the client uses now, and who watches them all. */
  #hosts: string[];
  readonly #probes: MemberProbes | undefined;
  #reconnecting = false;

  constructor(
    private readonly access: EtcdAccess,
    readonly writer: string,
    readonly prefix = ETCD_PREFIX,
  ) {
    this.#hosts = access.endpoints;
    this.#client = this.#connect(this.#hosts);
    this.#watchClient = this.#connect(this.#hosts, false, true);
    if (access.endpoints.length > 1) this.#probes = new MemberProbes(access.endpoints, (host) => this.#connect([host], true), (down, answering) => this.#checkHosts(down, answering));
  }

  /** The client to etcd now (a new one after a reconnection: read it anew for each call). */
  get client(): Etcd3 {
    return this.#client;
  }

  #connect(hosts: string[], probe = false, keepalive = false): Etcd3 {
    const access = this.access;
    const deadline = probe ? PROBE_DEADLINE_MS : CALL_DEADLINE_MS;
    return new Etcd3({
      hosts,
      credentials: { rootCertificate: Buffer.from(access.ca), certChain: Buffer.from(access.cert), privateKey: Buffer.from(access.key) },
      dialTimeout: probe ? PROBE_DEADLINE_MS : 3000,
      defaultCallOptions: (call) => (call.isStream ? {} : { deadline: Date.now() + deadline }),
      // Connections of its own (grpc shares them between clients by default): a client replaced
      // because its member went silent must not hand its dead connection to the next one.
      grpcOptions: { 'grpc.use_local_subchannel_pool': 1, ...(keepalive ? { 'grpc.keepalive_time_ms': KEEPALIVE_MS, 'grpc.keepalive_timeout_ms': KEEPALIVE_MS } : {}) },
      // A member that fails is skipped for a second only, and a broken watch is back within 2 s: a
      // node whose link returns must catch up in seconds, not after the client's 30 s default.
      faultHandling: probe
        ? { host: () => noop, global: noop }
        : {
            host: (host) => {
              const breaker = circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(3) });
              breaker.onBreak((why) => log.debug('etcd member skipped for a second', { host, err: 'error' in why ? errorMessage(why.error) : 'a result' }));
              return breaker;
            },
            global: retry(handleWhen(isRecoverableError), { maxAttempts: 2 }),
            watchBackoff: new ExponentialBackoff({ initialDelay: 100, maxDelay: 2000 }).next(),
          },
    });
  }

  /** A member the client uses is down and another is up: a client without it. */
  #checkHosts(down: Set<string>, answering: Set<string>): void {
    if (this.#closed || this.#reconnecting) return;
    const up = this.access.endpoints.filter((h) => !down.has(h));
    // Only for a member that answers now: one cut off itself sees every other member fail, some later than others.
    if (!up.some((h) => answering.has(h)) || !this.#hosts.some((h) => down.has(h))) return;
    log.warn('an etcd member does not answer; connecting to the others', { down: [...down], up });
    void this.#reconnect(up).catch((err) => log.warn('reconnecting to etcd failed', { err: errorMessage(err) }));
  }

  /** Reads and watches only these ranges from now on (undefined: the whole prefix); see rewatch. */
  restrictReads(ranges: Range[] | undefined): void {
    this.#ranges = ranges;
  }

  /** Every document under the prefix (or in the readable ranges, read at one revision), with the revision to watch from. */
  async snapshot(timeoutMs = 10_000): Promise<Snapshot> {
    const ranges = this.#ranges;
    const read = ranges
      ? this.client.kv.txn({ compare: [], success: ranges.map((r) => ({ request_range: { key: r.start, range_end: r.end } })), failure: [] }).then((t) => ({
          kvs: t.responses.flatMap((op) => op.response_range?.kvs ?? []),
          header: t.header,
        }))
      : this.client.getAll().prefix(this.prefix).exec();
    const res = await withTimeout(read, timeoutMs, 'reading the cluster state from etcd');
    const entries = new Map<string, unknown>();
    for (const kv of res.kvs) {
      const doc = decode(kv);
      if (doc) entries.set(kv.key.toString().slice(this.prefix.length), doc.d);
    }
    return { entries, revision: res.header.revision };
  }

  /** Follows changes after `revision`; own writes are skipped. */
  async watch(revision: string, onChange: ChangeFn): Promise<void> {
    this.#onChange = onChange;
    this.#revision = revision;
    for (const r of this.#ranges ?? [undefined]) {
      const b = this.#watchClient.watch();
      const w = await (r ? b.inRange(r) : b.prefix(this.prefix)).startRevision(String(BigInt(revision) + 1n)).create();
      this.#watchers.push(w);
      this.#follow(w, onChange);
    }
  }

  /** Watches again after `revision`, the readable ranges as they are now (a promoted or demoted node). */
  async rewatch(revision: string): Promise<void> {
    const old = this.#watchers.splice(0);
    if (this.#onChange && !this.#closed) await this.watch(revision, this.#onChange);
    for (const w of old) await w.cancel().catch(() => undefined);
  }

  /**
   * A new client on `hosts` in place of one that uses a member that is down: the watches from where
   * they were, the observer, the heartbeat on a new lease, the campaign anew (a leader no longer leads
   * meanwhile). The old client's streams are left to die with it.
   */
  async #reconnect(hosts: string[]): Promise<void> {
    this.#reconnecting = true;
    try {
      const old = this.#client;
      const drop = (e: { removeAllListeners(): unknown; on(ev: string, fn: () => void): unknown } | undefined) => {
        e?.removeAllListeners();
        e?.on('error', () => undefined);
      };
      for (const w of this.#watchers.splice(0)) {
        drop(w);
        void w.cancel().catch(() => undefined);
      }
      drop(this.#observer);
      void this.#observer?.cancel().catch(() => undefined);
      this.#observer = undefined;
      const campaigning = this.#campaign !== undefined;
      // The old campaign's lease goes (etcd3 keeps it private): a keep-alive stream on a member that
      // is up would keep the old campaign alive, which would then lead with nobody behind it. The
      // old heartbeat's is only let go: the new heartbeat puts the node's key on a lease of its own
      // first, so the node never looks down meanwhile (revoking would delete the key).
      const campaignLease = (this.#campaign as unknown as { lease?: Lease } | undefined)?.lease;
      const heartbeatLease = this.#lease;
      drop(this.#campaign);
      this.#campaign = undefined;
      drop(this.#lease);
      this.#lease = undefined;
      this.#hosts = hosts;
      this.#client = this.#connect(hosts);
      const oldWatches = this.#watchClient;
      this.#watchClient = this.#connect(hosts, false, true);
      oldWatches.close();
      if (this.#heartbeatOf) this.heartbeat(this.#heartbeatOf.nodeId, this.#heartbeatOf.ttlSeconds);
      heartbeatLease?.release();
      if (campaignLease) {
        campaignLease.release();
        void campaignLease.grant().then((ID) => this.#client.leaseClient.leaseRevoke({ ID })).catch(() => undefined);
      }
      old.close();
      if (campaigning) this.#campaignOf?.onChange(false);
      if (this.#onChange) await this.watch(this.#revision, this.#onChange);
      if (this.#observerOf) void this.observeLeader(this.#observerOf).catch(() => undefined);
      if (campaigning && this.#campaignOf) this.campaign(this.#campaignOf.nodeId, this.#campaignOf.ttlSeconds, this.#campaignOf.onChange);
      log.info('connected to etcd again', { hosts, revision: this.#revision });
    } finally {
      this.#reconnecting = false;
    }
  }

  #follow(w: Watcher, onChange: ChangeFn): void {
    // After an answer, all up to its revision is in: where the watches go on from on a new client.
    w.on('data', (res: { header?: { revision?: string } }) => {
      const rev = res.header?.revision;
      if (rev && BigInt(rev) > BigInt(this.#revision)) this.#revision = rev;
    });
    w.on('put', (kv) => {
      const doc = decode(kv);
      const key = kv.key.toString().slice(this.prefix.length);
      // Heartbeats are news even from this node: its own comes back once its lease is in place.
      if (doc && (doc.w !== this.writer || key.startsWith('alive/'))) onChange(key, doc.d);
    });
    w.on('delete', (kv) => onChange(kv.key.toString().slice(this.prefix.length), undefined));
    w.on('error', (err) => log.warn('etcd watch error', { err: errorMessage(err) }));
  }

  put(key: string, doc: unknown): void {
    this.#queue(key, JSON.stringify({ w: this.writer, d: doc }));
  }

  del(key: string): void {
    this.#queue(key, null);
  }

  /**
   * Forgets the queued writes whose key `stale` picks (a deposed leader's decisions, which would
   * otherwise land once its link is back, over its successor's); answers their keys.
   */
  forget(stale: (key: string) => boolean): string[] {
    const keys = [...this.#pending.keys()].filter(stale);
    for (const key of keys) this.#pending.delete(key);
    return keys;
  }

  /** The document etcd holds under `key` now (undefined: none). */
  async read(key: string): Promise<unknown | undefined> {
    const kvs = (await this.client.get(this.prefix + key).exec()).kvs;
    return kvs[0] ? decode(kvs[0])?.d : undefined;
  }

  /** Resolves once every queued write reached etcd (or after `timeoutMs`). */
  async flushed(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((this.#pending.size || this.#flushing) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  }

  #queue(key: string, value: string | null): void {
    if (this.#closed) return;
    this.#pending.delete(key);
    this.#pending.set(key, value);
    if (!this.#flushing) void this.#flush();
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    let failures = 0;
    try {
      while (this.#pending.size && !this.#closed) {
        const [key, value] = this.#pending.entries().next().value as [string, string | null];
        try {
          if (value === null) await this.client.delete().key(this.prefix + key).exec();
          else await this.client.put(this.prefix + key).value(value).exec();
          failures = 0;
          // A newer value queued meanwhile stays queued.
          if (this.#pending.get(key) === value) this.#pending.delete(key);
        } catch (err) {
          if (err instanceof EtcdPermissionDeniedError) {
            if (!this.#refused.has(key)) log.warn('etcd refused a write of this node: dropped', { key });
            this.#refused.add(key);
            if (this.#pending.get(key) === value) this.#pending.delete(key);
            continue;
          }
          if (failures++ % 20 === 0) log.warn('etcd write failed; retrying', { key, err: errorMessage(err) });
          await new Promise((r) => setTimeout(r, Math.min(1000, 100 * failures)));
        }
      }
    } finally {
      this.#flushing = false;
    }
  }

  /**
   * Takes `key` for this node (or, a manager's claim on a worker's behalf, for `writer`) in one
   * transaction, unless it exists: then answers its holder's document. Unlike put, nothing is
   * queued: the answer is etcd's.
   */
  async claim(key: string, doc: unknown, writer = this.writer): Promise<{ taken: true } | { taken: false; holder: unknown }> {
    const k = this.prefix + key;
    const value = JSON.stringify({ w: writer, d: doc });
    const res = await this.client.if(k, 'Create', '==', 0).then(this.client.put(k).value(value)).else(this.client.get(k)).commit();
    if (res.succeeded) return { taken: true };
    const kv = res.responses[0]?.response_range?.kvs[0];
    return kv ? { taken: false, holder: decode(kv)?.d } : { taken: false, holder: undefined };
  }

  /** Deletes `key` only while it holds `doc` as this node (or `writer`) wrote it (a newer claim stays). */
  async release(key: string, doc: unknown, writer = this.writer): Promise<void> {
    const k = this.prefix + key;
    await this.client.if(k, 'Value', '==', JSON.stringify({ w: writer, d: doc })).then(this.client.delete().key(k)).commit();
  }

  /**
   * Keeps `alive/<node>` bound to a lease of `ttlSeconds`; a lost lease, or one its key could not be
   * put on, is replaced: once (the first of the two failures to be heard replaces it; a lease that
   * fails both ways must not start two heartbeats, each of which would start two more).
   */
  heartbeat(nodeId: string, ttlSeconds: number): void {
    if (this.#closed) return;
    this.#heartbeatOf = { nodeId, ttlSeconds };
    const lease = this.#client.lease(ttlSeconds);
    this.#lease = lease;
    const replace = (what: string, err: unknown, delayMs: number) => {
      if (this.#closed || this.#lease !== lease) return;
      this.#lease = undefined;
      log.warn(what, { err: errorMessage(err) });
      lease.revoke().catch(() => undefined);
      setTimeout(() => this.heartbeat(nodeId, ttlSeconds), delayMs).unref();
    };
    lease.on('lost', (err) => replace('swarm heartbeat lease lost; renewing', err, 500));
    lease.put(`${this.prefix}alive/${nodeId}`).value(JSON.stringify({ w: this.writer, d: { at: Date.now() } })).exec().catch((err) => replace('swarm heartbeat failed; retrying', err, 1000));
  }

  /**
   * Campaigns for leadership (an etcd election on a lease of `ttlSeconds`): `onChange(true)` once
   * elected, `onChange(false)` when the campaign is lost; then it campaigns again.
   */
  campaign(nodeId: string, ttlSeconds: number, onChange: (leader: boolean) => void): void {
    // One campaign at a time: a second would hold a lease of its own and could win unheard.
    if (this.#closed || this.#campaign) return;
    this.#campaignOf = { nodeId, ttlSeconds, onChange };
    const c = this.#client.election(`${this.prefix}leader`, ttlSeconds).campaign(nodeId);
    this.#campaign = c;
    c.on('elected', () => {
      if (this.#campaign === c) onChange(true);
    });
    c.on('error', (err) => {
      if (this.#campaign !== c) return;
      this.#campaign = undefined;
      log.warn('swarm leader campaign ended', { err: errorMessage(err) });
      onChange(false);
      if (!this.#closed) setTimeout(() => this.campaign(nodeId, ttlSeconds, onChange), 500).unref();
    });
  }

  /** Stops campaigning (and resigns, when leading). */
  async resign(): Promise<void> {
    const c = this.#campaign;
    this.#campaign = undefined;
    this.#campaignOf = undefined;
    await c?.resign().catch(() => undefined);
  }

  /** Calls `onLeader` with the leader's node id whenever it changes. */
  async observeLeader(onLeader: (id: string | undefined) => void): Promise<void> {
    this.#observerOf = onLeader;
    const client = this.#client;
    const again = () => {
      if (!this.#closed && this.#client === client) setTimeout(() => void this.observeLeader(onLeader).catch(() => again()), 1000).unref();
    };
    const o = await client.election(`${this.prefix}leader`).observe();
    // Reconnected meanwhile: the observer on the new client is the one.
    if (this.#client !== client) return void o.cancel().catch(() => undefined);
    this.#observer = o;
    onLeader(o.leader());
    o.on('change', (id) => onLeader(id));
    o.on('error', () => {
      void o.cancel().catch(() => undefined);
      again();
    });
  }

  /**
   * Stops watching, campaigning and writing. `leaving`: the heartbeat goes at once (the node is down
   * for the others now); otherwise it lapses by itself, so a quick restart is no death.
   */
  async close(leaving: boolean): Promise<void> {
    if (this.#closed) return;
    await this.flushed(2000);
    this.#closed = true;
    this.#probes?.close();
    for (const w of this.#watchers.splice(0)) await w.cancel().catch(() => undefined);
    this.#watchClient.close();
    await this.#observer?.cancel().catch(() => undefined);
    await this.resign();
    if (leaving) await this.#lease?.revoke().catch(() => undefined);
    else this.#lease?.release();
    this.client.close();
  }
}

function decode(kv: IKeyValue): { w: string; d: unknown } | undefined {
  try {
    const v = JSON.parse(kv.value.toString()) as { w?: string; d?: unknown };
    return typeof v === 'object' && v !== null && 'd' in v ? { w: String(v.w ?? ''), d: v.d } : undefined;
  } catch {
    return undefined;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
