/** /services/...: create, list, inspect, update (with rollback) and remove swarm services. */
import type { Router } from '../router.js';
import { queryBool, queryString, readJson, sendJson } from '../request.js';
import { matchLabels, parseFilters } from '../filters.js';
import { invalidArgument } from '../../lib/errors.js';
import type { SwarmService } from '../../engine/swarm/swarm.js';
import { modeName } from '../../engine/swarm/swarm-model.js';
import { serviceJson } from './swarm-json.js';
import { objectVersion, sendEmpty } from './swarm-request.js';

export function serviceRoutes(r: Router, swarm: SwarmService): void {
  r.on('POST', '/services/create', async (ctx) => {
    const body = await readJson(ctx);
    const auth = headerValue(ctx.req.headers['x-registry-auth']);
    const { id } = await swarm.createService(body, auth);
    sendJson(ctx, 201, { ID: id, Warnings: null });
  });

  r.on('GET', '/services', async (ctx) => {
    const f = parseFilters(ctx.query.get('filters'), ['id', 'label', 'mode', 'name']);
    for (const m of f.get('mode') ?? []) if (!['replicated', 'global', 'replicated-job', 'global-job'].includes(m)) throw invalidArgument(`Invalid filter: 'mode=${m}'`);
    const any = (key: string, pred: (v: string) => boolean) => !f.get(key)?.length || f.get(key)!.some(pred);
    const status = queryBool(ctx.query, 'status');
    const list = (await swarm.services()).filter(
      (s) =>
        any('id', (v) => s.id.startsWith(v)) &&
        any('name', (v) => (s.spec.Name ?? '').startsWith(v)) &&
        any('mode', (v) => v === modeName(s.spec)) &&
        matchLabels(f.get('label'), s.spec.Labels),
    );
    sendJson(ctx, 200, list.map((s) => serviceJson(s, { counts: status ? swarm.counts(s) : undefined })));
  });

  r.on('GET', '/services/:id', async (ctx) => {
    sendJson(ctx, 200, serviceJson(await swarm.service(ctx.params.id!), { insertDefaults: queryBool(ctx.query, 'insertDefaults') }));
  });

  r.on('POST', '/services/:id/update', async (ctx) => {
    const version = objectVersion(ctx, 'service');
    const body = await readJson(ctx);
    const rollback = queryString(ctx.query, 'rollback');
    if (rollback !== undefined && rollback !== 'previous') throw invalidArgument(`unrecognized rollback option ${rollback}`);
    const from = queryString(ctx.query, 'registryAuthFrom');
    if (from !== undefined && from !== 'spec' && from !== 'previous-spec') throw invalidArgument(`unsupported registryAuthFrom '${from}'`);
    await swarm.updateService(ctx.params.id!, version, body, { rollback: rollback === 'previous', registryAuth: headerValue(ctx.req.headers['x-registry-auth']) });
    sendJson(ctx, 200, { Warnings: null });
  });

  r.on('DELETE', '/services/:id', async (ctx) => {
    await swarm.removeService(ctx.params.id!);
    sendEmpty(ctx);
  });
}

function headerValue(h: string | string[] | undefined): string | undefined {
  const v = Array.isArray(h) ? h[0] : h;
  return v ? v : undefined;
}
