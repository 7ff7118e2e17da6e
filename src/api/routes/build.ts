/** POST /build (the classic builder's JSON stream) and POST /build/prune. */
import type { Router } from '../router.js';
import { queryBool, queryInt, queryString, sendJson, type RequestContext } from '../request.js';
import { parseFilters, parseUntil } from '../filters.js';
import { JsonLineWriter } from '../json-lines.js';
import { invalidArgument } from '../../lib/errors.js';
import type { BuildService } from '../../engine/build/build-service.js';
import { parsePlatform } from '../../lib/platform.js';
import { versionAtLeast } from '../api-version.js';

export function buildRoutes(r: Router, builds: BuildService): void {
  r.on('POST', '/build', (ctx) => build(ctx, builds));
  r.on('POST', '/build/prune', (ctx) => prune(ctx, builds));
}

/** A JSON object of strings in a query value (buildargs, labels); null values are skipped as dockerd does. */
function queryMap(ctx: RequestContext, name: string): Record<string, string> {
  const raw = queryString(ctx.query, name);
  if (!raw) return {};
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw invalidArgument(`invalid ${name} value: ${raw}`);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw invalidArgument(`invalid ${name} value: ${raw}`);
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return out;
}

/** A JSON array of strings in a query value (cachefrom). */
function queryList(ctx: RequestContext, name: string): string[] {
  const raw = queryString(ctx.query, name);
  if (!raw) return [];
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw invalidArgument(`invalid ${name} value: ${raw}`);
  }
  if (!Array.isArray(v)) throw invalidArgument(`invalid ${name} value: ${raw}`);
  return v.filter((x): x is string => typeof x === 'string' && x !== '');
}

function header(ctx: RequestContext, name: string): string | undefined {
  const v = ctx.req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Limits and network for RUN containers, from the query's names to HostConfig's. */
function runHostConfig(ctx: RequestContext): Record<string, unknown> {
  const hc: Record<string, unknown> = {};
  const ints: [string, string][] = [['memory', 'Memory'], ['memswap', 'MemorySwap'], ['cpushares', 'CpuShares'], ['cpuperiod', 'CpuPeriod'], ['cpuquota', 'CpuQuota'], ['shmsize', 'ShmSize']];
  for (const [q, f] of ints) {
    const v = queryInt(ctx.query, q);
    if (v) hc[f] = v;
  }
  for (const [q, f] of [['cpusetcpus', 'CpusetCpus'], ['cpusetmems', 'CpusetMems'], ['cgroupparent', 'CgroupParent']] as const) {
    const v = queryString(ctx.query, q);
    if (v) hc[f] = v;
  }
  const ulimits = queryString(ctx.query, 'ulimits');
  if (ulimits) {
    let v: unknown;
    try {
      v = JSON.parse(ulimits);
    } catch {
      v = undefined;
    }
    const ok = (u: unknown) => !!u && typeof (u as { Name?: unknown }).Name === 'string' && Number.isInteger((u as { Soft?: unknown }).Soft) && Number.isInteger((u as { Hard?: unknown }).Hard);
    if (!Array.isArray(v) || !v.every(ok)) throw invalidArgument(`invalid ulimits value: ${ulimits}`);
    hc.Ulimits = v;
  }
  const net = queryString(ctx.query, 'networkmode');
  hc.NetworkMode = !net || net === 'default' ? 'bridge' : net;
  const hosts = ctx.query.getAll('extrahosts').flatMap((h) => h.split(/[,\s]+/)).filter(Boolean);
  if (hosts.length) hc.ExtraHosts = hosts;
  return hc;
}

async function build(ctx: RequestContext, builds: BuildService): Promise<void> {
  if (queryString(ctx.query, 'version') === '2') {
    throw invalidArgument('BuildKit (version=2) is not supported by this daemon: use the classic builder (DOCKER_BUILDKIT=0)');
  }
  if (queryBool(ctx.query, 'squash')) throw invalidArgument('squash is only supported with experimental mode');
  const abort = new AbortController();
  ctx.res.on('close', () => {
    if (!ctx.res.writableFinished) abort.abort(new Error('client disconnected'));
  });
  const out = new JsonLineWriter(ctx.res);
  await builds.build(
    {
      context: ctx.req,
      remote: queryString(ctx.query, 'remote'),
      dockerfile: queryString(ctx.query, 'dockerfile'),
      tags: ctx.query.getAll('t').filter((t) => t !== ''),
      buildArgs: queryMap(ctx, 'buildargs'),
      labels: queryMap(ctx, 'labels'),
      target: queryString(ctx.query, 'target') || undefined,
      noCache: queryBool(ctx.query, 'nocache'),
      pull: queryBool(ctx.query, 'pull'),
      rm: queryBool(ctx.query, 'rm', true),
      forceRm: queryBool(ctx.query, 'forcerm'),
      quiet: queryBool(ctx.query, 'q'),
      platform: parsePlatform(queryString(ctx.query, 'platform')),
      hostConfig: runHostConfig(ctx),
      cacheFrom: queryList(ctx, 'cachefrom'),
      registryConfig: header(ctx, 'x-registry-config'),
      aux: versionAtLeast(ctx.version, '1.30'),
      signal: abort.signal,
    },
    (m) => out.write(m),
  );
  out.end();
}

async function prune(ctx: RequestContext, builds: BuildService): Promise<void> {
  const filters = parseFilters(ctx.query.get('filters'), ['until', 'unused-for', 'id', 'parent', 'type', 'description', 'inuse', 'shared', 'private']);
  const until = [...(filters.get('until') ?? []), ...(filters.get('unused-for') ?? [])];
  // keep-storage (API < 1.48) and its successors: bytes of cache to keep
  const keep = queryInt(ctx.query, 'keep-storage') ?? queryInt(ctx.query, 'reserved-space') ?? queryInt(ctx.query, 'max-used-space') ?? 0;
  const cutoff = until.length ? parseUntil(until[0]!) : undefined;
  filters.delete('until');
  filters.delete('unused-for');
  const result = await builds.prune({ all: queryBool(ctx.query, 'all'), keepStorage: keep, until: cutoff, filters });
  sendJson(ctx, 200, { CachesDeleted: result.CachesDeleted.length ? result.CachesDeleted : null, SpaceReclaimed: result.SpaceReclaimed });
}
