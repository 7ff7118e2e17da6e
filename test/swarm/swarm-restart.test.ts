/** Swarm state lives in the state store: services keep their replicas across a kill -9 of berthd. */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { eventually, inspectService, runningTasks, tasksOf } from './support.js';

const LOOP = ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 0.2; done'];
const SEC = 1_000_000_000;

describe('swarm across daemon restarts', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';

  before(async () => {
    image = reg().seeded.refs.busybox;
  });
  after(async () => {
    await daemon().request('POST', '/swarm/leave?force=1').catch(() => undefined);
  });

  it('re-adopts running tasks, replaces a task whose container died while berthd was down, and keeps scaling', async () => {
    const d = daemon();
    const init = await d.request('POST', '/swarm/init', { body: { ListenAddr: '127.0.0.1:0', AdvertiseAddr: '127.0.0.1' } });
    assert.equal(init.status, 200, init.text());
    const swarmId = (await d.request('GET', '/swarm')).json().ID;
    const create = await d.request('POST', '/services/create', { body: { Name: 'persist', TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP } }, Mode: { Replicated: { Replicas: 3 } } } });
    assert.equal(create.status, 201, create.text());
    const before = await runningTasks(d, 'persist', 3);
    const victim = before.find((t) => t.Slot === 3)!;
    const version = (await inspectService(d, 'persist')).Version.Index;

    await d.kill9();
    // The task's process dies while nobody watches.
    process.kill(victim.Status.ContainerStatus!.PID, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 500));
    await d.restart();
    const restartedAt = Date.now();

    assert.equal((await d.request('GET', '/swarm')).json().ID, swarmId);
    assert.equal((await d.request('HEAD', '/_ping')).headers['swarm'], 'active/manager');
    assert.equal((await inspectService(d, 'persist')).Version.Index >= version, true);
    const after = await runningTasks(d, 'persist', 3, 20_000);
    for (const slot of [1, 2]) {
      const was = before.find((t) => t.Slot === slot)!;
      const now = after.find((t) => t.Slot === slot)!;
      assert.equal(now.ID, was.ID, `slot ${slot} keeps its task`);
      assert.equal(now.Status.ContainerStatus?.ContainerID, was.Status.ContainerStatus?.ContainerID);
    }
    const replacement = after.find((t) => t.Slot === 3)!;
    assert.notEqual(replacement.ID, victim.ID);
    assert.ok(Date.now() - restartedAt >= 4000, 'the replacement waited for the restart delay');
    const old = (await tasksOf(d, 'persist')).find((t) => t.ID === victim.ID)!;
    assert.equal(old.Status.State, 'failed');
    assert.equal(old.Status.Err, 'task: non-zero exit (137)');
    assert.equal((await tasksOf(d, 'persist', { 'desired-state': ['running'] })).length, 3, 'no duplicate tasks');

    const s = await inspectService(d, 'persist');
    s.Spec.Mode.Replicated.Replicas = 4;
    assert.equal((await d.request('POST', `/services/persist/update?version=${s.Version.Index}`, { body: s.Spec })).status, 200);
    await runningTasks(d, 'persist', 4);
  });

  it('a restart that was waiting out its delay still happens after a kill -9', async () => {
    const d = daemon();
    const create = await d.request('POST', '/services/create', {
      body: { Name: 'delayed', TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP }, RestartPolicy: { Condition: 'any', Delay: 4 * SEC } } },
    });
    assert.equal(create.status, 201, create.text());
    const [first] = await runningTasks(d, 'delayed', 1);
    assert.equal((await d.docker(['stop', first!.Status.ContainerStatus!.ContainerID])).code, 0);
    const stoppedAt = Date.now();
    const waiting = await eventually('a replacement waiting for its delay', async () => (await tasksOf(d, 'delayed')).find((t) => t.ID !== first!.ID && t.DesiredState === 'ready'));
    await d.kill9();
    await d.restart();
    // Bounded, with room for a loaded machine (berthd restarted, its tasks read back, the delay's rest).
    const [next] = await runningTasks(d, 'delayed', 1, 30_000);
    assert.equal(next!.ID, waiting.ID);
    assert.ok(Date.now() - stoppedAt >= 3900, 'started no earlier than the delay');

    // A graceful restart keeps everything running too.
    await d.restart();
    const [same] = await runningTasks(d, 'delayed', 1);
    assert.equal(same!.ID, waiting.ID);
    assert.equal(same!.Status.ContainerStatus?.PID, next!.Status.ContainerStatus?.PID);
  });
});
