/**
 * How this node's writes reach etcd. Queued writes (`put`, `del`) wait per key (the latest value
 * wins) and are retried until etcd answers: a node cut off from etcd keeps working on its cache and
 * catches up when it is back. `commit` writes at once and answers etcd's verdict (an API call's change).
 *
 * Each write is a transaction whose guard etcd checks, so a stale writer is refused by etcd itself:
 * - `term`: the decision of a leader, which lands only while its leadership holds (its election key
 *   still exists with the create revision it was elected with; a deposed leader's key is gone, and a
 *   successor's is another key);
 * - `base`: a record read, modified and written back, which lands only while the key is still at
 *   the mod revision it was read at ('0': absent), so of two concurrent changes one is refused.
 * - `takes`: an object's creation, which takes its name key (`names/<kind>/<name>`, valued its id)
 *   in the same transaction, and lands only while that key is absent: of two objects created with one
 *   name at the same moment, on two managers, one is refused ('taken'), by etcd itself.
 * A deletion may free its object's name key in the same transaction (`frees`): the key goes only
 * while it holds that object's id (a name an older berthd left unkept may be another's: swarm-names.ts).
 * A refused write is dropped, never retried; `refused` hears of it. So is a write etcd's access
 * control refuses (a worker's beyond what etcd-auth.ts grants it).
 *
 * The mod revision of every key this node knows of (from the snapshot, the watch and its own writes)
 * is kept here: what a write's `base` is read from when it is made.
 */
import { EtcdPermissionDeniedError, type Etcd3, type IOperation } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';

/** A leadership: the leader's election key and the revision it was created at. */
export interface LeaderTerm {
  readonly key: string;
  readonly revision: string;
}

/** A name key (under the prefix, like the record's) and the id of the object that holds the name. */
export interface NameHold {
  key: string;
  id: string;
}

/** What etcd must find for a write to land (nothing: it always lands). */
export interface WriteGuard {
  term?: LeaderTerm;
  /** The key's mod revision the document was derived from ('0': the key was absent). */
  base?: string;
  /** A name the write takes with it: it lands only while the name key is absent. */
  takes?: NameHold;
  /** A deletion's name, deleted with it while it holds this id (left alone otherwise; the deletion lands either way). */
  frees?: NameHold;
}

/**
 * `deposed`: the term no longer holds; `conflict`: the key moved past the base; `denied`: etcd's
 * access control; `taken`: another object holds the name.
 */
export type WriteRefusal = 'deposed' | 'conflict' | 'denied' | 'taken';
export type WriteOutcome = { landed: true; revision: string } | { landed: false; why: WriteRefusal };

/** How long an immediate write is tried again while etcd does not answer. */
const COMMIT_WITHIN_MS = 15_000;

interface Pending {
  value: string | null;
  guard: WriteGuard;
  /** Sent to etcd (at least once), and its answer once there is one. */
  sent?: boolean;
  outcome?: WriteOutcome;
}

export class EtcdWrites {
  readonly #pending = new Map<string, Pending>();
  /** Per key: its mod revision ('0' once deleted) and the revision of the event that said so. */
  readonly #revisions = new Map<string, { mod: string; at: bigint }>();
  readonly #denied = new Set<string>();
  #flushing = false;
  #closed = false;

  constructor(
    /** The client to use now (EtcdState replaces it when a member goes down). */
    private readonly client: () => Etcd3,
    readonly prefix: string,
    /** A queued write etcd refused: dropped. */
    private readonly refused: (key: string, why: WriteRefusal, guard: WriteGuard) => void,
  ) {}

  /** The mod revision of `key` as this node last heard it ('0': absent or unknown). */
  revisionOf(key: string): string {
    return this.#revisions.get(key)?.mod ?? '0';
  }

  /** etcd holds `key` at `mod` ('0': deleted) as of revision `at`. False for older news than this node has. */
  heard(key: string, mod: string, at: string = mod): boolean {
    const known = this.#revisions.get(key);
    const when = BigInt(at);
    if (known && known.at >= when) return false;
    this.#revisions.set(key, { mod, at: when });
    return true;
  }

  /** The cache took etcd's state at revision `at` (a snapshot): `keys` hold these revisions, others are absent. */
  adopt(keys: Map<string, string>, at: string): void {
    for (const key of this.#revisions.keys()) if (!keys.has(key)) this.heard(key, '0', at);
    for (const [key, mod] of keys) this.heard(key, mod, at);
  }

  put(key: string, value: string, guard: WriteGuard = {}): void {
    this.#queue(key, value, guard);
  }

  del(key: string, guard: WriteGuard = {}): void {
    this.#queue(key, null, guard);
  }

  /**
   * Writes now, answering etcd's verdict; tried again while etcd does not answer (a member starting
   * again, a client moving to other members), until `withinMs`, then throws. A queued write of the
   * key that compared the same base was in the cache this one was derived from: this one replaces
   * it, or, when it is on its way already, builds on what etcd made of it.
   */
  async commit(key: string, value: string | null, guard: WriteGuard, withinMs = COMMIT_WITHIN_MS): Promise<WriteOutcome> {
    const deadline = Date.now() + withinMs;
    const before = this.#pending.get(key);
    if (before && guard.base !== undefined && before.guard.base === guard.base) {
      if (!before.sent) this.#pending.delete(key);
      else {
        while (!before.outcome && !this.#closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        if (before.outcome?.landed) guard = { ...guard, base: before.outcome.revision };
      }
    }
    let outcome: WriteOutcome | undefined;
    for (let delay = 100; !outcome; delay = Math.min(delay * 2, 1000)) {
      try {
        outcome = await this.#write(key, value, guard);
      } catch (err) {
        if (this.#closed || Date.now() + delay > deadline) throw err;
        await new Promise((r) => setTimeout(r, delay));
      }
    }
    const queued = this.#pending.get(key);
    if (outcome.landed && queued?.guard.base !== undefined && queued.guard.base === guard.base) this.#pending.delete(key);
    return outcome;
  }

  /** Whether a write of `key` is queued (or under way). */
  pending(key: string): boolean {
    return this.#pending.has(key);
  }

  /** Drops the queued writes `stale` picks; answers their keys. */
  forget(stale: (key: string, guard: WriteGuard) => boolean): string[] {
    const keys = [...this.#pending].filter(([k, p]) => stale(k, p.guard)).map(([k]) => k);
    for (const key of keys) this.#pending.delete(key);
    return keys;
  }

  /** Resolves once every queued write was answered (or after `timeoutMs`). */
  async flushed(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((this.#pending.size || this.#flushing) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  }

  close(): void {
    this.#closed = true;
  }

  #queue(key: string, value: string | null, guard: WriteGuard): void {
    if (this.#closed) return;
    this.#pending.delete(key);
    this.#pending.set(key, { value, guard });
    if (!this.#flushing) void this.#flush();
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    let failures = 0;
    try {
      while (this.#pending.size && !this.#closed) {
        const [key, p] = this.#pending.entries().next().value as [string, Pending];
        let outcome: WriteOutcome;
        try {
          p.sent = true;
          outcome = await this.#write(key, p.value, p.guard);
          p.outcome = outcome;
          failures = 0;
        } catch (err) {
          if (failures++ % 20 === 0) log.warn('etcd write failed; retrying', { key, err: errorMessage(err) });
          await new Promise((r) => setTimeout(r, Math.min(1000, 100 * failures)));
          continue;
        }
        const next = this.#pending.get(key);
        if (next === p) this.#pending.delete(key);
        else if (next && outcome.landed && next.guard.base === p.guard.base && next.guard.base !== undefined) {
          // Queued meanwhile, derived from the cache with this write in it: it builds on this write.
          next.guard = { ...next.guard, base: outcome.revision };
        }
        if (!outcome.landed) this.#refuse(key, outcome.why, p.guard);
      }
    } finally {
      this.#flushing = false;
    }
  }

  #refuse(key: string, why: WriteRefusal, guard: WriteGuard): void {
    if (why === 'denied') {
      if (!this.#denied.has(key)) log.warn('etcd refused a write of this node: dropped', { key });
      this.#denied.add(key);
    }
    this.refused(key, why, guard);
  }

  /** One guarded write: a transaction comparing the guard, which on failure reads the keys compared to say why. */
  async #write(key: string, value: string | null, guard: WriteGuard): Promise<WriteOutcome> {
    const client = this.client();
    const k = this.prefix + key;
    const op = value === null ? client.delete().key(k) : client.put(k).value(value);
    if (guard.frees) return this.#free(client, key, op, guard.frees);
    const compares: [string, 'Create' | 'Mod', string][] = [];
    if (guard.term) compares.push([guard.term.key, 'Create', guard.term.revision]);
    if (guard.base !== undefined) compares.push([k, 'Mod', guard.base]);
    const name = guard.takes && { key: this.prefix + guard.takes.key, id: guard.takes.id };
    if (name) compares.push([name.key, 'Create', '0']);
    try {
      if (!compares.length) {
        const res = await op.exec();
        return this.#landed(key, value, res.header.revision);
      }
      const [[firstKey, firstColumn, firstRevision], ...more] = compares as [[string, 'Create' | 'Mod', string], ...[string, 'Create' | 'Mod', string][]];
      const txn = client.if(firstKey, firstColumn, '==', firstRevision);
      for (const [ck, column, revision] of more) txn.and(ck, column, '==', revision);
      // Read back on failure, in this order: the term's key, the record, the name.
      const reads = [...(guard.term ? [guard.term.key] : []), k, ...(name ? [name.key] : [])];
      const res = await txn
        .then(op, ...(name ? [client.put(name.key).value(name.id)] : []))
        .else(...reads.map((r) => client.get(r)))
        .commit();
      if (res.succeeded) return this.#landed(key, value, res.header.revision);
      const read = (r: string) => res.responses[reads.indexOf(r)]?.response_range?.kvs[0];
      if (guard.term && read(guard.term.key)?.create_revision !== guard.term.revision) return { landed: false, why: 'deposed' };
      const kv = read(k);
      const holder = name && read(name.key)?.value.toString();
      // The same write landed already: an attempt whose answer was lost, made again (the client retries).
      const same = value === null ? !kv : kv?.value.toString() === value;
      if (same && (!name || holder === name.id)) return this.#landed(key, value, kv?.mod_revision ?? res.header.revision);
      if (holder !== undefined && holder !== name?.id) return { landed: false, why: 'taken' };
      return { landed: false, why: 'conflict' };
    } catch (err) {
      if (err instanceof EtcdPermissionDeniedError) return { landed: false, why: 'denied' };
      throw err;
    }
  }

  /** A deletion that takes its name key with it while the key holds its id (both branches delete the record). */
  async #free(client: Etcd3, key: string, op: IOperation, frees: NameHold): Promise<WriteOutcome> {
    const name = this.prefix + frees.key;
    try {
      const res = await client.if(name, 'Value', '==', frees.id).then(op, client.delete().key(name)).else(op).commit();
      return this.#landed(key, null, res.header.revision);
    } catch (err) {
      if (err instanceof EtcdPermissionDeniedError) return { landed: false, why: 'denied' };
      throw err;
    }
  }

  #landed(key: string, value: string | null, revision: string): WriteOutcome {
    this.heard(key, value === null ? '0' : revision, revision);
    return { landed: true, revision };
  }
}
