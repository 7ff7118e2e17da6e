/**
 * The watches that keep a node's cache in step with etcd: one of the whole prefix (a manager) or one
 * per range it may read (a worker, etcd-auth.ts), each from a revision on. Own writes coming back are
 * skipped (heartbeats excepted), and so is news older than what the node already has (a key read
 * back, etcd-writes.ts `heard`).
 *
 * Each watch knows the revision it delivered everything up to: the revision of the last events it
 * delivered, or of an answer without events. Never an answer's header alone: etcd catching a watch up
 * sends the revision it is at now with every batch, events still to come. A watch started again (on a
 * new client, or by etcd3 after a broken stream) goes on from there, so no event is lost.
 *
 * etcd refuses a watch the node's user may not read, when it is made: also when etcd3 makes it again
 * on a new stream (a demoted manager's whole-prefix watch once its own member, removed, went down).
 * etcd3 then cancels that watcher, which it never answers a cancellation for again (waiting for that
 * held a demoted node's role change up for ever), and makes no other watch on that stream. So a
 * rewatch, and a watch etcd cancelled, start every watch again from where it was on a new watch
 * client, again with a backoff while etcd refuses them; and no cancellation or creation is waited
 * for unbounded.
 */
import type { Etcd3, IKeyValue, Range, Watcher } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';
import { waitAtMost, withDeadline } from '../../../lib/deadline.js';
import { silence } from './etcd-client.js';
import { decodeDoc } from './etcd-docs.js';
import type { EtcdWrites } from './etcd-writes.js';

export type ChangeFn = (key: string, doc: unknown | undefined) => void;

/** How long a watcher's cancellation is waited for (etcd's answer comes on the watch stream). */
const CANCEL_WAIT_MS = 2000;
/** How long a watch may take to start (etcd3 never answers one on a stream where etcd refused another). */
const CREATE_WAIT_MS = 10_000;
/** A watch etcd cancelled is started again after this, doubled per failure up to AGAIN_MAX_MS. */
const AGAIN_MS = 500;
const AGAIN_MAX_MS = 8000;

interface WatchDeps {
  /** The client to use now. */
  client(): Etcd3;
  prefix: string;
  /** This node's writer name (its own writes are skipped). */
  writer: string;
  writes: EtcdWrites;
  /** A new watch client in place of the one in use (closed). */
  renew(): void;
}

/** One range's watch and the revision it delivered everything up to. */
interface RangeWatch {
  range: Range | undefined;
  delivered: bigint;
  watcher?: Watcher;
}

export class EtcdWatches {
  #watches: RangeWatch[] = [];
  #onChange: ChangeFn | undefined;
  /** The key ranges this node may read (undefined: the whole prefix). */
  #ranges: Range[] | undefined;
  /** Watchers etcd cancelled itself (etcd3 emits 'error' for nothing else): never cancelled again. */
  readonly #gone = new WeakSet<Watcher>();
  /** Between leave() and resume(): the watches are being moved to a new client. */
  #moving = false;
  /** Bumped whenever the watchers are dropped: a watcher made for an older generation is not kept. */
  #generation = 0;

  constructor(private readonly d: WatchDeps) {}

  get ranges(): Range[] | undefined {
    return this.#ranges;
  }

  /** Reads and watches only these ranges from now on (undefined: the whole prefix); see rewatch. */
  restrict(ranges: Range[] | undefined): void {
    this.#ranges = ranges;
  }

  /** The revision every watch delivered everything up to (0 before any). */
  get delivered(): bigint {
    if (!this.#watches.length) return 0n;
    return this.#watches.reduce((min, w) => (w.delivered < min ? w.delivered : min), this.#watches[0]!.delivered);
  }

  /** Follows changes after `revision`. */
  async start(revision: string, onChange: ChangeFn): Promise<void> {
    this.#onChange = onChange;
    const from = BigInt(revision);
    this.#watches = (this.#ranges ?? [undefined]).map((range) => ({ range, delivered: from }));
    await this.#create(this.#watches, this.#generation);
  }

  /**
   * Watches again after `revision`, the readable ranges as they are now (a promoted or demoted node),
   * on a new watch client (see #fresh). When they cannot start (no right to read them yet), they
   * are tried again in the background until they do, and the caller hears why.
   */
  async rewatch(revision: string): Promise<void> {
    if (!this.#onChange) return;
    const from = BigInt(revision);
    this.#drop();
    this.#watches = (this.#ranges ?? [undefined]).map((range) => ({ range, delivered: from }));
    await this.#fresh(AGAIN_MS);
  }

  /** The client is being replaced: the watchers are left to die with it (see resume). */
  leave(): void {
    this.#moving = true;
    this.#drop();
  }

  /** On the new client: each watch again from where it was. */
  async resume(): Promise<void> {
    this.#moving = false;
    if (!this.#onChange) return;
    const generation = this.#generation;
    try {
      await this.#create(this.#watches, generation);
    } catch (err) {
      // Refused (a node demoted meanwhile, its ranges not restricted yet) or late: made again in a while.
      if (generation === this.#generation) this.#recover(AGAIN_MS);
      throw err;
    }
  }

  /** A change read outside the watches (a key read back) to where theirs go; nothing once closed. */
  deliver(key: string, doc: unknown | undefined): void {
    this.#onChange?.(key, doc);
  }

  async close(): Promise<void> {
    this.#generation++;
    this.#onChange = undefined;
    await Promise.all(this.#watches.splice(0).map((w) => this.#cancel(w.watcher)));
  }

  /** The watchers go (what they still deliver is not heard); what each delivered stays, to go on from. */
  #drop(): void {
    this.#generation++;
    for (const w of this.#watches) {
      silence(w.watcher);
      void this.#cancel(w.watcher);
      w.watcher = undefined;
    }
  }

  /**
   * Every watch made again, from where it was, on a new watch client: etcd3 leaves a stream on which
   * etcd refused a watch unable to make any other (its queue waits for ever for that one's answer).
   * When they cannot start, again after `againMs`, doubled each time.
   */
  async #fresh(againMs: number): Promise<void> {
    this.#drop();
    const generation = this.#generation;
    this.d.renew();
    try {
      await this.#create(this.#watches, generation);
    } catch (err) {
      if (generation === this.#generation) this.#recover(againMs);
      throw err;
    }
  }

  /** A watch etcd cancelled (or one that could not start): all made again in a while, unless something else has meanwhile. */
  #recover(delayMs: number): void {
    const generation = this.#generation;
    setTimeout(() => {
      if (generation !== this.#generation || this.#moving || !this.#onChange) return;
      this.#fresh(Math.min(delayMs * 2, AGAIN_MAX_MS)).catch((err) => log.debug('watching etcd again failed', { err: errorMessage(err) }));
    }, delayMs).unref();
  }

  /** Cancels a watcher, unless etcd did already; its answer is waited for a bounded time. */
  async #cancel(watcher: Watcher | undefined): Promise<void> {
    if (!watcher || this.#gone.has(watcher)) return;
    await waitAtMost(watcher.cancel().catch(() => undefined), CANCEL_WAIT_MS);
  }

  /** Makes the watchers of `watches`, one at a time, each bounded; dropped when a newer generation took over. */
  async #create(watches: RangeWatch[], generation: number): Promise<void> {
    for (const w of watches) {
      const b = this.d.client().watch();
      const made = (w.range ? b.inRange(w.range) : b.prefix(this.d.prefix)).startRevision(String(w.delivered + 1n)).create();
      const watcher = await withDeadline(made, CREATE_WAIT_MS, () => new Error(`etcd made no watch within ${CREATE_WAIT_MS} ms`));
      if (generation !== this.#generation) {
        silence(watcher);
        void this.#cancel(watcher);
        return;
      }
      w.watcher = watcher;
      this.#follow(w, watcher);
    }
  }

  #follow(w: RangeWatch, watcher: Watcher): void {
    const { prefix, writer, writes } = this.d;
    // Registered after etcd3's own listener, which sets where it resumes a broken stream from to
    // the header's revision: set again to what was delivered.
    const delivered = () => (watcher.request.start_revision = String(w.delivered + 1n));
    watcher.on('connected', delivered);
    watcher.on('data', (res: { header?: { revision?: string }; events?: { kv: IKeyValue }[] }) => {
      const revs = (res.events ?? []).map((e) => BigInt(e.kv.mod_revision));
      const rev = revs.length ? revs.reduce((a, b) => (a > b ? a : b)) : BigInt(res.header?.revision ?? '0');
      if (rev > w.delivered) w.delivered = rev;
      delivered();
    });
    watcher.on('put', (kv) => {
      const key = kv.key.toString().slice(prefix.length);
      if (!writes.heard(key, kv.mod_revision)) return;
      const doc = decodeDoc(kv);
      // Heartbeats are news even from this node: its own comes back once its lease is in place.
      if (doc && (doc.w !== writer || key.startsWith('alive/'))) this.#onChange?.(key, doc.d);
    });
    watcher.on('delete', (kv) => {
      const key = kv.key.toString().slice(prefix.length);
      if (writes.heard(key, '0', kv.mod_revision)) this.#onChange?.(key, undefined);
    });
    watcher.on('error', (err) => {
      this.#gone.add(watcher);
      if (w.watcher !== watcher || !this.#watches.includes(w)) return;
      log.warn('etcd cancelled a watch; watching again from where it was', { err: errorMessage(err) });
      w.watcher = undefined;
      this.#recover(AGAIN_MS);
    });
  }
}
