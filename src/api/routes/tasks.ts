/** /tasks/...: list (with the filters the CLI sends, `_up-to-date` included) and inspect. */
import type { Router } from '../router.js';
import { sendJson } from '../request.js';
import { matchLabels, parseFilters } from '../filters.js';
import { invalidArgument } from '../../lib/errors.js';
import type { SwarmService } from '../../engine/swarm/swarm.js';
import { TASK_STATES, type TaskState } from '../../engine/swarm/swarm-model.js';
import { taskJson } from './swarm-json.js';

const TASK_FILTERS = ['id', 'label', 'name', 'node', 'service', 'desired-state', 'runtime', '_up-to-date'] as const;

export function taskRoutes(r: Router, swarm: SwarmService): void {
  r.on('GET', '/tasks', async (ctx) => {
    const f = parseFilters(ctx.query.get('filters'), TASK_FILTERS);
    const any = (key: string, pred: (v: string) => boolean) => !f.get(key)?.length || f.get(key)!.some(pred);
    for (const s of f.get('desired-state') ?? []) {
      if (s !== '' && !TASK_STATES.includes(s.toLowerCase() as TaskState)) throw invalidArgument(`Invalid desired-state filter: '${s}'`);
    }
    // Names are resolved first, as dockerd does: an unknown service or node is a 404.
    const serviceIds = await resolveAll(f.get('service'), async (v) => (await swarm.service(v)).id);
    const nodeIds = await resolveAll(f.get('node'), async (v) => (await swarm.node(v)).id);
    const upToDate = f.get('_up-to-date')?.includes('true') ?? false;
    const tasks = (await swarm.tasks()).filter(
      (t) =>
        (!serviceIds?.length || serviceIds.includes(t.serviceId)) &&
        (!nodeIds?.length || nodeIds.includes(t.nodeId)) &&
        any('id', (v) => t.id.startsWith(v)) &&
        any('name', (v) => `${t.serviceName}.${t.slot || t.nodeId}`.startsWith(v)) &&
        any('desired-state', (v) => v === '' || v.toLowerCase() === t.desiredState) &&
        any('runtime', (v) => v === 'container') &&
        matchLabels(f.get('label'), {}) &&
        (!upToDate || swarm.taskUpToDate(t)),
    );
    tasks.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
    sendJson(ctx, 200, tasks.map(taskJson));
  });
  r.on('GET', '/tasks/:id', async (ctx) => sendJson(ctx, 200, taskJson(await swarm.task(ctx.params.id!))));
}

/** Each filter value resolved in turn (the first unknown one fails the request, as dockerd's); undefined without the filter. */
async function resolveAll(values: string[] | undefined, resolve: (v: string) => Promise<string>): Promise<string[] | undefined> {
  if (!values) return undefined;
  const ids: string[] = [];
  for (const v of values) ids.push(await resolve(v));
  return ids;
}
