/**
 * Names unique cluster-wide, as swarmkit's store keeps them (one per kind, compared lower-cased):
 * services, secrets, configs and swarm networks. In etcd each name is a key of its own,
 * `names/<kind>/<lower-cased name>`, valued the id of the object that holds it, created in the
 * transaction that creates the object's record (only while absent) and deleted in the one that
 * deletes it (cluster/etcd-writes.ts `takes`, `frees`). So of two managers creating one name at
 * the same moment etcd lets one through, whatever each had heard.
 *
 * Records from an older berthd have no name key: the leader fits them one (NameFitter), on taking
 * the lead and whenever it hears of a record it has not fitted yet (one an older manager made in a
 * cluster under upgrade). Until then such a name is guarded only as before, by each manager's cache
 * (the create checks it first): nothing is refused that should not be, and the gap closes at the
 * leader's next pass. A name key whose record is gone (deleted by an older berthd, which leaves the
 * key) is dropped by the same pass, so the name is free again. Where two old records share a name,
 * the first fitted holds it; the other's removal leaves it alone (`frees` compares the id).
 */
import { Range } from 'etcd3';
import { log } from '../../lib/log.js';
import { conflict, errorMessage, type BerthError } from '../../lib/errors.js';
import { SerialRerun } from '../../lib/serial-rerun.js';
import type { EtcdState } from './cluster/etcd-state.js';
import { rpc } from './swarm-model.js';

export const NAMED_KINDS = ['services', 'secrets', 'configs', 'networks'] as const;
export type NamedKind = (typeof NAMED_KINDS)[number];

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
  /** Record keys a pass found with their name held (by them, or by another record of the name). */
  readonly #fitted = new Set<string>();
  readonly #passes = new SerialRerun(() => this.#pass(), (err) => log.warn('fitting name keys to the records failed; the next change tries again', { err: errorMessage(err) }));

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
    if (this.d.leads()) this.#passes.run();
  }

  /** A record arrived from another node: looked at unless a pass did already. */
  heard(kind: string, id: string): void {
    if (this.d.leads() && (NAMED_KINDS as readonly string[]).includes(kind) && !this.#fitted.has(`${kind}/${id}`)) this.#passes.run();
  }

  /** The pass under way (tests, and leaving). */
  get running(): Promise<void> | undefined {
    return this.#passes.running;
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
    let claimed = 0;
    for (const r of this.d.records()) {
      const record = `${r.kind}/${r.id}`;
      const revision = created.get(record);
      if (revision === undefined) continue; // not in etcd (yet, or any more): looked at when heard
      const key = nameKey(r.kind, r.name);
      if (!holders.has(key)) {
        // Only while the name is free and the record is still the one read.
        const res = await client.if(p + key, 'Create', '==', 0).and(p + record, 'Create', '==', revision).then(client.put(p + key).value(r.id)).commit();
        if (res.succeeded) {
          holders.set(key, r.id);
          claimed++;
        }
      }
      this.#fitted.add(record);
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
