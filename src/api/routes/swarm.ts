/** /swarm/... and /nodes/...: the cluster of one node. Services and tasks have their own route files. */
import type { Router } from '../router.js';
import { queryBool, readJsonObject, sendJson } from '../request.js';
import { matchLabels, parseFilters } from '../filters.js';
import { invalidArgument } from '../../lib/errors.js';
import type { InitRequest, SwarmService } from '../../engine/swarm/swarm.js';
import type { NodeSpec, SwarmSpec } from '../../engine/swarm/swarm-model.js';
import { clusterJson, nodeJson } from './swarm-json.js';
import { serviceRoutes } from './services.js';
import { taskRoutes } from './tasks.js';
import { secretRoutes } from './secrets.js';
import { swarmLogRoutes } from './swarm-logs.js';
import { objectVersion, sendEmpty } from './swarm-request.js';

export function swarmRoutes(r: Router, swarm: SwarmService): void {
  r.on('POST', '/swarm/init', async (ctx) => {
    const body = await readJsonObject(ctx);
    sendJson(ctx, 200, await swarm.init(body as InitRequest));
  });
  r.on('POST', '/swarm/join', async (ctx) => {
    const body = await readJsonObject(ctx);
    await swarm.join(body as Parameters<SwarmService['join']>[0]);
    sendEmpty(ctx);
  });
  r.on('GET', '/swarm', async (ctx) => sendJson(ctx, 200, clusterJson(await swarm.inspect(), true)));
  r.on('POST', '/swarm/leave', async (ctx) => {
    await swarm.leave(queryBool(ctx.query, 'force'));
    sendEmpty(ctx);
  });
  r.on('POST', '/swarm/update', async (ctx) => {
    const version = objectVersion(ctx, 'swarm');
    const body = await readJsonObject(ctx);
    await swarm.update(version, body as SwarmSpec, {
      workerToken: queryBool(ctx.query, 'rotateWorkerToken'),
      managerToken: queryBool(ctx.query, 'rotateManagerToken'),
      unlockKey: queryBool(ctx.query, 'rotateManagerUnlockKey'),
    });
    sendEmpty(ctx);
  });
  r.on('GET', '/swarm/unlockkey', async (ctx) => sendJson(ctx, 200, { UnlockKey: await swarm.unlockKey() }));
  r.on('POST', '/swarm/unlock', async (ctx) => {
    const body = await readJsonObject(ctx);
    await swarm.unlock(body.UnlockKey);
    sendEmpty(ctx);
  });

  r.on('GET', '/nodes', async (ctx) => {
    const f = parseFilters(ctx.query.get('filters'), ['id', 'label', 'membership', 'name', 'node.label', 'role']);
    const any = (key: string, pred: (v: string) => boolean) => !f.get(key)?.length || f.get(key)!.some(pred);
    for (const m of f.get('membership') ?? []) if (m !== 'accepted' && m !== 'pending') throw invalidArgument(`Invalid membership filter: '${m}'`);
    for (const role of f.get('role') ?? []) if (role !== 'manager' && role !== 'worker') throw invalidArgument(`Invalid role filter: '${role}'`);
    const nodes = (await swarm.nodes()).filter(
      (n) =>
        any('id', (v) => n.id.startsWith(v)) &&
        any('name', (v) => (n.description?.hostname ?? swarm.host.name).startsWith(v) || (!!n.spec.Name && n.spec.Name.startsWith(v))) &&
        any('membership', (v) => v === 'accepted') &&
        any('role', (v) => v === n.spec.Role) &&
        matchLabels(f.get('node.label'), n.spec.Labels) &&
        matchLabels(f.get('label'), {}),
    );
    sendJson(ctx, 200, nodes.map((n) => nodeJson(n, swarm)));
  });
  r.on('GET', '/nodes/:id', async (ctx) => sendJson(ctx, 200, nodeJson(await swarm.node(ctx.params.id!), swarm)));
  r.on('POST', '/nodes/:id/update', async (ctx) => {
    const version = objectVersion(ctx, 'node');
    const body = await readJsonObject(ctx);
    await swarm.updateNode(ctx.params.id!, version, body as NodeSpec);
    sendEmpty(ctx);
  });
  r.on('DELETE', '/nodes/:id', async (ctx) => {
    await swarm.removeNode(ctx.params.id!, queryBool(ctx.query, 'force'));
    sendEmpty(ctx);
  });

  serviceRoutes(r, swarm);
  taskRoutes(r, swarm);
  secretRoutes(r, swarm);
  swarmLogRoutes(r, swarm);
}
