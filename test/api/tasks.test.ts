/**
 * routes/tasks.ts on the wire, for what test/swarm/swarm-api.test.ts (the service and _up-to-date
 * filters through the CLI's requests) does not ask: inspect of one task, and the other filters.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, usePulledBusybox, type TestDaemon } from '../harness/index.js';
import type { WireTask } from '../swarm/support.js';
import { SERVICE_NAME, useSwarmService } from './swarm-fixture.js';

async function taskIds(d: TestDaemon, filters: Record<string, string[]>): Promise<string[]> {
  const r = await d.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify(filters))}`);
  assert.equal(r.status, 200, r.text());
  return r.json<WireTask[]>().map((t) => t.ID);
}

describe('tasks API: inspect and filters', () => {
  const daemon = useDaemon();
  const swarm = useSwarmService(daemon, usePulledBusybox(daemon, useSeededRegistry('open')));

  it('inspect: the task as listed; an unknown id is a 404', async () => {
    const d = daemon();
    const { task, serviceId, nodeId } = swarm();
    const r = await d.request('GET', `/tasks/${task.ID}`);
    assert.equal(r.status, 200, r.text());
    const t = r.json<WireTask>();
    assert.equal(t.ID, task.ID);
    assert.equal(t.ServiceID, serviceId);
    assert.equal(t.NodeID, nodeId);
    assert.equal(t.Slot, 1);
    assert.equal(t.DesiredState, 'running');
    assert.equal(t.Status.State, 'running');
    assert.equal(t.Status.ContainerStatus!.ContainerID, task.Status.ContainerStatus!.ContainerID);
    const listed = (await d.request('GET', '/tasks')).json<WireTask[]>().find((x) => x.ID === task.ID);
    assert.deepEqual({ ...t, Status: undefined, Version: undefined, UpdatedAt: undefined }, { ...listed, Status: undefined, Version: undefined, UpdatedAt: undefined });
    const unknown = await d.request('GET', '/tasks/no-such-task');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json<{ message: string }>().message, 'task no-such-task not found');
  });

  it('filters: id prefix, name, node, desired-state, runtime; bad ones are refused', async () => {
    const d = daemon();
    const { task, nodeId } = swarm();
    assert.deepEqual(await taskIds(d, { id: [task.ID.slice(0, 8)] }), [task.ID]);
    assert.deepEqual(await taskIds(d, { name: [`${SERVICE_NAME}.1`] }), [task.ID]);
    assert.deepEqual(await taskIds(d, { name: ['other.1'] }), []);
    assert.deepEqual(await taskIds(d, { node: [nodeId] }), [task.ID]);
    assert.deepEqual(await taskIds(d, { 'desired-state': ['running'] }), [task.ID]);
    assert.deepEqual(await taskIds(d, { 'desired-state': ['shutdown'] }), []);
    assert.deepEqual(await taskIds(d, { runtime: ['container'] }), [task.ID]);
    const badState = await d.request('GET', `/tasks?filters=${encodeURIComponent('{"desired-state":["sleeping"]}')}`);
    assert.equal(badState.status, 400);
    assert.equal(badState.json<{ message: string }>().message, "Invalid desired-state filter: 'sleeping'");
    assert.equal((await d.request('GET', `/tasks?filters=${encodeURIComponent('{"service":["no-such-service"]}')}`)).status, 404);
    assert.equal((await d.request('GET', `/tasks?filters=${encodeURIComponent('{"colour":["red"]}')}`)).status, 400);
  });
});
