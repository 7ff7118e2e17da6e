/**
 * Stored swarm rows read back at start-up. Rows are written by this engine, but one damaged by hand
 * or by the disk must neither stop the daemon nor hide the rest of the swarm: a row whose JSON does
 * not parse, or lacks what the swarm dereferences (ids, versions, specs, a task's status), is left
 * out with a warning and stays on disk untouched; asking for it by id or name gives an error that
 * names the damage instead of "not found". A task left out is replaced by the orchestrator as a
 * task whose container vanished would be; the tasks of a service left out stay, and run on
 * untouched (the orchestrator does not take the service for removed) until the service is removed.
 * In a cluster, etcd's snapshot then brings the whole documents back.
 */
import { log } from '../../lib/log.js';
import { internal, unavailable, type BerthError } from '../../lib/errors.js';
import type { StoredSwarmObject } from '../../state/swarm-records.js';
import type { ClusterRecord, ServiceRecord, TaskRecord } from './swarm-model.js';
import type { BlobRecord } from './secrets.js';

export type SwarmRowKind = 'service' | 'task' | 'secret' | 'config';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v: unknown): v is string => typeof v === 'string';
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** What is wrong with a document's fields (checked in order), or '' when nothing is. */
function check(doc: unknown, fields: [string, (v: unknown) => boolean][]): string {
  if (!isObject(doc)) return 'not an object';
  const bad = fields.filter(([path, ok]) => !ok(path.split('.').reduce<unknown>((o, k) => (isObject(o) ? o[k] : undefined), doc))).map(([path]) => path);
  return bad.length ? `${bad.join(', ')} missing or of the wrong type` : '';
}

const META: [string, (v: unknown) => boolean][] = [
  ['id', isString],
  ['version', isNumber],
  ['createdAt', isString],
];

const FIELDS: Record<SwarmRowKind, [string, (v: unknown) => boolean][]> = {
  service: [...META, ['spec', isObject], ['spec.Name', isString], ['spec.TaskTemplate', isObject]],
  task: [...META, ['serviceId', isString], ['nodeId', isString], ['slot', isNumber], ['spec', isObject], ['desiredState', isString], ['status', isObject], ['status.state', isString], ['restarts', Array.isArray]],
  secret: [...META, ['spec', isObject], ['spec.Name', isString]],
  config: [...META, ['spec', isObject], ['spec.Name', isString]],
};

interface Damaged {
  kind: SwarmRowKind;
  id: string;
  name?: string;
  problem: string;
}

/** The rows left out, so that asking for one names the damage. */
export class UnreadableRows {
  readonly #rows: Damaged[] = [];
  #cluster: string | undefined;

  /** The row's document as a record of its kind, or undefined (logged and remembered) when it is unusable. */
  read<K extends SwarmRowKind>(kind: K, row: StoredSwarmObject): RecordOf<K> | undefined {
    const problem = row.unreadable !== undefined ? `unreadable JSON: ${row.unreadable}` : check(row.data, FIELDS[kind]) || ((row.data as { id: string }).id !== row.id ? 'an id unlike its row' : '');
    if (!problem) return row.data as RecordOf<K>;
    this.#rows.push({ kind, id: row.id, ...(row.name !== undefined ? { name: row.name } : {}), problem });
    log.warn(`stored swarm ${kind} is damaged; left out, its row kept`, { id: row.id, name: row.name, problem });
    return undefined;
  }

  /** The cluster row (this node's membership) as a record, or undefined when there is none or it is unusable. */
  readCluster(row: StoredSwarmObject | undefined): ClusterRecord | undefined {
    this.#cluster = undefined;
    if (!row) return undefined;
    const problem = row.unreadable !== undefined ? `unreadable JSON: ${row.unreadable}` : check(row.data, [['version', isNumber], ['spec', isObject], ['joinTokens', isObject], ['node', isObject], ['node.id', isString], ['node.version', isNumber], ['node.spec', isObject]]);
    if (!problem) return row.data as ClusterRecord;
    this.#cluster = problem;
    log.error('stored swarm state is damaged; this node acts as outside any swarm until "docker swarm leave --force"', { problem });
    return undefined;
  }

  /** Whether a row left out holds this name (its row keeps the name taken in the database). */
  holdsName(kind: SwarmRowKind, name: string): boolean {
    return this.#rows.some((r) => r.kind === kind && r.name === name);
  }

  /** Whether a row of this kind and id was left out. */
  has(kind: SwarmRowKind, id: string): boolean {
    return this.#rows.some((r) => r.kind === kind && r.id === id);
  }

  /** Forgets what was left out (the rows are gone: a leave). */
  clear(): void {
    this.#rows.length = 0;
    this.#cluster = undefined;
  }

  /** The error for a swarm API call while the stored cluster row is unusable. */
  clusterError(): BerthError | undefined {
    return this.#cluster === undefined ? undefined : unavailable(`the stored swarm state of this node is damaged (${this.#cluster}): "docker swarm leave --force" forgets it`);
  }

  #find(kind: SwarmRowKind, idOrName: string, prefix = true): Damaged | undefined {
    return this.#rows.find((r) => r.kind === kind && idOrName !== '' && (r.id === idOrName || r.name === idOrName || (prefix && r.id.startsWith(idOrName))));
  }

  /** The error for a lookup of a row that was left out, by id, name or id prefix. */
  error(kind: SwarmRowKind, idOrName: string): BerthError | undefined {
    const d = this.#find(kind, idOrName);
    const then = kind === 'task' ? 'its service gets a new task in its place' : `removing the ${kind} deletes it`;
    return d && internal(`the stored record of ${kind} ${d.name ?? d.id} (${d.id}) is damaged (${d.problem}); ${then}`);
  }

  /** A removal, by full id or name, of a row that was left out: its id (the caller deletes the row), forgotten here. */
  take(kind: SwarmRowKind, idOrName: string): string | undefined {
    const d = this.#find(kind, idOrName, false);
    if (d) this.#rows.splice(this.#rows.indexOf(d), 1);
    return d?.id;
  }
}

type RecordOf<K extends SwarmRowKind> = K extends 'service' ? ServiceRecord : K extends 'task' ? TaskRecord : BlobRecord;
