/**
 * routes/services.ts on the wire, for what test/swarm/swarm-api.test.ts (create and its refusals,
 * list filters, inspect with insertDefaults, updates and rollbacks) does not ask: what a removal
 * takes with it, and the refusals of update and remove.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, usePulledBusybox } from '../harness/index.js';
import { eventually, inspectService, runningTasks, tasksOf } from '../swarm/support.js';
import { SERVICE_NAME, useSwarmService } from './swarm-fixture.js';

describe('services API: update refusals and removal', () => {
  const daemon = useDaemon();
  const image = usePulledBusybox(daemon, useSeededRegistry('open'));
  const swarm = useSwarmService(daemon, image);

  it('update: unknown service 404, bad rollback and registryAuthFrom 400, a missing version 400; nothing changes', async () => {
    const d = daemon();
    const s = await inspectService(d, SERVICE_NAME);
    const unknown = await d.request('POST', `/services/no-such-service/update?version=${s.Version.Index}`, { body: s.Spec });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json<{ message: string }>().message, 'service no-such-service not found');
    for (const q of ['rollback=later', 'registryAuthFrom=elsewhere', '']) {
      const sep = q ? '&' : '';
      const path = q === '' ? `/services/${s.ID}/update` : `/services/${s.ID}/update?version=${s.Version.Index}${sep}${q}`;
      const r = await d.request('POST', path, { body: { ...s.Spec, Labels: { changed: 'yes' } } });
      assert.equal(r.status, 400, `${path}: ${r.text()}`);
    }
    const after = await inspectService(d, SERVICE_NAME);
    assert.equal(after.Version.Index, s.Version.Index);
    assert.deepEqual(after.Spec.Labels, { mirror: 'yes' });
    assert.equal(swarm().serviceId, s.ID);
  });

  it('remove: the tasks and their containers go with the service; a second remove is a 404', async () => {
    const d = daemon();
    const created = await d.request('POST', '/services/create', { body: { Name: 'doomed', TaskTemplate: { ContainerSpec: { Image: image(), Args: ['sleep', '300'] } } } });
    assert.equal(created.status, 201, created.text());
    const id = created.json<{ ID: string }>().ID;
    const [task] = await runningTasks(d, 'doomed', 1, 60_000);
    const container = task!.Status.ContainerStatus!.ContainerID;
    const removed = await d.request('DELETE', `/services/doomed`);
    assert.equal(removed.status, 200, removed.text());
    assert.equal((await d.request('GET', `/services/${id}`)).status, 404);
    await eventually('the task container is removed', async () => (await d.request('GET', `/containers/${container}/json`)).status === 404, 30_000);
    const tasks = await d.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ id: [task!.ID] }))}`);
    assert.deepEqual(tasks.json(), []);
    assert.equal((await d.request('DELETE', `/services/${id}`)).status, 404);
    assert.equal((await tasksOf(d, SERVICE_NAME)).length, 1, 'the other service keeps its task');
  });
});
