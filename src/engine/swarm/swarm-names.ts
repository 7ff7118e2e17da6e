/**
 * Names unique cluster-wide, as swarmkit's store keeps them (one per kind, compared lower-cased):
 * services, secrets, configs and swarm networks. In etcd each name is a key of its own,
 * `names/<kind>/<lower-cased name>`, valued the id of the object that holds it, created in the
 * transaction that creates the object's record (only while absent) and deleted in the one that
 * deletes it (cluster/etcd-writes.ts `takes`, `frees`). So of two managers creating one name at
 * the same moment etcd lets one through, whatever each had heard.
 *
 * Records from an older berthd have no name key: the leader fits them one (NameFitter). On taking
 * the lead it looks at every record in one pass, which also drops a name key whose record is gone
 * (deleted by an older berthd, which leaves the key), so the name is free again; a pass that fails
 * runs again at the next record heard. Otherwise it looks at each record it hears of from another
 * manager and has not looked at yet, that record only (one made by an older manager in a cluster
 * under upgrade; those of this berthd come with their key, so the look costs one small read), and
 * forgets a record once removed. Until fitted such a name is guarded only as before, by each
 * manager's cache (the create checks it first): nothing is refused that should not be. A fit is
 * one guarded transaction (the name still free, the record still the one read), so two looks at
 * one record, or at two records of one name, put one key: where two old records share a name, the
 * first fitted holds it; the other's removal leaves it alone (`frees` compares the id).
 */
import { Range } from 'etcd3';
import { log } from '../../lib/log.js';
import { conflict, errorMessage, type BerthError } from '../../lib/errors.js';
import { SerialRerun } from '../../lib/serial-rerun.js';
import type { EtcdState } from './cluster/etcd-state.js';
import { rpc } from './swarm-model.js';

export const NAMED_KINDS = ['services', 'secrets', 'configs', 'networks'] as const;
export type NamedKind = (typeof NAMED_KINDS)[number];

/** Whether records of `kind` hold a name unique cluster-wide. */
function isNamed(kind: string): kind is NamedKind {
  return (NAMED_KINDS as readonly string[]).includes(kind);
}

/** The key under the swarm's prefix that holds `name` for objects of `kind`. */
export function nameKey(kind: NamedKind, name: string): string {
  return `names/${kind}/${name.toLowerCase()}`;
}

/**
 * dockerd's answer for a name taken (409 each): swarmkit's for services (its store's error, with the
 * name), secrets and configs; for networks, dockerd's own check before it asks swarmkit.
 */
export function nameTaken(kind: NamedKind, name: string): BerthError {
  if (kind === 'networks') return conflict(`network with name ${name} already exists`);
  const what = kind === 'services' ? `name conflicts with an existing object: service ${name}` : `${kind.slice(0, -1)} ${name}`;
  return conflict(rpc('AlreadyExists', `${what} already exists`));
}

/** A record of a named kind as the cache holds it. */
export interface NamedRecord {
  kind: NamedKind;
  id: string;
  name: string;
}

export class NameFitter {
  /** Records looked at while this node leads (their name held then, by them or another), until removed. */
  readonly #fitted = new Set<string>();
  /** The last whole pass failed: the next record heard runs one again. */
  #owed = false;
  readonly #passes = new SerialRerun(
    () => this.#pass(),
    (err) => {
      this.#owed = true;
      log.warn('fitting name keys to the records failed; the next change tries again', { err: errorMessage(err) });
    },
  );

  constructor(
    private readonly d: {
      state: () => EtcdState | undefined;
      leads: () => boolean;
      /** The records of every named kind this node's cache holds. */
      records: () => NamedRecord[];
    },
  ) {}

  /** This node leads now: every record is looked at. */
  fitAll(): void {
    this.#fitted.clear();
    this.#owed = false;
    if (this.d.leads()) this.#passes.run();
  }

  /** A record arrived from another node (`name` as it holds it): looked at unless it was already. */
  heard(kind: string, id: string, name: string): void {
    const record = `${kind}/${id}`;
    if (!this.d.leads() || !isNamed(kind)) return;
    if (this.#owed) {
      this.#owed = false;
      return this.#passes.run();
    }
    if (this.#fitted.has(record)) return;
    // Marked before the look, so that the record's next change does not start another meanwhile.
    this.#fitted.add(record);
    this.#fitOne({ kind, id, name }).catch((err) => {
      this.#fitted.delete(record);
      log.warn("fitting a record's name key failed; its next change tries again", { record, err: errorMessage(err) });
    });
  }

  /** A record was removed: not looked at again unless it comes back. */
  forgotten(kind: string, id: string): void {
    if (isNamed(kind)) this.#fitted.delete(`${kind}/${id}`);
  }

  /** One record: its name key and its record's key read at one revision, the name fitted if free. */
  async #fitOne(r: NamedRecord): Promise<void> {
    const state = this.d.state();
    if (!state) throw new Error('this node is not linked to etcd');
    const p = state.prefix;
    const client = state.client;
    const record = `${r.kind}/${r.id}`;
    const key = nameKey(r.kind, r.name);
    const read = await client.kv.txn({ compare: [], success: [key, record].map((k) => ({ request_range: { key: Buffer.from(p + k), keys_only: true } })), failure: [] });
    const [held, own] = read.responses.map((op) => op.response_range?.kvs?.[0]);
    if (!own) {
      // Removed meanwhile (its removal's news forgets it too, whichever comes first).
      this.#fitted.delete(record);
      return;
    }
    if (held || !this.d.leads()) return;
    if (await this.#claim(client, p, key, r.id, record, own.create_revision)) log.info('fitted a name key to a record an older berthd made', { record });
  }

  /** Puts the name key for `id`, only while the name is free and the record is still the one read. */
  async #claim(client: EtcdState['client'], p: string, key: string, id: string, record: string, revision: string): Promise<boolean> {
    const res = await client.if(p + key, 'Create', '==', 0).and(p + record, 'Create', '==', revision).then(client.put(p + key).value(id)).commit();
    return res.succeeded;
  }

  async #pass(): Promise<void> {
    const state = this.d.state();
    if (!state || !this.d.leads()) return;
    const p = state.prefix;
    const client = state.client;
    // The name keys and the records' keys (not their documents), at one revision: a record created
    // with its name (one transaction) is seen with it or not at all.
    const ranges = [Range.prefix(`${p}names/`), ...NAMED_KINDS.map((k) => Range.prefix(`${p}${k}/`))];
    const read = await client.kv.txn({ compare: [], success: ranges.map((r, i) => ({ request_range: { key: r.start, range_end: r.end, keys_only: i > 0 } })), failure: [] });
    const kvs = read.responses.flatMap((op) => op.response_range?.kvs ?? []);
    const holders = new Map<string, string>();
    const created = new Map<string, string>();
    for (const kv of kvs) {
      const key = kv.key.toString().slice(p.length);
      if (key.startsWith('names/')) holders.set(key, kv.value.toString());
      else created.set(key, kv.create_revision);
    }
    // Those in etcd (the others are looked at when heard), marked before any wait: a removal heard
    // meanwhile forgets its record for good.
    const found = this.d.records().filter((r) => created.has(`${r.kind}/${r.id}`));
    for (const r of found) this.#fitted.add(`${r.kind}/${r.id}`);
    let claimed = 0;
    for (const r of found) {
      const record = `${r.kind}/${r.id}`;
      const key = nameKey(r.kind, r.name);
      if (holders.has(key)) continue;
      if (await this.#claim(client, p, key, r.id, record, created.get(record)!)) {
        holders.set(key, r.id);
        claimed++;
      }
    }
    let dropped = 0;
    for (const [key, id] of holders) {
      const kind = key.split('/')[1]!;
      const record = `${kind}/${id}`;
      if (created.has(record)) continue;
      // An older berthd deleted the record and left its name: free again, unless the key moved meanwhile.
      const res = await client.if(p + key, 'Value', '==', id).and(p + record, 'Create', '==', 0).then(client.delete().key(p + key)).commit();
      if (res.succeeded) dropped++;
    }
    if (claimed || dropped) log.info('fitted name keys to records an older berthd made or removed', { claimed, dropped });
  }
}
