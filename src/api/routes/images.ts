/** /images/...: pull, list, inspect, history, tag, remove, prune. Image names may contain slashes. */
import type { Router } from '../router.js';
import { queryBool, queryString, sendJson, type RequestContext } from '../request.js';
import { parseFilters, matchLabels, filterBool, parseUntil } from '../filters.js';
import { versionBefore } from '../api-version.js';
import type { Engine } from '../../engine/engine.js';
import type { ImageView } from '../../engine/images/image-service.js';
import { BerthError, invalidArgument, notFound } from '../../lib/errors.js';
import { JsonLineWriter } from '../json-lines.js';
import type { ImageSuffixHandler, ImageTransferHooks } from './image-transfer.js';

export function imageRoutes(r: Router, engine: Engine, transfer?: ImageTransferHooks): void {
  r.on('GET', '/images/json', (ctx) => listImages(ctx, engine));
  r.on('POST', '/images/create', (ctx) => createImage(ctx, engine, transfer));
  r.on('POST', '/images/prune', (ctx) => pruneImages(ctx, engine));
  r.on('GET', '/images/*', (ctx) => {
    const rest = ctx.params['*']!;
    if (rest.endsWith('/json')) return sendJson(ctx, 200, inspectImage(engine, engine.images.get(rest.slice(0, -5)), ctx.version));
    if (rest.endsWith('/history')) return sendJson(ctx, 200, engine.images.history(rest.slice(0, -8)));
    const get = transferHook(transfer?.get, rest);
    if (get) return get.handler(ctx, get.name);
    throw notFound('page not found');
  });
  r.on('POST', '/images/*', (ctx) => {
    const rest = ctx.params['*']!;
    if (rest.endsWith('/tag')) {
      const repo = queryString(ctx.query, 'repo');
      if (!repo) throw invalidArgument('repository name must have at least one component');
      engine.images.tag(rest.slice(0, -4), repo, queryString(ctx.query, 'tag'));
      ctx.res.writeHead(201);
      ctx.res.end();
      return;
    }
    const post = transferHook(transfer?.post, rest);
    if (post) return post.handler(ctx, post.name);
    throw notFound('page not found');
  });
  r.on('DELETE', '/images/*', async (ctx) => {
    const items = await engine.images.remove(ctx.params['*']!, { force: queryBool(ctx.query, 'force'), noprune: queryBool(ctx.query, 'noprune') });
    sendJson(ctx, 200, items);
  });
}

/** `<name>/<suffix>` → the image-transfer handler for that suffix (push, get). */
function transferHook(hooks: Record<string, ImageSuffixHandler> | undefined, rest: string): { handler: ImageSuffixHandler; name: string } | undefined {
  const slash = rest.lastIndexOf('/');
  const handler = slash > 0 ? hooks?.[rest.slice(slash + 1)] : undefined;
  return handler && { handler, name: rest.slice(0, slash) };
}

const LIST_FILTERS = ['dangling', 'label', 'before', 'since', 'reference', 'until'] as const;

function listImages(ctx: RequestContext, engine: Engine): void {
  const filters = parseFilters(ctx.query.get('filters'), LIST_FILTERS);
  // Before 1.41, `filter=<name>` (singular, not JSON) was a reference filter.
  const legacy = queryString(ctx.query, 'filter');
  if (legacy !== undefined && versionBefore(ctx.version, '1.41')) filters.set('reference', [...(filters.get('reference') ?? []), legacy]);
  const all = queryBool(ctx.query, 'all');
  const dangling = filterBool(filters.get('dangling'), 'dangling');
  const refPatterns = filters.get('reference') ?? [];
  // before/since compare creation times (the config's `created`), as dockerd does.
  const before = filters.get('before')?.map((n) => createdMs(engine.images.get(n)));
  const since = filters.get('since')?.map((n) => createdMs(engine.images.get(n)));
  const until = filters.get('until')?.map(parseUntil);
  const parents = all ? new Set<string>() : engine.images.parentIds();
  const old = versionBefore(ctx.version, '1.44');
  const out = [];
  for (const v of engine.images.list()) {
    const untagged = v.repoTags.length === 0;
    if (!all && untagged && parents.has(v.record.id)) continue;
    if (dangling !== undefined && dangling !== untagged) continue;
    if (!matchLabels(filters.get('label'), v.config.config?.Labels)) continue;
    if (before && !before.every((t) => createdMs(v) < t)) continue;
    if (since && !since.every((t) => createdMs(v) > t)) continue;
    if (until && !until.every((t) => createdMs(v) < t)) continue;
    let tags = v.repoTags;
    let digests = v.repoDigests;
    if (refPatterns.length) {
      // Only the names that match are shown, and an image with none is left out.
      const matches = (name: string) => refPatterns.some((p) => referenceMatches(p, name));
      tags = tags.filter(matches);
      digests = digests.filter(matches);
      if (tags.length === 0 && digests.length === 0) continue;
    }
    const entry: Record<string, unknown> = {
      Id: v.record.id,
      ParentId: v.record.parent,
      RepoTags: tags.length ? tags : old ? ['<none>:<none>'] : [],
      RepoDigests: digests.length ? digests : old && untagged ? ['<none>@<none>'] : digests,
      Created: Math.floor(Date.parse(v.record.created) / 1000) || 0,
      Size: v.record.size,
      SharedSize: -1,
      Labels: v.config.config?.Labels ?? {},
      Containers: engine.images.usage(v.record.id).running.length + engine.images.usage(v.record.id).stopped.length,
    };
    if (old) entry.VirtualSize = v.record.size;
    out.push(entry);
  }
  sendJson(ctx, 200, out);
}

function createdMs(v: ImageView): number {
  const t = Date.parse(v.record.created);
  return Number.isNaN(t) ? 0 : t;
}

/**
 * `reference` filter: a shell-style glob (`*` and `?` stop at `/`) matched against the familiar
 * reference and against its name alone, as dockerd matches it.
 */
function referenceMatches(pattern: string, familiar: string): boolean {
  const body = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]');
  const re = new RegExp(`^${body}$`);
  const at = familiar.indexOf('@');
  let name = at >= 0 ? familiar.slice(0, at) : familiar;
  const colon = name.lastIndexOf(':');
  if (colon > name.lastIndexOf('/')) name = name.slice(0, colon);
  return re.test(familiar) || re.test(name);
}

export function inspectImage(engine: Engine, v: ImageView, version: string): Record<string, unknown> {
  const c = v.config;
  const layerDirs = engine.images.layerDirs(v.record);
  const out: Record<string, unknown> = {
    Id: v.record.id,
    RepoTags: v.repoTags,
    RepoDigests: v.repoDigests,
    Parent: v.record.parent,
    Comment: (c.history?.length ? c.history[c.history.length - 1]!.comment : '') ?? '',
    Created: c.created ?? v.record.created,
    DockerVersion: (c.docker_version as string | undefined) ?? '',
    Author: c.author ?? '',
    Config: { ...emptyConfig(), ...(c.config ?? {}) },
    Architecture: c.architecture,
    Os: c.os,
    Size: v.record.size,
    GraphDriver: {
      Name: 'overlay2',
      Data: layerDirs.length ? { LowerDir: layerDirs.slice(0, -1).reverse().join(':') || undefined, MergedDir: undefined, UpperDir: layerDirs[layerDirs.length - 1], WorkDir: undefined } : {},
    },
    RootFS: { Type: 'layers', Layers: c.rootfs?.diff_ids ?? [] },
    Metadata: { LastTagTime: '0001-01-01T00:00:00Z' },
  };
  if (c.variant) out.Variant = c.variant;
  if (versionBefore(version, '1.44')) out.VirtualSize = v.record.size;
  if (versionBefore(version, '1.45')) {
    out.Container = (c.container as string | undefined) ?? '';
    out.ContainerConfig = c.container_config ?? emptyConfig();
  }
  if (!versionBefore(version, '1.52') && !v.record.parent) delete out.Parent;
  return out;
}

function emptyConfig(): Record<string, unknown> {
  return { Hostname: '', Domainname: '', User: '', AttachStdin: false, AttachStdout: false, AttachStderr: false, Tty: false, OpenStdin: false, StdinOnce: false, Env: null, Cmd: null, Image: '', Volumes: null, WorkingDir: '', Entrypoint: null, OnBuild: null, Labels: null };
}

async function createImage(ctx: RequestContext, engine: Engine, transfer?: ImageTransferHooks): Promise<void> {
  const fromImage = queryString(ctx.query, 'fromImage');
  if (!fromImage && transfer && queryString(ctx.query, 'fromSrc')) return transfer.importImage(ctx);
  if (!fromImage) throw new BerthError('not-implemented', 'importing images (fromSrc) is not supported yet');
  const abort = new AbortController();
  ctx.res.on('close', () => {
    if (!ctx.res.writableFinished) abort.abort(new Error('client disconnected'));
  });
  const out = new JsonLineWriter(ctx.res);
  try {
    const meta = Object.fromEntries(Object.entries(ctx.req.headers).filter(([k, v]) => k.startsWith('x-meta-') && typeof v === 'string')) as Record<string, string>;
    const req = { fromImage, tag: queryString(ctx.query, 'tag'), platform: queryString(ctx.query, 'platform'), registryAuth: header(ctx, 'x-registry-auth'), signal: abort.signal, headers: meta };
    await engine.images.pullNamed(req, (m) => out.write(m));
  } catch (err) {
    if (!out.started) throw err;
    const message = err instanceof Error ? err.message : String(err);
    out.write({ errorDetail: { message }, error: message });
  }
  out.end();
}

function header(ctx: RequestContext, name: string): string | undefined {
  const v = ctx.req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

async function pruneImages(ctx: RequestContext, engine: Engine): Promise<void> {
  const filters = parseFilters(ctx.query.get('filters'), ['dangling', 'label', 'label!', 'until']);
  const dangling = filterBool(filters.get('dangling'), 'dangling') ?? true;
  const untilVals = filters.get('until');
  const until = untilVals?.length ? parseUntil(untilVals[0]!) : undefined;
  const { deleted, reclaimed } = await engine.images.prune({
    danglingOnly: dangling,
    match: (v) =>
      matchLabels(filters.get('label'), v.config.config?.Labels) &&
      !(filters.get('label!') ?? []).some((l) => matchLabels([l], v.config.config?.Labels)) &&
      (until === undefined || createdMs(v) < until),
  });
  sendJson(ctx, 200, { ImagesDeleted: deleted.length ? deleted : null, SpaceReclaimed: reclaimed });
}


