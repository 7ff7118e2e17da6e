/**
 * GET /containers/json. Monitors poll it, so each container's entry is kept as JSON text, rebuilt
 * only when its record was saved since (the engine's revision of it) or it started or stopped
 * running; State and Status are joined in per request, and Status is recomputed only when its
 * wording changes ("Up 5 minutes" holds for a minute). The body is kept in segments of entries:
 * a segment whose entries are what they were the last time is sent again as it was.
 */
import type { ContainerRecord, ContainerState } from '../engine/containers/container-model.js';
import type { ContainerService } from '../engine/containers/container-service.js';
import { errorMessage, invalidArgument } from '../lib/errors.js';
import { log } from '../lib/log.js';
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

/** A list body already sent, in segments, with the entries it was joined from. */
interface Body {
  parts: string[];
  segments: Buffer[];
}

/** Distinct lists (query variants) whose last body is kept; more than that and all are dropped. */
const MAX_BODIES = 8;

/**
 * Entries per body segment. Young containers' Status changes every second, each at its own
 * instant: only the segments holding changed entries are encoded again.
 */
const SEGMENT = 32;

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
    const names = (f.get('name') ?? []).map((v) => nameMatcher(v.replace(/^\//, '')));
    const any = (key: string, pred: (v: string) => boolean) => {
      const vs = f.get(key);
      return !vs?.length || vs.some(pred);
    };
    const list = newest.filter((c) => {
      if (!showAll && !isListedByDefault(c.state)) return false;
      return (
        any('id', (v) => c.id.startsWith(v)) &&
        (names.length === 0 || names.some((m) => m(c.name))) &&
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
      const { head, tail } = entryHalves(c);
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
   * The response body for a list of entries, in segments to write one after the other. `key` names
   * the query; segments of its last body made of the same entries are sent again.
   */
  body(key: string, parts: string[]): Buffer[] {
    const last = this.#bodies.get(key);
    const reusable = last !== undefined && last.parts.length === parts.length ? last : undefined;
    const count = Math.max(1, Math.ceil(parts.length / SEGMENT));
    const segments: Buffer[] = new Array<Buffer>(count);
    for (let i = 0; i < count; i++) {
      const from = i * SEGMENT;
      const to = Math.min(from + SEGMENT, parts.length);
      if (reusable !== undefined && sameRange(reusable.parts, parts, from, to)) {
        segments[i] = reusable.segments[i]!;
        continue;
      }
      const open = i === 0 ? '[' : ',';
      const close = i === count - 1 ? ']' : '';
      segments[i] = Buffer.from(`${open}${parts.slice(from, to).join(',')}${close}`);
    }
    if (last === undefined && this.#bodies.size >= MAX_BODIES) this.#bodies.clear();
    this.#bodies.set(key, { parts, segments });
    return segments;
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

function sameRange(a: string[], b: string[], from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * A `name` filter value: the exact name, or a regular expression matched anywhere in it. dockerd
 * skips a value that is not a valid expression (it still matches exactly), so no value is an error.
 */
function nameMatcher(v: string): (name: string) => boolean {
  let re: RegExp | undefined;
  try {
    re = new RegExp(v);
  } catch {
    re = undefined;
  }
  return (name) => name === v || (re !== undefined && re.test(name));
}

/**
 * listEntryHalves, or when a record it cannot read slipped past the load-time repair, the entry's
 * identity alone: one bad container must not fail the list for everyone (cached per revision, so the
 * warning is once per change of the record).
 */
function entryHalves(c: ContainerRecord): ReturnType<typeof listEntryHalves> {
  try {
    return listEntryHalves(c);
  } catch (err) {
    log.warn('container record unreadable for the list; listed by id and name only', { id: c.id, err: errorMessage(err) });
    return {
      head: { Id: c.id, Names: [`/${c.name}`], Image: '', ImageID: typeof c.imageId === 'string' ? c.imageId : '', Command: '', Created: 0, Ports: [], Labels: {} },
      tail: { HostConfig: { NetworkMode: 'default' }, NetworkSettings: { Networks: {} }, Mounts: [] },
    };
  }
}
