/** Swarm mode through raw HTTP: wire formats, errors, versions, restart policies, updates, nodes. */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { eventually, inspectService, runningTasks, tasksOf, type WireTask } from './support.js';

const NOT_MANAGER = 'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
/** dockerd's answer to a stale `version`: swarmkit's error, passed on as a gRPC error of code Unknown (a 500). */
const OUT_OF_SEQUENCE = 'rpc error: code = Unknown desc = update out of sequence';
const LOOP = ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 0.2; done'];
const SEC = 1_000_000_000;

describe('swarm API', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  let image135 = '';
  let nodeId = '';

  before(async () => {
    image = reg().seeded.refs.busybox;
    image135 = reg().seeded.refs.busybox135;
    // Pulled up front, so task start times below do not include a pull.
    assert.equal((await daemon().docker(['pull', '-q', image])).code, 0);
  });
  after(async () => {
    await daemon().request('POST', '/swarm/leave?force=1').catch(() => undefined);
  });

  async function createService(d: TestDaemon, spec: Record<string, unknown>): Promise<string> {
    const r = await d.request('POST', '/services/create', { body: spec });
    assert.equal(r.status, 201, r.text());
    return r.json().ID;
  }

  async function updateService(d: TestDaemon, name: string, change: (spec: any) => void, query = ''): Promise<void> {
    const s = await inspectService(d, name);
    change(s.Spec);
    const r = await d.request('POST', `/services/${s.ID}/update?version=${s.Version.Index}${query}`, { body: s.Spec });
    assert.equal(r.status, 200, r.text());
  }

  it('answers 503 before init, for every swarm object', async () => {
    const d = daemon();
    for (const [method, path] of [['GET', '/swarm'], ['GET', '/nodes'], ['GET', '/services'], ['GET', '/tasks'], ['GET', '/swarm/unlockkey'], ['POST', '/services/create']] as const) {
      const r = await d.request(method, path, method === 'POST' ? { body: { Name: 'x', TaskTemplate: { ContainerSpec: { Image: image } } } } : {});
      assert.equal(r.status, 503, `${method} ${path}`);
      assert.equal(r.json().message, NOT_MANAGER);
    }
    const leave = await d.request('POST', '/swarm/leave?force=1');
    assert.equal(leave.status, 503);
    assert.equal(leave.json().message, 'This node is not part of a swarm');
    assert.equal((await d.request('GET', '/info')).json().Swarm.LocalNodeState, 'inactive');
    assert.equal((await d.request('GET', '/_ping')).headers['swarm'], 'inactive');
  });

  it('init returns the node id; /swarm, /nodes, /info and /_ping describe the one-node swarm', async () => {
    const d = daemon();
    const init = await d.request('POST', '/swarm/init', { body: { ListenAddr: '127.0.0.1:0', AdvertiseAddr: '127.0.0.1', Spec: { Orchestration: { TaskHistoryRetentionLimit: 3 } } } });
    assert.equal(init.status, 200, init.text());
    nodeId = init.json();
    assert.match(nodeId, /^[a-z0-9]{25}$/);
    const again = await d.request('POST', '/swarm/init', { body: {} });
    assert.equal(again.status, 503);
    assert.match(again.json().message, /^This node is already part of a swarm\./);

    const sw = (await d.request('GET', '/swarm')).json();
    assert.match(sw.ID, /^[a-z0-9]{25}$/);
    assert.match(sw.JoinTokens.Worker, /^SWMTKN-1-[a-z0-9]{50}-[a-z0-9]{25}$/);
    assert.match(sw.JoinTokens.Manager, /^SWMTKN-1-[a-z0-9]{50}-[a-z0-9]{25}$/);
    assert.notEqual(sw.JoinTokens.Worker, sw.JoinTokens.Manager);
    assert.equal(sw.Spec.Orchestration.TaskHistoryRetentionLimit, 3);
    assert.equal(sw.Spec.Raft.ElectionTick, 10);
    assert.ok(sw.Version.Index > 0);

    const node = (await d.request('GET', `/nodes/${nodeId}`)).json();
    assert.equal(node.ID, nodeId);
    // The swarm port is any free one (ListenAddr 127.0.0.1:0): other tests' swarms on this host may hold 2377.
    const managerAddr: string = node.ManagerStatus.Addr;
    assert.match(managerAddr, /^127\.0\.0\.1:[1-9]\d*$/);
    assert.deepEqual(node.ManagerStatus, { Leader: true, Reachability: 'reachable', Addr: managerAddr });
    assert.equal(node.Status.State, 'ready');
    assert.equal(node.Status.Addr, '127.0.0.1');
    assert.equal(node.Spec.Role, 'manager');
    assert.equal(node.Spec.Availability, 'active');
    assert.equal((await d.request('GET', `/nodes/${node.Description.Hostname}`)).json().ID, nodeId);
    assert.equal((await d.request('GET', '/nodes/nope')).status, 404);
    assert.deepEqual((await d.request('GET', '/nodes')).json().map((n: { ID: string }) => n.ID), [nodeId]);
    assert.equal((await d.request('GET', `/nodes?filters=${encodeURIComponent('{"role":["worker"]}')}`)).json().length, 0);

    const info = (await d.request('GET', '/info')).json().Swarm;
    assert.equal(info.NodeID, nodeId);
    assert.equal(info.NodeAddr, '127.0.0.1');
    assert.equal(info.LocalNodeState, 'active');
    assert.equal(info.ControlAvailable, true);
    assert.equal(info.Managers, 1);
    assert.equal(info.Nodes, 1);
    assert.deepEqual(info.RemoteManagers, [{ NodeID: nodeId, Addr: managerAddr }]);
    assert.equal(info.Cluster.ID, sw.ID);
    assert.equal(info.Cluster.JoinTokens, undefined);
    assert.equal((await d.request('HEAD', '/_ping')).headers['swarm'], 'active/manager');
  });

  it('swarm update checks the version, rotates tokens and manages the unlock key', async () => {
    const d = daemon();
    const sw = (await d.request('GET', '/swarm')).json();
    const stale = await d.request('POST', `/swarm/update?version=${sw.Version.Index - 1}`, { body: sw.Spec });
    assert.equal(stale.status, 500);
    assert.equal(stale.json().message, OUT_OF_SEQUENCE);
    assert.equal((await d.request('POST', '/swarm/update', { body: sw.Spec })).status, 400);
    assert.deepEqual((await d.request('GET', '/swarm/unlockkey')).json(), { UnlockKey: '' });

    const locked = { ...sw.Spec, EncryptionConfig: { AutoLockManagers: true } };
    const r = await d.request('POST', `/swarm/update?version=${sw.Version.Index}&rotateWorkerToken=1`, { body: locked });
    assert.equal(r.status, 200, r.text());
    const after = (await d.request('GET', '/swarm')).json();
    assert.notEqual(after.JoinTokens.Worker, sw.JoinTokens.Worker);
    assert.equal(after.JoinTokens.Manager, sw.JoinTokens.Manager);
    assert.ok(after.Version.Index > sw.Version.Index);
    const key = (await d.request('GET', '/swarm/unlockkey')).json().UnlockKey;
    assert.match(key, /^SWMKEY-1-\S+$/);

    const unlocked = { ...after.Spec, EncryptionConfig: { AutoLockManagers: false } };
    assert.equal((await d.request('POST', `/swarm/update?version=${after.Version.Index}`, { body: unlocked })).status, 200);
    assert.deepEqual((await d.request('GET', '/swarm/unlockkey')).json(), { UnlockKey: '' });
  });

  it('validates service specs and names', async () => {
    const d = daemon();
    const noImage = await d.request('POST', '/services/create', { body: { Name: 'bad', TaskTemplate: { ContainerSpec: {} } } });
    assert.equal(noImage.status, 400);
    assert.equal(noImage.json().message, 'ContainerSpec: image reference must be provided');
    const badName = await d.request('POST', '/services/create', { body: { Name: 'no_underscores!', TaskTemplate: { ContainerSpec: { Image: image } } } });
    assert.equal(badName.status, 400);
    const badPort = await d.request('POST', '/services/create', { body: { Name: 'p', TaskTemplate: { ContainerSpec: { Image: image } }, EndpointSpec: { Ports: [{ TargetPort: 0 }] } } });
    assert.equal(badPort.status, 400);

    const id = await createService(d, { Name: 'named', Labels: { team: 'a' }, TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP } }, Mode: { Replicated: { Replicas: 1 } } });
    const dup = await d.request('POST', '/services/create', { body: { Name: 'named', TaskTemplate: { ContainerSpec: { Image: image } } } });
    assert.equal(dup.status, 409);
    assert.match(dup.json().message, /name conflicts with an existing object: service named already exists/);

    const list = (filters: unknown, extra = '') => d.request('GET', `/services?filters=${encodeURIComponent(JSON.stringify(filters))}${extra}`).then((r) => r.json());
    assert.deepEqual((await list({ name: ['nam'] })).map((s: { ID: string }) => s.ID), [id]);
    assert.deepEqual((await list({ id: [id.slice(0, 6)] })).map((s: { ID: string }) => s.ID), [id]);
    assert.equal((await list({ label: ['team=b'] })).length, 0);
    assert.equal((await list({ mode: ['global'] })).length, 0);
    assert.equal((await d.request('GET', '/services?filters=' + encodeURIComponent('{"bogus":["x"]}'))).status, 400);
    await runningTasks(d, 'named', 1);
    const [withStatus] = await list({ name: ['named'] }, '&status=1');
    assert.deepEqual(withStatus.ServiceStatus, { RunningTasks: 1, DesiredTasks: 1, CompletedTasks: 0 });

    const plain = await inspectService(d, id.slice(0, 8));
    assert.equal(plain.ID, id);
    assert.equal(plain.Spec.TaskTemplate.RestartPolicy, undefined);
    assert.deepEqual(plain.Endpoint.Spec, { Mode: 'vip' });
    const filled = (await d.request('GET', `/services/named?insertDefaults=true`)).json();
    assert.deepEqual(filled.Spec.TaskTemplate.RestartPolicy, { Condition: 'any', Delay: 5 * SEC, MaxAttempts: 0, Window: 0 });
    assert.equal(filled.Spec.UpdateConfig.Order, 'stop-first');
    assert.equal(filled.Spec.TaskTemplate.ContainerSpec.StopGracePeriod, 10 * SEC);
    const missing = await d.request('GET', '/services/nope');
    assert.equal(missing.status, 404);
    assert.equal(missing.json().message, 'service nope not found');

    const stale = await d.request('POST', `/services/${id}/update?version=${plain.Version.Index - 1}`, { body: plain.Spec });
    assert.equal(stale.status, 500);
    assert.equal(stale.json().message, OUT_OF_SEQUENCE);
    assert.equal((await d.request('POST', `/services/${id}/update`, { body: plain.Spec })).status, 400);
    const rename = await d.request('POST', `/services/${id}/update?version=${plain.Version.Index}`, { body: { ...plain.Spec, Name: 'renamed' } });
    // swarmkit's Unimplemented, dockerd's 501.
    assert.equal(rename.status, 501);
    assert.equal(rename.json().message, 'rpc error: code = Unimplemented desc = renaming services is not supported');
    const rollback = await d.request('POST', `/services/${id}/update?version=${plain.Version.Index}&rollback=previous`, { body: plain.Spec });
    assert.equal(rollback.status, 400);
    assert.match(rollback.json().message, /does not have a previous spec/);

    assert.equal((await d.request('DELETE', `/services/${id}`)).status, 200);
    assert.equal((await d.request('GET', `/services/${id}`)).status, 404);
    await eventually('the task and its container gone', async () => (await d.request('GET', '/tasks')).json().length === 0 && (await d.docker(['ps', '-aq', '--filter', `label=com.docker.swarm.service.id=${id}`])).stdout.trim() === '');
  });

  it('on-failure restarts a failing task MaxAttempts times after Delay; a clean exit is not restarted', async () => {
    const d = daemon();
    await createService(d, {
      Name: 'flaky',
      TaskTemplate: { ContainerSpec: { Image: image, Args: ['sh', '-c', 'exit 3'] }, RestartPolicy: { Condition: 'on-failure', Delay: 0.3 * SEC, MaxAttempts: 2 } },
    });
    const tasks = await eventually('three failed tasks', async () => {
      const ts = await tasksOf(d, 'flaky');
      return ts.length === 3 && ts.every((t) => t.Status.State === 'failed') ? ts : undefined;
    });
    for (const t of tasks) {
      assert.equal(t.Slot, 1);
      assert.equal(t.Status.Err, 'task: non-zero exit (3)');
      assert.equal(t.Status.ContainerStatus?.ExitCode, 3);
      assert.equal(t.DesiredState, 'shutdown');
    }
    // Each replacement starts no sooner than Delay after its predecessor's container stopped.
    const runs = await Promise.all(tasks.map(async (t) => (await d.request('GET', `/containers/${t.Status.ContainerStatus!.ContainerID}/json`)).json().State));
    runs.sort((a, b) => Date.parse(a.StartedAt) - Date.parse(b.StartedAt));
    for (let i = 1; i < runs.length; i++) {
      const gap = Date.parse(runs[i].StartedAt) - Date.parse(runs[i - 1].FinishedAt);
      assert.ok(gap >= 280, `restart ${i} came ${gap} ms after the exit`);
    }
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await tasksOf(d, 'flaky')).length, 3, 'no restart beyond MaxAttempts');

    await createService(d, { Name: 'once', TaskTemplate: { ContainerSpec: { Image: image, Args: ['true'] }, RestartPolicy: { Condition: 'on-failure', Delay: 0.1 * SEC } } });
    const done = await eventually('a completed task', async () => (await tasksOf(d, 'once')).find((t) => t.Status.State === 'complete'));
    assert.equal(done.Status.Message, 'finished');
    await new Promise((r) => setTimeout(r, 800));
    assert.equal((await tasksOf(d, 'once')).length, 1);
    const [status] = (await d.request('GET', `/services?status=1&filters=${encodeURIComponent('{"name":["once"]}')}`)).json();
    assert.deepEqual(status.ServiceStatus, { RunningTasks: 0, DesiredTasks: 1, CompletedTasks: 1 });
    await d.request('DELETE', '/services/flaky');
    await d.request('DELETE', '/services/once');
  });

  it('keeps at most TaskHistoryRetentionLimit tasks per slot, with their containers', async () => {
    const d = daemon();
    const id = await createService(d, { Name: 'churn', TaskTemplate: { ContainerSpec: { Image: image, Args: ['sh', '-c', 'exit 1'] }, RestartPolicy: { Condition: 'any', Delay: 0.1 * SEC } } });
    // Many restarts happen; the history never grows past the limit of 3 set at init.
    const seen = new Set<string>();
    await eventually('at least 6 tasks over time', async () => {
      const ts = await tasksOf(d, 'churn');
      assert.ok(ts.length <= 3, `${ts.length} tasks kept`);
      for (const t of ts) seen.add(t.ID);
      return seen.size >= 6;
    }, 30_000, 50);
    // A reaped task's record goes first and its container behind it (as swarmkit's reaper deletes the
    // task and the agent then removes the container): the containers follow within moments.
    let kept = 0;
    await eventually('at most 3 containers', async () => {
      kept = (await d.docker(['ps', '-aq', '--filter', `label=com.docker.swarm.service.id=${id}`])).stdout.trim().split('\n').length;
      return kept <= 3;
    }, 5000, 20).catch(() => assert.fail(`${kept} containers kept`));
    await d.request('DELETE', `/services/${id}`);
  });

  it('lists tasks with the filters the CLI sends; _up-to-date keeps only tasks of the current spec', async () => {
    const d = daemon();
    const id = await createService(d, { Name: 'filt', TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP } }, Mode: { Replicated: { Replicas: 2 } } });
    const first = await runningTasks(d, 'filt', 2);
    await updateService(d, 'filt', (spec) => (spec.TaskTemplate.ContainerSpec.Env = ['V=2']));
    const fresh = await eventually('two running tasks of the new spec', async () => {
      const ts = await tasksOf(d, id, { '_up-to-date': ['true'] });
      return ts.length === 2 && ts.every((t) => t.Status.State === 'running') ? ts : undefined;
    }, 30_000);
    for (const t of fresh) assert.deepEqual(t.Spec.ContainerSpec.Env, ['V=2']);
    const all = await tasksOf(d, 'filt');
    assert.equal(all.length, 4);
    assert.deepEqual((await tasksOf(d, 'filt', { 'desired-state': ['shutdown'] })).map((t) => t.ID).sort(), first.map((t) => t.ID).sort());
    assert.equal((await tasksOf(d, 'filt', { 'desired-state': ['running'], node: [nodeId] })).length, 2);
    const one = await d.request('GET', `/tasks/${fresh[0]!.ID}`);
    assert.equal(one.json().ID, fresh[0]!.ID);
    assert.equal((await d.request('GET', '/tasks/nosuchtask')).status, 404);
    assert.equal((await d.request('GET', `/tasks?filters=${encodeURIComponent('{"service":["nosuchservice"]}')}`)).status, 404);
    assert.equal((await d.request('GET', `/tasks?filters=${encodeURIComponent('{"desired-state":["sleepy"]}')}`)).status, 400);
    await d.request('DELETE', `/services/${id}`);
  });

  /** When a task's container started, and when the one it replaced stopped. */
  async function containerTimes(d: TestDaemon, t: WireTask): Promise<{ started: number; finished: number }> {
    const c = (await d.request('GET', `/containers/${t.Status.ContainerStatus!.ContainerID}/json`)).json();
    return { started: Date.parse(c.State.StartedAt), finished: Date.parse(c.State.FinishedAt) };
  }

  async function replacedPairs(d: TestDaemon, service: string): Promise<{ old: WireTask; next: WireTask }[]> {
    const ts = await tasksOf(d, service);
    const pairs = [];
    for (const slot of new Set(ts.map((t) => t.Slot))) {
      const inSlot = ts.filter((t) => t.Slot === slot).sort((a, b) => (a.CreatedAt < b.CreatedAt ? -1 : 1));
      pairs.push({ old: inSlot[0]!, next: inSlot[inSlot.length - 1]! });
    }
    return pairs;
  }

  it('rolls an update stop-first one at a time with the configured delay', async () => {
    const d = daemon();
    await createService(d, {
      Name: 'stopfirst',
      TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP } },
      Mode: { Replicated: { Replicas: 3 } },
      UpdateConfig: { Parallelism: 1, Delay: 1 * SEC, Order: 'stop-first', Monitor: 0.5 * SEC },
    });
    await runningTasks(d, 'stopfirst', 3);
    await updateService(d, 'stopfirst', (spec) => (spec.TaskTemplate.ContainerSpec.Image = image135));
    const s = await eventually('update completed', async () => {
      const svc = await inspectService(d, 'stopfirst');
      return svc.UpdateStatus?.State === 'completed' ? svc : undefined;
    }, 30_000);
    assert.equal(s.UpdateStatus.Message, 'update completed');
    const pairs = await replacedPairs(d, 'stopfirst');
    assert.equal(pairs.length, 3);
    const starts: number[] = [];
    for (const { old, next } of pairs) {
      assert.equal(next.Spec.ContainerSpec.Image, image135);
      assert.equal(next.Status.State, 'running');
      assert.equal(old.Status.State, 'shutdown');
      const o = await containerTimes(d, old);
      const n = await containerTimes(d, next);
      assert.ok(n.started >= o.finished, 'the new task starts after the old one stopped');
      starts.push(n.started);
    }
    starts.sort();
    assert.ok(starts[2]! - starts[0]! >= 1900, `batches are a Delay apart (${starts.join(', ')})`);
    await d.request('DELETE', '/services/stopfirst');
  });

  it('rolls an update start-first, two at a time', async () => {
    const d = daemon();
    await createService(d, {
      Name: 'startfirst',
      TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP } },
      Mode: { Replicated: { Replicas: 2 } },
      UpdateConfig: { Parallelism: 2, Order: 'start-first', Monitor: 0.5 * SEC },
    });
    await runningTasks(d, 'startfirst', 2);
    await updateService(d, 'startfirst', (spec) => (spec.TaskTemplate.ContainerSpec.Env = ['NEW=1']));
    await eventually('update completed', async () => (await inspectService(d, 'startfirst')).UpdateStatus?.State === 'completed', 30_000);
    for (const { old, next } of await replacedPairs(d, 'startfirst')) {
      assert.deepEqual(next.Spec.ContainerSpec.Env, ['NEW=1']);
      const o = await containerTimes(d, old);
      const n = await containerTimes(d, next);
      assert.ok(n.started < o.finished, 'the new task runs before the old one stops');
    }
    await d.request('DELETE', '/services/startfirst');
  });

  it('a failing update pauses by default, and rolls back with FailureAction rollback', async () => {
    const d = daemon();
    await createService(d, { Name: 'pauser', TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP }, RestartPolicy: { Delay: 0.2 * SEC } }, Mode: { Replicated: { Replicas: 2 } }, UpdateConfig: { Monitor: 1 * SEC } });
    await runningTasks(d, 'pauser', 2);
    await updateService(d, 'pauser', (spec) => (spec.TaskTemplate.ContainerSpec.Args = ['sh', '-c', 'exit 1']));
    const paused = await eventually('update paused', async () => {
      const s = await inspectService(d, 'pauser');
      return s.UpdateStatus?.State === 'paused' ? s : undefined;
    }, 20_000);
    assert.match(paused.UpdateStatus.Message, /^update paused due to failure or early termination of task [a-z0-9]{25}$/);
    // Only the first slot was touched: the other still runs the old spec.
    const running = (await tasksOf(d, 'pauser')).filter((t) => t.Status.State === 'running');
    assert.ok(running.some((t) => t.Spec.ContainerSpec.Args?.[2] === LOOP[2]));

    await createService(d, {
      Name: 'backer',
      TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP }, RestartPolicy: { Delay: 0.2 * SEC } },
      Mode: { Replicated: { Replicas: 2 } },
      UpdateConfig: { FailureAction: 'rollback', Monitor: 1 * SEC },
      RollbackConfig: { Parallelism: 0, Monitor: 0.5 * SEC },
    });
    await runningTasks(d, 'backer', 2);
    await updateService(d, 'backer', (spec) => (spec.TaskTemplate.ContainerSpec.Args = ['sh', '-c', 'exit 1']));
    const back = await eventually('rolled back', async () => {
      const s = await inspectService(d, 'backer');
      return s.UpdateStatus?.State === 'rollback_completed' ? s : undefined;
    }, 30_000);
    assert.match(back.UpdateStatus.Message, /^rollback completed$/);
    assert.deepEqual(back.Spec.TaskTemplate.ContainerSpec.Args, LOOP);
    assert.deepEqual(back.PreviousSpec.TaskTemplate.ContainerSpec.Args, ['sh', '-c', 'exit 1']);
    const tasks = await runningTasks(d, 'backer', 2);
    for (const t of tasks) assert.deepEqual(t.Spec.ContainerSpec.Args, LOOP);
    await d.request('DELETE', '/services/pauser');
    await d.request('DELETE', '/services/backer');
  });

  it('draining the node stops its tasks, which wait as pending until it is active again', async () => {
    const d = daemon();
    await createService(d, { Name: 'drainme', TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP } }, Mode: { Replicated: { Replicas: 2 } } });
    await runningTasks(d, 'drainme', 2);
    const node = (await d.request('GET', `/nodes/${nodeId}`)).json();
    const stale = await d.request('POST', `/nodes/${nodeId}/update?version=${node.Version.Index - 1}`, { body: { ...node.Spec, Availability: 'drain' } });
    assert.equal(stale.status, 500);
    assert.equal(stale.json().message, OUT_OF_SEQUENCE);
    const drain = await d.request('POST', `/nodes/${nodeId}/update?version=${node.Version.Index}`, { body: { ...node.Spec, Availability: 'drain' } });
    assert.equal(drain.status, 200, drain.text());
    const pending = await eventually('two pending tasks, nothing running', async () => {
      const ts = await tasksOf(d, 'drainme');
      const p = ts.filter((t) => t.Status.State === 'pending');
      return p.length === 2 && ts.every((t) => t.Status.State !== 'running') ? p : undefined;
    });
    for (const t of pending) {
      assert.equal(t.Status.Err, 'no suitable node (1 node not available for new tasks)');
      assert.equal(t.NodeID, undefined);
    }
    assert.equal((await d.docker(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=drainme'])).stdout.trim(), '');
    const drained = (await d.request('GET', `/nodes/${nodeId}`)).json();
    assert.equal(drained.Spec.Availability, 'drain');
    assert.equal((await d.request('POST', `/nodes/${nodeId}/update?version=${drained.Version.Index}`, { body: { ...drained.Spec, Availability: 'active' } })).status, 200);
    const back = await runningTasks(d, 'drainme', 2);
    assert.deepEqual(back.map((t) => t.ID).sort(), pending.map((t) => t.ID).sort());
    await d.request('DELETE', '/services/drainme');
  });

  it('placement constraints and MaxReplicas keep tasks pending until the node fits', async () => {
    const d = daemon();
    await createService(d, { Name: 'picky', TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP }, Placement: { Constraints: ['node.role==manager', 'node.labels.zone==a'] } } });
    const [waiting] = await eventually('a pending task', async () => {
      const ts = await tasksOf(d, 'picky');
      return ts.length === 1 && ts[0]!.Status.State === 'pending' ? ts : undefined;
    });
    assert.equal(waiting!.Status.Err, 'no suitable node (scheduling constraints not satisfied on 1 node)');
    const node = (await d.request('GET', `/nodes/${nodeId}`)).json();
    const label = await d.request('POST', `/nodes/${nodeId}/update?version=${node.Version.Index}`, { body: { ...node.Spec, Labels: { zone: 'a' } } });
    assert.equal(label.status, 200, label.text());
    const [placed] = await runningTasks(d, 'picky', 1);
    assert.equal(placed!.ID, waiting!.ID);

    await createService(d, { Name: 'capped', TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP }, Placement: { MaxReplicas: 1 } }, Mode: { Replicated: { Replicas: 2 } } });
    const capped = await eventually('one running, one pending', async () => {
      const ts = await tasksOf(d, 'capped');
      const running = ts.filter((t) => t.Status.State === 'running');
      const pending = ts.filter((t) => t.Status.State === 'pending');
      return running.length === 1 && pending.length === 1 ? pending[0] : undefined;
    });
    assert.equal(capped.Status.Err, 'no suitable node (max replicas per node limit exceed)');
    await d.request('DELETE', '/services/picky');
    await d.request('DELETE', '/services/capped');
  });

  it('a task with a healthcheck is starting until it is healthy', async () => {
    const d = daemon();
    await createService(d, {
      Name: 'healthy',
      TaskTemplate: {
        ContainerSpec: {
          Image: image,
          Args: ['sh', '-c', 'trap "exit 0" TERM; sleep 2; touch /tmp/ok; while :; do sleep 0.2; done'],
          HealthCheck: { Test: ['CMD-SHELL', 'test -f /tmp/ok'], Interval: 0.3 * SEC, Timeout: 1 * SEC, Retries: 20 },
        },
      },
    });
    const starting = await eventually('the task starting with its container up', async () => (await tasksOf(d, 'healthy')).find((t) => t.Status.State === 'starting' && t.Status.ContainerStatus?.PID));
    const c = (await d.request('GET', `/containers/${starting.Status.ContainerStatus!.ContainerID}/json`)).json();
    assert.equal(c.State.Status, 'running');
    const [running] = await runningTasks(d, 'healthy', 1);
    assert.equal(running!.ID, starting.ID);
    assert.equal((await d.request('GET', `/containers/${starting.Status.ContainerStatus!.ContainerID}/json`)).json().State.Health.Status, 'healthy');
    await d.request('DELETE', '/services/healthy');
  });

  it('refuses what it cannot run: missing secrets, missing networks', async () => {
    const d = daemon();
    const secret = await d.request('POST', '/services/create', { body: { Name: 's', TaskTemplate: { ContainerSpec: { Image: image, Secrets: [{ SecretID: 'x', SecretName: 'x', File: { Name: 'x' } }] } } } });
    assert.equal(secret.status, 400, 'a secret that does not exist');
    assert.match(secret.json().message, /secret not found: x/);
    const nets = await d.request('POST', '/services/create', { body: { Name: 'n', TaskTemplate: { ContainerSpec: { Image: image }, Networks: [{ Target: 'overlay1' }] } } });
    assert.equal(nets.status, 404, 'a network that does not exist');
    assert.match(nets.json().message, /network overlay1 not found/);
    const names = (await d.request('GET', '/services')).json().map((x: { Spec: { Name: string } }) => x.Spec.Name);
    for (const n of ['s', 'n']) assert.ok(!names.includes(n), `${n} was not created`);
  });

  it('a global service runs one task on the node, named after the node', async () => {
    const d = daemon();
    const id = await createService(d, { Name: 'everywhere', TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP } }, Mode: { Global: {} } });
    const [t] = await runningTasks(d, 'everywhere', 1);
    assert.equal(t!.Slot, undefined);
    assert.equal(t!.NodeID, nodeId);
    assert.equal((await d.request('GET', `/containers/everywhere.${nodeId}.${t!.ID}/json`)).status, 200);
    const [s] = (await d.request('GET', `/services?status=1&filters=${encodeURIComponent('{"mode":["global"]}')}`)).json();
    assert.equal(s.ID, id);
    assert.deepEqual(s.ServiceStatus, { RunningTasks: 1, DesiredTasks: 1, CompletedTasks: 0 });
    await d.request('DELETE', `/services/${id}`);
  });

  it('service logs carry the task context for the CLI', async () => {
    const d = daemon();
    const id = await createService(d, { Name: 'talker', TaskTemplate: { ContainerSpec: { Image: image, Args: ['sh', '-c', 'echo one; echo two'] }, RestartPolicy: { Condition: 'none' } } });
    const [t] = await eventually('the task completed', async () => {
      const ts = await tasksOf(d, 'talker');
      return ts.length === 1 && ts[0]!.Status.State === 'complete' ? ts : undefined;
    });
    const r = await d.request('GET', `/services/${id}/logs?stdout=1&stderr=1&details=1`);
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'application/vnd.docker.multiplexed-stream');
    const lines: string[] = [];
    for (let off = 0; off < r.body.length; ) {
      const len = r.body.readUInt32BE(off + 4);
      assert.equal(r.body[off], 1);
      lines.push(r.body.subarray(off + 8, off + 8 + len).toString());
      off += 8 + len;
    }
    const ctx = `com.docker.swarm.node.id=${nodeId},com.docker.swarm.service.id=${id},com.docker.swarm.task.id=${t!.ID}`;
    assert.deepEqual(lines, [`${ctx} one\n`, `${ctx} two\n`]);
    const tail = await d.request('GET', `/tasks/${t!.ID}/logs?stdout=1&tail=1`);
    assert.equal(tail.body.subarray(8).toString(), 'two\n');
    assert.equal((await d.request('GET', `/services/${id}/logs`)).status, 400);
    await d.request('DELETE', `/services/${id}`);
  });

  it('leave needs force on the last manager', async () => {
    const d = daemon();
    const r = await d.request('POST', '/swarm/leave');
    assert.equal(r.status, 503);
    assert.match(r.json().message, /^You are attempting to leave the swarm on a node that is participating as a manager\./);
    assert.equal((await d.request('POST', '/swarm/leave?force=true')).status, 200);
    assert.equal((await d.request('GET', '/swarm')).status, 503);
  });
});
