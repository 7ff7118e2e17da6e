/** POST /commit and the container views beside the lifecycle: top, changes, export, stats. */
import { pipeline } from 'node:stream/promises';
import type { Router } from '../router.js';
import { queryBool, queryString, readJson, sendJson, type RequestContext } from '../request.js';
import { invalidArgument } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { ContainerConfig } from '../../lib/oci.js';
import type { ContainerService } from '../../engine/containers/container-service.js';
import type { StatsJson } from '../../lib/docker-api-types.js';

const STATS_INTERVAL_MS = 1000;

export function containerExtraRoutes(r: Router, containers: ContainerService): void {
  r.on('POST', '/commit', async (ctx) => {
    const body = await readJson(ctx);
    if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) throw invalidArgument('invalid JSON: expected a container config');
    const container = ctx.query.get('container') ?? '';
    if (!container) throw invalidArgument('No container name or ID supplied');
    const { imageId } = await containers.commit({
      container,
      repo: queryString(ctx.query, 'repo'),
      tag: queryString(ctx.query, 'tag'),
      comment: queryString(ctx.query, 'comment'),
      author: queryString(ctx.query, 'author'),
      pause: queryBool(ctx.query, 'pause', true),
      changes: ctx.query.getAll('changes').filter((s) => s.trim() !== ''),
      config: (body ?? undefined) as ContainerConfig | undefined,
    });
    sendJson(ctx, 201, { Id: imageId });
  });

  r.on('GET', '/containers/:id/top', async (ctx) => {
    sendJson(ctx, 200, await containers.top(ctx.params.id!, queryString(ctx.query, 'ps_args')));
  });

  r.on('GET', '/containers/:id/changes', async (ctx) => {
    sendJson(ctx, 200, await containers.changes(ctx.params.id!));
  });

  r.on('GET', '/containers/:id/export', async (ctx) => {
    const tar = await containers.export(ctx.params.id!);
    ctx.res.writeHead(200, { 'Content-Type': 'application/x-tar' });
    // Headers are out: a failure now can only cut the stream short.
    await pipeline(tar, ctx.res).catch((err) => {
      log.warn('export: stream ended early', { id: ctx.params.id, err });
      ctx.res.destroy();
    });
  });

  r.on('GET', '/containers/:id/stats', (ctx) => stats(ctx, containers));
}

async function stats(ctx: RequestContext, containers: ContainerService): Promise<void> {
  const c = containers.get(ctx.params.id!);
  const stream = queryBool(ctx.query, 'stream', true);
  const oneShot = queryBool(ctx.query, 'one-shot');
  if (oneShot && stream) throw invalidArgument('cannot have stream=true and one-shot=true');
  ctx.res.writeHead(200, { 'Content-Type': 'application/json' });
  let gone = false;
  ctx.res.on('close', () => (gone = true));
  const send = (s: StatsJson) => ctx.res.write(JSON.stringify(s) + '\n');
  const running = () => c.state.status === 'running' || c.state.status === 'paused';

  if (!running()) {
    ctx.res.end(JSON.stringify(containers.emptyStats(c)) + '\n');
    return;
  }
  let prev = await containers.sampleStats(c);
  if (!stream) {
    // Without a stream dockerd answers with the second sample, so CPU % can be computed from precpu.
    if (!oneShot && prev) {
      await sleep(STATS_INTERVAL_MS);
      prev = (running() && (await containers.sampleStats(c, prev))) || prev;
    }
    ctx.res.end(JSON.stringify(prev ?? containers.emptyStats(c)) + '\n');
    return;
  }
  if (prev) send(prev);
  while (!gone && running()) {
    await sleep(STATS_INTERVAL_MS);
    if (gone || !running()) break;
    const next = await containers.sampleStats(c, prev);
    if (!next) break;
    send(next);
    prev = next;
  }
  if (!gone) ctx.res.end();
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
