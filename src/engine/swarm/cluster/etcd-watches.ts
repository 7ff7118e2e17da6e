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
 */
import type { Etcd3, IKeyValue, Range, Watcher } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';
import { silence } from './etcd-client.js';
import { decodeDoc } from './etcd-docs.js';
import type { EtcdWrites } from './etcd-writes.js';

export type ChangeFn = (key: string, doc: unknown | undefined) => void;

interface WatchDeps {
  /** The client to use now. */
  client(): Etcd3;
  prefix: string;
  /** This node's writer name (its own writes are skipped). */
  writer: string;
  writes: EtcdWrites;
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
    await this.#create(this.#watches);
  }

  /** Watches again after `revision`, the readable ranges as they are now (a promoted or demoted node). */
  async rewatch(revision: string): Promise<void> {
    const old = this.#watches;
    if (this.#onChange) await this.start(revision, this.#onChange);
    for (const w of old) await w.watcher?.cancel().catch(() => undefined);
  }

  /** The client is being replaced: the watchers are left to die with it (see resume). */
  leave(): void {
    for (const w of this.#watches) {
      silence(w.watcher);
      void w.watcher?.cancel().catch(() => undefined);
      w.watcher = undefined;
    }
  }

  /** On the new client: each watch again from where it was. */
  async resume(): Promise<void> {
    if (this.#onChange) await this.#create(this.#watches);
  }

  async close(): Promise<void> {
    for (const w of this.#watches.splice(0)) await w.watcher?.cancel().catch(() => undefined);
  }

  async #create(watches: RangeWatch[]): Promise<void> {
    for (const w of watches) {
      const b = this.d.client().watch();
      const watcher = await (w.range ? b.inRange(w.range) : b.prefix(this.d.prefix)).startRevision(String(w.delivered + 1n)).create();
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
    watcher.on('error', (err) => log.warn('etcd watch error', { err: errorMessage(err) }));
  }
}
