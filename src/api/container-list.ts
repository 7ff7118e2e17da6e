/**
 * GET /containers/json. Monitors poll it, so each container's entry is kept as JSON text, rebuilt
 * only when its record was saved since (the engine's revision of it) or it started or stopped
 * running; State and Status are joined in per request, and Status is recomputed only when its
 * wording changes ("Up 5 minutes" holds for a minute). When every entry of a list is what it was
 * the last time, the bytes sent then are sent again.
 */
import type { ContainerRecord, ContainerState } from '../engine/container-model.js';
import type { ContainerService } from '../engine/containers.js';
import { invalidArgument } from '../lib/errors.js';
import { listEntryHalves, status } from './container-json.js';
import { matchLabels, type Filters } from './filters.js';

export const LIST_FILTERS = ['id', 'name', 'label', 'status', 'ancestor', 'before', 'since', 'exited', 'health', 'volume', 'network', 'publish', 'expose', 'is-task', 'isolation'] as const;

const STATUSES = ['created', 'restarting', 'running', 'removing', 'paused', 'exited', 'dead'];
const HEALTH = ['starting', 'healthy', 'unhealthy', 'none'];

export interface ListQuery {
  all: boolean;
  /** -1 for no limit. */
  limit: number;
  filters: Filters;
}

/** One container's entry as JSON text, and what it was built from. */
interface Entry {
  revision: number;
  /** Running or paused: Ports and Networks then show what the runtime set up. */
  live: boolean;
  /** `{"Id":…,"Labels":{…},"State":` */
  head: string;
  /** `,"HostConfig":…,"Mounts":[…]}` */
  tail: string;
  state: ContainerState | undefined;
  status: string;
  health: string | undefined;
  /** When the Status wording changes next (epoch ms). */
  until: number;
  json: string;
}

/** A list body already sent, with the entries it was joined from. */
interface Body {
  parts: string[];
  bytes: Buffer;
}

/** Distinct lists (query variants) whose last body is kept; more than that and all are dropped. */
const MAX_BODIES = 8;

export class ContainerList {
  readonly #entries = new WeakMap<ContainerRecord, Entry>();
  readonly #bodies = new Map<string, Body>();
  #sorted: ContainerRecord[] = [];
  #sortedAt = -1;

  /** `imageIdOf` resolves an `ancestor` filter's reference to an image id. */
  constructor(
    readonly containers: ContainerService,
    readonly imageIdOf: (ref: string) => string | undefined,
  ) {}

  /** The containers a query lists, newest first; bad filters are a 400, unknown before/since a 404. */
  select(q: ListQuery): ContainerRecord[] {
    const f = q.filters;
    const newest = this.#newestFirst();
    if (f.size === 0) {
      const out = q.all || q.limit > 0 ? newest.slice() : newest.filter((c) => isListedByDefault(c.state));
      return q.limit > 0 ? out.slice(0, q.limit) : out;
    }
    for (const s of f.get('status') ?? []) {
      if (!STATUSES.includes(s)) throw invalidArgument(`invalid filter 'status=${s}'`);
    }
    for (const h of f.get('health') ?? []) {
      if (!HEALTH.includes(h)) throw invalidArgument(`Unrecognised filter value for health: ${h}`);
    }
    const exited = (f.get('exited') ?? []).map((v) => {
      if (!/^-?\d+$/.test(v)) throw invalidArgument(`invalid filter 'exited=${v}'`);
      return Number(v);
    });
    const beforeC = f.get('before')?.map((x) => this.containers.get(x));
    const sinceC = f.get('since')?.map((x) => this.containers.get(x));
    const ancestors = (f.get('ancestor') ?? []).map((a) => this.imageIdOf(a) ?? `\0${a}`);
    const showAll = q.all || f.has('status') || f.has('exited') || beforeC !== undefined || sinceC !== undefined || q.limit > 0;
    const any = (key: string, pred: (v: string) => boolean) => {
      const vs = f.get(key);
      return !vs?.length || vs.some(pred);
    };
    const list = newest.filter((c) => {
      if (!showAll && !isListedByDefault(c.state)) return false;
      return (
        any('id', (v) => c.id.startsWith(v)) &&
        any('name', (v) => new RegExp(v.replace(/^\//, '')).test(c.name)) &&
        matchLabels(f.get('label'), c.config.Labels) &&
        any('status', (v) => v === c.state.status) &&
        (exited.length === 0 || (c.state.status === 'exited' && exited.includes(c.state.exitCode))) &&
        any('health', (v) => (c.state.health?.status ?? 'none') === v) &&
        (ancestors.length === 0 || ancestors.includes(c.imageId)) &&
        (!beforeC || beforeC.every((b) => c.created < b.created)) &&
        (!sinceC || sinceC.every((s) => c.created > s.created)) &&
        any('is-task', (v) => (v === 'true') === ('com.docker.swarm.task' in (c.config.Labels ?? {}))) &&
        any('network', (v) => Object.keys(c.network.endpoints).includes(v) || c.hostConfig.NetworkMode === v)
      );
    });
    return q.limit > 0 ? list.slice(0, q.limit) : list;
  }

  /** One container's entry, as JSON text. */
  entry(c: ContainerRecord, now: number): string {
    const s = c.state;
    const live = s.status === 'running' || s.status === 'paused';
    const revision = this.containers.revisionOf(c);
    let e = this.#entries.get(c);
    if (e === undefined || e.revision !== revision || e.live !== live) {
      const { head, tail } = listEntryHalves(c);
      e = {
        revision,
        live,
        head: `${JSON.stringify(head).slice(0, -1)},"State":`,
        tail: `,${JSON.stringify(tail).slice(1)}`,
        state: undefined,
        status: '',
        health: undefined,
        until: 0,
        json: '',
      };
      this.#entries.set(c, e);
    }
    // State and health can change in place, unsaved (a health check arming itself): compare them too.
    if (e.state !== s || e.status !== s.status || e.health !== s.health?.status || now >= e.until) {
      const st = status(c, now);
      e.state = s;
      e.status = s.status;
      e.health = s.health?.status;
      e.until = st.until;
      const json = `${e.head}${JSON.stringify(s.status)},"Status":${JSON.stringify(st.text)}${e.tail}`;
      // The same string object when nothing changed: bodies compare their parts by identity first.
      if (json !== e.json) e.json = json;
    }
    return e.json;
  }

  /**
   * The response body for a list of entries. `key` names the query; its last body is sent again
   * when it was joined from the same entries.
   */
  body(key: string, parts: string[]): Buffer {
    const last = this.#bodies.get(key);
    if (last !== undefined && sameParts(last.parts, parts)) return last.bytes;
    const bytes = Buffer.from(`[${parts.join(',')}]`);
    if (this.#bodies.size >= MAX_BODIES) this.#bodies.clear();
    this.#bodies.set(key, { parts, bytes });
    return bytes;
  }

  /** Newest first, as dockerd lists them; sorted again only when a container was saved or removed. */
  #newestFirst(): ContainerRecord[] {
    const revision = this.containers.revision;
    if (revision !== this.#sortedAt) {
      this.#sorted = this.containers.all().sort((a, b) => (a.created < b.created ? 1 : a.created > b.created ? -1 : 0));
      this.#sortedAt = revision;
    }
    return this.#sorted;
  }
}

/** Without `all` (or filters implying it), only these are listed. */
function isListedByDefault(s: ContainerState): boolean {
  return s.status === 'running' || s.status === 'paused' || s.status === 'restarting';
}

function sameParts(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
