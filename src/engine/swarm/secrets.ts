/**
 * The swarm's secrets and configs: named blobs stored with the cluster and handed to task containers
 * as files. Both follow swarmkit's rules (name pattern, size limits, only labels may change, no removal
 * while a service refers to one); a secret's data is never shown again, a config's is.
 */
import { Buffer } from 'node:buffer';
import { invalidArgument, notFound } from '../../lib/errors.js';
import type { UnreadableRows } from './swarm-record-repair.js';
import type { SwarmObjectRecords } from '../../state/swarm-object-records.js';
import { newSwarmId } from './swarm-ids.js';
import { outOfSequence, rpc, type ServiceRecord, type ServiceSpec } from './swarm-model.js';
import { nameTaken } from './swarm-names.js';
import type { NameChange } from './swarm-store.js';

export type BlobKind = 'secret' | 'config';

export interface BlobSpec {
  Name: string;
  Labels: Record<string, string>;
  /** Base64, as the API carries it. */
  Data?: string;
  Driver?: Record<string, unknown>;
  Templating?: Record<string, unknown>;
}

export interface BlobRecord {
  id: string;
  version: number;
  createdAt: string;
  updatedAt: string;
  spec: BlobSpec;
}

/** A task's reference to a secret or config, as in ContainerSpec.Secrets / Configs. */
export interface BlobRef {
  File?: { Name?: string; UID?: string; GID?: string; Mode?: number };
  Runtime?: Record<string, unknown>;
  SecretID?: string;
  SecretName?: string;
  ConfigID?: string;
  ConfigName?: string;
}

const NAME_RE = /^[a-zA-Z0-9]+(?:[a-zA-Z0-9-_.]*[a-zA-Z0-9])?$/;
const MAX_SIZE: Record<BlobKind, number> = { secret: 500 * 1024, config: 1000 * 1024 };
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class SwarmBlobs {
  readonly #all = new Map<string, BlobRecord>();
  /**
   * In a cluster: where local changes go (a removal is `undefined`), and an API call's change,
   * answered once etcd took it (a creation taking its name there, a removal freeing it).
   */
  #sink: ((id: string, rec: BlobRecord | undefined) => void) | undefined;
  #commit: BlobCommit | undefined;
  /** In a cluster: whether etcd still holds a name the cache says taken (SwarmStore.nameHeld). */
  #nameHeld: NameHeld | undefined;

  constructor(
    readonly kind: BlobKind,
    private readonly records: SwarmObjectRecords,
    private readonly nextVersion: () => number,
    /** Where damaged rows are told and remembered (swarm-record-repair.ts). */
    private readonly unreadable: UnreadableRows,
  ) {}

  load(): void {
    this.#all.clear();
    for (const r of this.records.all()) {
      const rec = this.unreadable.read(this.kind, r);
      if (rec) this.#all.set(r.id, rec);
    }
  }

  clear(): void {
    this.records.clear();
    this.#all.clear();
  }

  attach(sink: ((id: string, rec: BlobRecord | undefined) => void) | undefined, commit?: BlobCommit, nameHeld?: NameHeld): void {
    this.#sink = sink;
    this.#commit = sink ? commit : undefined;
    this.#nameHeld = sink ? nameHeld : undefined;
  }

  /** A change from another node (never sent back). */
  applyRemote(id: string, rec: BlobRecord | undefined): void {
    if (rec) {
      this.records.save(rec.id, rec.spec.Name, Date.parse(rec.createdAt), rec);
      this.#all.set(rec.id, rec);
    } else {
      this.records.delete(id);
      this.#all.delete(id);
    }
  }

  ids(): string[] {
    return [...this.#all.keys()];
  }

  list(): BlobRecord[] {
    return [...this.#all.values()];
  }

  /** Names compared lower-cased, as swarmkit's store does; in a cluster etcd has the last word (swarm-names.ts). */
  async create(body: unknown): Promise<BlobRecord> {
    const spec = this.#spec(body);
    const name = spec.Name.toLowerCase();
    if (this.unreadable.holdsName(this.kind, spec.Name)) throw nameTaken(`${this.kind}s`, spec.Name);
    const holders = [...this.#all.values()].filter((o) => o.spec.Name.toLowerCase() === name).map((o) => o.id);
    if (holders.length && (!this.#nameHeld || (await this.#nameHeld(spec.Name, holders)))) throw nameTaken(`${this.kind}s`, spec.Name);
    const now = new Date().toISOString();
    const rec: BlobRecord = { id: newSwarmId(), version: this.nextVersion(), createdAt: now, updatedAt: now, spec };
    await this.#commit?.(rec.id, rec, { takes: spec.Name });
    this.records.save(rec.id, rec.spec.Name, Date.parse(rec.createdAt), rec);
    this.#all.set(rec.id, rec);
    if (!this.#commit) this.#sink?.(rec.id, rec);
    return rec;
  }

  /** By full id, then name, then unique id prefix, as dockerd resolves them. */
  get(idOrName: string): BlobRecord {
    const found = this.#all.get(idOrName) ?? [...this.#all.values()].find((o) => o.spec.Name === idOrName) ?? this.#byPrefix(idOrName);
    if (!found) throw this.unreadable.error(this.kind, idOrName) ?? notFound(`${this.kind} ${idOrName} not found`);
    return found;
  }

  /**
   * Only labels may change; name and data must be what they were. In a cluster the change is in etcd
   * first, compared with what it holds (dockerd's "update out of sequence" when another got there first).
   */
  async update(idOrName: string, version: number, body: unknown): Promise<void> {
    const rec = this.get(idOrName);
    if (!isObject(body)) throw invalidArgument(`invalid JSON: expected a ${this.kind} spec object`);
    if (version !== rec.version) throw outOfSequence();
    const name = body.Name;
    const data = body.Data;
    if (name !== rec.spec.Name || (data !== undefined && data !== null && data !== '' && normalizeBase64(data) !== rec.spec.Data)) {
      throw invalidArgument(rpc('InvalidArgument', 'only updates to Labels are allowed'));
    }
    const next: BlobRecord = { ...rec, spec: { ...rec.spec, Labels: labels(body.Labels) }, version: this.nextVersion(), updatedAt: new Date().toISOString() };
    await this.#commit?.(next.id, next, {});
    Object.assign(rec, next);
    this.records.save(rec.id, rec.spec.Name, Date.parse(rec.createdAt), rec);
    if (!this.#commit) this.#sink?.(rec.id, rec);
  }

  async remove(idOrName: string, services: Iterable<ServiceRecord>): Promise<void> {
    const known = this.#all.has(idOrName) || [...this.#all.values()].some((o) => o.spec.Name === idOrName);
    const lost = known ? undefined : this.unreadable.take(this.kind, idOrName);
    if (lost) return this.records.delete(lost);
    const rec = this.get(idOrName);
    const users = [...services].filter((s) => refsOf(s.spec, this.kind).some((r) => refId(r, this.kind) === rec.id)).map((s) => s.spec.Name);
    if (users.length) {
      throw invalidArgument(rpc('InvalidArgument', `${this.kind} '${rec.spec.Name}' is in use by the following service${users.length > 1 ? 's' : ''}: ${users.join(', ')}`));
    }
    await this.#commit?.(rec.id, undefined, { frees: rec.spec.Name });
    this.records.delete(rec.id);
    this.#all.delete(rec.id);
    if (!this.#commit) this.#sink?.(rec.id, undefined);
  }

  /** swarmkit's checks of a service's references: well formed, distinct targets, existing objects. */
  checkRefs(spec: ServiceSpec): void {
    const refs = refsOf(spec, this.kind);
    const targets = new Map<string, string>();
    for (const r of refs) {
      const id = refId(r, this.kind);
      const name = refName(r, this.kind);
      if (!id || !name) throw invalidArgument(rpc('InvalidArgument', `malformed ${this.kind} reference`));
      if (!r.File && !r.Runtime) throw invalidArgument(rpc('InvalidArgument', `malformed ${this.kind} reference, no target provided`));
      if (r.File) {
        if (!r.File.Name) throw invalidArgument(rpc('InvalidArgument', `malformed file ${this.kind} reference, invalid target file name provided`));
        const prev = targets.get(r.File.Name);
        if (prev !== undefined) throw invalidArgument(rpc('InvalidArgument', `${this.kind} references '${prev}' and '${name}' have a conflicting target: '${r.File.Name}'`));
        targets.set(r.File.Name, name);
      }
    }
    const missing = refs.filter((r) => this.#all.get(refId(r, this.kind)!)?.spec.Name !== refName(r, this.kind)).map((r) => refName(r, this.kind));
    if (missing.length) throw invalidArgument(rpc('InvalidArgument', `${this.kind}${missing.length > 1 ? 's' : ''} not found: ${missing.join(', ')}`));
  }

  /** The data of a referenced object, or undefined once it is gone. */
  data(id: string): Buffer | undefined {
    const rec = this.#all.get(id);
    return rec ? Buffer.from(rec.spec.Data ?? '', 'base64') : undefined;
  }

  #spec(body: unknown): BlobSpec {
    if (!isObject(body)) throw invalidArgument(`invalid JSON: expected a ${this.kind} spec object`);
    const name = body.Name;
    if (typeof name !== 'string' || name === '') throw invalidArgument(rpc('InvalidArgument', 'name must be provided'));
    if (name.length > 64 || !NAME_RE.test(name)) {
      throw invalidArgument(rpc('InvalidArgument', 'invalid name, only 64 [a-zA-Z0-9-_.] characters allowed, and the start and end character must be [a-zA-Z0-9]'));
    }
    const spec: BlobSpec = { Name: name, Labels: labels(body.Labels) };
    if (isObject(body.Templating)) spec.Templating = body.Templating;
    if (this.kind === 'secret' && isObject(body.Driver)) {
      if (!body.Driver.Name) throw invalidArgument(rpc('InvalidArgument', 'secret driver must have a name'));
      // Secret drivers are plugins; there is no plugin to give them to.
      throw invalidArgument(rpc('InvalidArgument', `secret driver ${String(body.Driver.Name)} is not available`));
    }
    const data = normalizeBase64(body.Data ?? '');
    const size = Buffer.from(data, 'base64').length;
    if (size < 1 || size >= MAX_SIZE[this.kind]) {
      throw invalidArgument(rpc('InvalidArgument', `${this.kind} data must be larger than 0 and less than ${MAX_SIZE[this.kind]} bytes`));
    }
    spec.Data = data;
    return spec;
  }

  #byPrefix(prefix: string): BlobRecord | undefined {
    if (!prefix) return undefined;
    const hits = [...this.#all.values()].filter((o) => o.id.startsWith(prefix));
    return hits.length === 1 ? hits[0] : undefined;
  }
}

/** An API call's change in the cluster (rec undefined: a removal), with the name it takes or frees. */
type BlobCommit = (id: string, rec: BlobRecord | undefined, name: NameChange) => Promise<void>;
type NameHeld = (name: string, holders: string[]) => Promise<boolean>;

export function refsOf(spec: ServiceSpec, kind: BlobKind): BlobRef[] {
  const cs = spec.TaskTemplate?.ContainerSpec;
  const v = kind === 'secret' ? cs?.Secrets : cs?.Configs;
  return Array.isArray(v) ? (v.filter(isObject) as BlobRef[]) : [];
}

export const refId = (r: BlobRef, kind: BlobKind) => (kind === 'secret' ? r.SecretID : r.ConfigID);
export const refName = (r: BlobRef, kind: BlobKind) => (kind === 'secret' ? r.SecretName : r.ConfigName);

function labels(v: unknown): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObject(v) || Object.values(v).some((x) => typeof x !== 'string')) throw invalidArgument('invalid JSON: Labels must be an object of strings');
  return v as Record<string, string>;
}

/** Go decodes []byte from standard base64; the stored form is re-encoded so comparisons are exact. */
function normalizeBase64(v: unknown): string {
  if (typeof v !== 'string') throw invalidArgument('invalid JSON: Data must be a base64 string');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(v) || v.length % 4 === 1) throw invalidArgument('illegal base64 data');
  return Buffer.from(v, 'base64').toString('base64');
}
