/**
 * /images/{name}/push, /images/{name}/get, /images/get, /images/load, /images/search, import
 * (`/images/create?fromSrc=`) and /distribution/{name}/json. The `/images/{name}/...` forms share
 * the `/images/*` wildcard with images.ts, which hands them over through the hooks returned here.
 */
import type { Router } from '../router.js';
import type { RequestContext } from '../request.js';
import { queryBool, queryString, sendJson } from '../request.js';
import { filterBool, parseFilters } from '../filters.js';
import { invalidArgument, notFound } from '../../lib/errors.js';
import { JsonLineWriter } from '../json-lines.js';
import type { ImageTransfer } from '../../engine/image-transfer/image-transfer.js';
import { parsePlatform } from '../../lib/platform.js';

export type ImageSuffixHandler = (ctx: RequestContext, name: string) => Promise<void> | void;

/** What images.ts delegates: `<name>/<suffix>` handlers by method, and import. */
export interface ImageTransferHooks {
  post: Record<string, ImageSuffixHandler>;
  get: Record<string, ImageSuffixHandler>;
  /** `POST /images/create?fromSrc=`. */
  importImage: (ctx: RequestContext) => Promise<void>;
}

export function imageTransferRoutes(r: Router, transfer: ImageTransfer): ImageTransferHooks {
  r.on('GET', '/images/get', (ctx) => save(ctx, transfer, ctx.query.getAll('names')));
  r.on('POST', '/images/load', (ctx) => load(ctx, transfer));
  r.on('GET', '/images/search', (ctx) => search(ctx, transfer));
  r.on('GET', '/distribution/*', async (ctx) => {
    const rest = ctx.params['*']!;
    if (!rest.endsWith('/json')) throw notFound('page not found');
    sendJson(ctx, 200, await transfer.distribution(rest.slice(0, -5), header(ctx, 'x-registry-auth'), clientGone(ctx)));
  });
  return {
    post: { push: (ctx, name) => push(ctx, transfer, name) },
    get: { get: (ctx, name) => save(ctx, transfer, [name]) },
    importImage: (ctx) => importImage(ctx, transfer),
  };
}

async function importImage(ctx: RequestContext, transfer: ImageTransfer): Promise<void> {
  const q = ctx.query;
  const out = new JsonLineWriter(ctx.res);
  try {
    await transfer.import(
      {
        source: queryString(q, 'fromSrc')!,
        body: ctx.req,
        repo: queryString(q, 'repo'),
        tag: queryString(q, 'tag'),
        message: queryString(q, 'message'),
        platform: parsePlatform(queryString(q, 'platform')),
        changes: q.getAll('changes'),
        signal: clientGone(ctx),
      },
      (m) => out.write(m),
    );
  } catch (err) {
    if (!out.started) throw err;
    const message = err instanceof Error ? err.message : String(err);
    out.write({ errorDetail: { message }, error: message });
  }
  out.end();
}

async function search(ctx: RequestContext, transfer: ImageTransfer): Promise<void> {
  const q = ctx.query;
  const limitText = queryString(q, 'limit');
  const limit = limitText === undefined ? 0 : Number(limitText);
  if (!Number.isInteger(limit) || limit < 0) throw invalidArgument('invalid limit specified');
  const filters = parseFilters(q.get('filters'), ['is-automated', 'is-official', 'stars']);
  let stars = 0;
  for (const s of filters.get('stars') ?? []) {
    const n = Number(s);
    if (!/^-?\d+$/.test(s)) throw invalidArgument(`invalid filter 'stars=${s}'`);
    stars = Math.max(stars, n);
  }
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(ctx.req.headers)) if (k.startsWith('x-meta-') && typeof v === 'string') headers[k] = v;
  const results = await transfer.search({
    term: queryString(q, 'term') ?? '',
    limit,
    isOfficial: filterBool(filters.get('is-official'), 'is-official'),
    isAutomated: filterBool(filters.get('is-automated'), 'is-automated'),
    stars,
    registryAuth: header(ctx, 'x-registry-auth'),
    headers,
  });
  sendJson(ctx, 200, results);
}

async function save(ctx: RequestContext, transfer: ImageTransfer, names: string[]): Promise<void> {
  const archive = await transfer.save(names);
  ctx.res.writeHead(200, { 'Content-Type': 'application/x-tar' });
  ctx.res.on('close', () => archive.destroy());
  // A failure mid-way can only cut the archive short: the client sees a truncated tar.
  archive.once('error', () => ctx.res.destroy());
  archive.pipe(ctx.res);
}

async function load(ctx: RequestContext, transfer: ImageTransfer): Promise<void> {
  // As dockerd: quiet unless asked otherwise, and always 200 with any failure in the stream.
  const quiet = queryBool(ctx.query, 'quiet', true);
  const out = new JsonLineWriter(ctx.res);
  try {
    await transfer.load(ctx.req, { quiet }, (m) => out.write(m));
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    out.write({ errorDetail: { message }, error: message });
  }
  out.end();
}

/** Aborted when the client goes away before the response finished. */
function clientGone(ctx: RequestContext): AbortSignal {
  const abort = new AbortController();
  ctx.res.on('close', () => {
    if (!ctx.res.writableFinished) abort.abort(new Error('client disconnected'));
  });
  return abort.signal;
}

function header(ctx: RequestContext, name: string): string | undefined {
  const v = ctx.req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

async function push(ctx: RequestContext, transfer: ImageTransfer, name: string): Promise<void> {
  const out = new JsonLineWriter(ctx.res);
  const signal = clientGone(ctx);
  try {
    await transfer.push(name, { tag: queryString(ctx.query, 'tag'), registryAuth: header(ctx, 'x-registry-auth'), signal }, (m) => out.write(m));
  } catch (err) {
    if (!out.started) throw err;
    const message = err instanceof Error ? err.message : String(err);
    out.write({ errorDetail: { message }, error: message });
  }
  out.end();
}
