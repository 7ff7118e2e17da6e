/** `docker cp`: HEAD, GET and PUT /containers/{id}/archive. */
import type { Router } from '../router.js';
import { queryBool, type RequestContext } from '../request.js';
import { invalidArgument } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { ContainerService } from '../../engine/containers/container-service.js';
import type { PathStat } from '../../lib/docker-api-types.js';

export function containerArchiveRoutes(r: Router, containers: ContainerService): void {
  const archive = containers.archive;
  r.on('HEAD', '/containers/:id/archive', async (ctx) => {
    const stat = await archive.stat(ctx.params.id!, pathParam(ctx));
    ctx.res.writeHead(200, { 'X-Docker-Container-Path-Stat': statHeader(stat) });
    ctx.res.end();
  });

  r.on('GET', '/containers/:id/archive', async (ctx) => {
    const { stat, send } = await archive.archive(ctx.params.id!, pathParam(ctx));
    ctx.res.writeHead(200, { 'X-Docker-Container-Path-Stat': statHeader(stat), 'Content-Type': 'application/x-tar' });
    // Headers are out: a failure now can only cut the stream short.
    await send(ctx.res).catch((err) => {
      log.warn('archive: stream ended early', { id: ctx.params.id, err });
      ctx.res.destroy();
    });
  });

  r.on('PUT', '/containers/:id/archive', async (ctx) => {
    // dockerd: overwriting a directory with a non-directory (and the reverse) is allowed unless asked not to.
    await archive.extract(ctx.params.id!, pathParam(ctx), ctx.req, {
      noOverwriteDirNonDir: queryBool(ctx.query, 'noOverwriteDirNonDir'),
      copyUIDGID: queryBool(ctx.query, 'copyUIDGID'),
    });
    ctx.res.writeHead(200);
    ctx.res.end();
  });
}

function pathParam(ctx: RequestContext): string {
  const path = ctx.query.get('path') ?? '';
  if (path === '') throw invalidArgument('bad parameter: path cannot be empty');
  return path;
}

/** Base64 (standard) of the stat's JSON, as dockerd sends it. */
function statHeader(stat: PathStat): string {
  return Buffer.from(JSON.stringify(stat)).toString('base64');
}
