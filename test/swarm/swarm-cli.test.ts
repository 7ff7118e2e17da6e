/** The docker CLI (v28) driving swarm mode against berthd: init, services, tasks, scaling, updates, leave. */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { freePort, useDaemon, useSeededRegistry } from '../harness/index.js';
import { eventually, inspectService, runningTasks, tasksOf } from './support.js';

/** Ends promptly on SIGTERM, so stops and updates do not wait out the grace period. */
const LOOP = 'trap "exit 0" TERM; while :; do sleep 0.2; done';
/** An image reference without the `@sha256:` digest the CLI pins it to. */
const unpinned = (ref: string) => ref.replace(/@sha256:[0-9a-f]{64}$/, '');

describe('docker CLI: swarm', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  let image135 = '';
  let nodeId = '';

  before(async () => {
    image = reg().seeded.refs.busybox;
    image135 = reg().seeded.refs.busybox135;
  });
  after(async () => {
    await daemon().docker(['swarm', 'leave', '--force']).catch(() => undefined);
  });

  it('refuses swarm commands before init, then init makes this node the only manager', async () => {
    const d = daemon();
    const ls = await d.docker(['service', 'ls']);
    assert.notEqual(ls.code, 0);
    assert.match(ls.stderr, /This node is not a swarm manager\. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again\./);
    assert.equal((await d.docker(['info', '--format', '{{.Swarm.LocalNodeState}}'])).stdout.trim(), 'inactive');

    // Its own port: other tests' swarms on this host may hold 2377, which would refuse the init.
    const init = await d.docker(['swarm', 'init', '--listen-addr', '127.0.0.1:0']);
    assert.equal(init.code, 0, init.stderr);
    const m = /Swarm initialized: current node \(([a-z0-9]{25})\) is now a manager\./.exec(init.stdout);
    assert.ok(m, init.stdout);
    nodeId = m[1]!;
    assert.match(init.stdout, /docker swarm join --token SWMTKN-1-[a-z0-9]{50}-[a-z0-9]{25} \S+:\d+\n/);

    const again = await d.docker(['swarm', 'init']);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /This node is already part of a swarm/);

    const info = await d.docker(['info', '--format', '{{.Swarm.LocalNodeState}} {{.Swarm.NodeID}} {{.Swarm.ControlAvailable}} {{.Swarm.Managers}} {{.Swarm.Nodes}}']);
    assert.equal(info.stdout.trim(), `active ${nodeId} true 1 1`);
    const nodes = await d.docker(['node', 'ls', '--format', '{{.ID}} {{.Self}} {{.Status}} {{.Availability}} {{.ManagerStatus}}']);
    assert.equal(nodes.stdout.trim(), `${nodeId} true Ready Active Leader`);
    const ping = await d.request('GET', '/_ping');
    assert.equal(ping.headers['swarm'], 'active/manager');
  });

  it('service create --replicas 3 runs three task containers with the swarm labels', async () => {
    const d = daemon();
    const create = await d.docker(['service', 'create', '-d', '--name', 'web', '--replicas', '3', '--label', 'tier=front', '--container-label', 'mine=yes', image, 'sh', '-c', LOOP]);
    assert.equal(create.code, 0, create.stderr);
    const serviceId = create.stdout.trim();
    assert.match(serviceId, /^[a-z0-9]{25}$/);
    const tasks = await runningTasks(d, 'web', 3);
    assert.deepEqual(tasks.map((t) => t.Slot).sort(), [1, 2, 3]);

    const ls = await d.docker(['service', 'ls', '--format', '{{.Name}} {{.Mode}} {{.Replicas}} {{.Image}}']);
    assert.equal(ls.stdout.trim(), `web replicated 3/3 ${image}`);
    const ps = await d.docker(['service', 'ps', 'web', '--format', '{{.Name}} {{.Node}} {{.DesiredState}} {{.CurrentState}}']);
    const rows = ps.stdout.trim().split('\n').sort();
    assert.equal(rows.length, 3, ps.stdout);
    for (const [i, row] of rows.entries()) assert.match(row, new RegExp(`^web\\.${i + 1} \\S+ Running Running `));

    const names = (await d.docker(['ps', '--filter', 'is-task=true', '--format', '{{.Names}}'])).stdout.trim().split('\n').sort();
    assert.deepEqual(names, tasks.map((t) => `web.${t.Slot}.${t.ID}`).sort());
    const t = tasks[0]!;
    const labels = (await d.request('GET', `/containers/web.${t.Slot}.${t.ID}/json`)).json().Config.Labels;
    assert.equal(labels['com.docker.swarm.service.id'], serviceId);
    assert.equal(labels['com.docker.swarm.service.name'], 'web');
    assert.equal(labels['com.docker.swarm.task'], '');
    assert.equal(labels['com.docker.swarm.task.id'], t.ID);
    assert.equal(labels['com.docker.swarm.task.name'], `web.${t.Slot}.${t.ID}`);
    assert.equal(labels['com.docker.swarm.node.id'], nodeId);
    assert.equal(labels.mine, 'yes');
    assert.equal(t.Status.ContainerStatus?.ContainerID, (await d.request('GET', `/containers/web.${t.Slot}.${t.ID}/json`)).json().Id);
  });

  it('a stopped task container is replaced in its slot after the restart delay', async () => {
    const d = daemon();
    const before = await runningTasks(d, 'web', 3);
    const victim = before.find((t) => t.Slot === 2)!;
    const stoppedAt = Date.now();
    const stop = await d.docker(['stop', `web.2.${victim.ID}`]);
    assert.equal(stop.code, 0, stop.stderr);
    const replacement = await eventually('a new running task in slot 2', async () => {
      const t = (await tasksOf(d, 'web')).find((x) => x.Slot === 2 && x.ID !== victim.ID && x.Status.State === 'running');
      return t;
    }, 15_000);
    const took = Date.now() - stoppedAt;
    // The default restart policy waits 5 s before starting the replacement.
    assert.ok(took >= 4500 && took < 11_000, `replacement after ${took} ms`);
    assert.notEqual(replacement.Status.ContainerStatus?.ContainerID, victim.Status.ContainerStatus?.ContainerID);
    const old = (await tasksOf(d, 'web')).find((x) => x.ID === victim.ID)!;
    assert.equal(old.DesiredState, 'shutdown');
    assert.equal(old.Status.State, 'complete'); // the trap exits 0, and "any" restarts that too

    // `docker service ps` shows the replaced task under its successor.
    const ps = await d.docker(['service', 'ps', 'web']);
    assert.match(ps.stdout, new RegExp(`^${victim.ID.slice(0, 12)} +\\\\_ web\\.2 +\\S+ +\\S+ +Shutdown +Complete `, 'm'));
  });

  it('a task container removed by hand is replaced too, and the service stays at its replica count', async () => {
    const d = daemon();
    const before = await runningTasks(d, 'web', 3);
    const victim = before.find((t) => t.Slot === 1)!;
    const rm = await d.docker(['rm', '-f', `web.1.${victim.ID}`]);
    assert.equal(rm.code, 0, rm.stderr);
    await eventually('slot 1 running again', async () => (await tasksOf(d, 'web')).find((x) => x.Slot === 1 && x.ID !== victim.ID && x.Status.State === 'running'), 15_000);
    const old = (await tasksOf(d, 'web')).find((x) => x.ID === victim.ID)!;
    assert.equal(old.Status.State, 'failed');
    assert.equal(old.DesiredState, 'shutdown');
    await runningTasks(d, 'web', 3);
  });

  it('service scale starts and removes tasks', async () => {
    const d = daemon();
    const up = await d.docker(['service', 'scale', '-d', 'web=5']);
    assert.equal(up.code, 0, up.stderr);
    await runningTasks(d, 'web', 5);
    assert.match((await d.docker(['service', 'ls', '--format', '{{.Replicas}}'])).stdout, /^5\/5$/m);

    const down = await d.docker(['service', 'scale', '-d', 'web=2']);
    assert.equal(down.code, 0, down.stderr);
    const left = await eventually('only slots with running tasks left, surplus containers gone', async () => {
      const tasks = await tasksOf(d, 'web');
      const running = tasks.filter((t) => t.Status.State === 'running');
      const containers = (await d.docker(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=web'])).stdout.trim().split('\n').filter(Boolean);
      return running.length === 2 && containers.length === 2 && tasks.every((t) => t.DesiredState !== 'remove') ? running : undefined;
    });
    assert.equal(left.length, 2);
    assert.equal((await inspectService(d, 'web')).Spec.Mode.Replicated.Replicas, 2);
  });

  it('service update --image rolls the tasks over to the new image, and rollback brings the old one back', async () => {
    const d = daemon();
    const upd = await d.docker(['service', 'update', '-d', '--image', image135, 'web']);
    assert.equal(upd.code, 0, upd.stderr);
    await eventually('both tasks on the new image and the update completed', async () => {
      const s = await inspectService(d, 'web');
      const running = (await tasksOf(d, 'web')).filter((t) => t.Status.State === 'running' && t.DesiredState === 'running');
      return s.UpdateStatus?.State === 'completed' && running.length === 2 && running.every((t) => unpinned(t.Spec.ContainerSpec.Image) === image135);
    }, 30_000);
    const s = await inspectService(d, 'web');
    // The CLI pins the tag to the digest the registry gives for it (GET /distribution), as with dockerd.
    assert.equal(s.Spec.TaskTemplate.ContainerSpec.Image, `${image135}@${reg().seeded.digests.busybox}`);
    assert.equal(unpinned(s.PreviousSpec.TaskTemplate.ContainerSpec.Image), image);
    assert.equal(s.UpdateStatus.Message, 'update completed');

    const rb = await d.docker(['service', 'rollback', '-d', 'web']);
    assert.equal(rb.code, 0, rb.stderr);
    await eventually('rolled back to the first image', async () => {
      const svc = await inspectService(d, 'web');
      const running = (await tasksOf(d, 'web')).filter((t) => t.Status.State === 'running' && t.DesiredState === 'running');
      return svc.UpdateStatus?.State === 'rollback_completed' && running.length === 2 && running.every((t) => unpinned(t.Spec.ContainerSpec.Image) === image);
    }, 30_000);
  });

  it('service create without -d waits until the service has converged', async () => {
    const d = daemon();
    const started = Date.now();
    const r = await d.docker(['service', 'create', '--name', 'conv', '--replicas', '2', image, 'sh', '-c', LOOP], { timeoutMs: 60_000 });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout + r.stderr, /overall progress: 2 out of 2 tasks/);
    assert.match(r.stdout + r.stderr, new RegExp(`Service ${r.stdout.split('\n')[0]} converged`));
    // The CLI holds the converged state for UpdateConfig.Monitor (5 s by default) before it reports it.
    assert.ok(Date.now() - started >= 5000);
    await runningTasks(d, 'conv', 2);
  });

  it('service logs shows every task with its context', async () => {
    const d = daemon();
    const create = await d.docker(['service', 'create', '-d', '--name', 'hello', '--replicas', '2', '--restart-condition', 'none', image, 'sh', '-c', 'echo "hi from $HOSTNAME"; echo oops >&2']);
    assert.equal(create.code, 0, create.stderr);
    const logs = await eventually('two lines of output', async () => {
      const r = await d.docker(['service', 'logs', 'hello']);
      return r.stdout.trim().split('\n').length === 2 && r.stderr.trim().split('\n').length === 2 ? r : undefined;
    });
    // The output can be read before the task's end is recorded.
    const tasks = await eventually('both tasks complete', async () => {
      const ts = await tasksOf(d, 'hello');
      return ts.length === 2 && ts.every((t) => t.Status.State === 'complete') ? ts : undefined;
    });
    for (const t of tasks) {
      assert.match(logs.stdout, new RegExp(`^hello\\.${t.Slot}\\.${t.ID.slice(0, 12)}@\\S+\\s+\\| hi from \\w+$`, 'm'));
      assert.match(logs.stderr, new RegExp(`^hello\\.${t.Slot}\\.${t.ID.slice(0, 12)}@\\S+\\s+\\| oops$`, 'm'));
      assert.equal(t.Status.State, 'complete');
      assert.equal(t.DesiredState, 'shutdown');
    }
    const ls = await d.docker(['service', 'ls', '--filter', 'name=hello', '--format', '{{.Replicas}}']);
    assert.equal(ls.stdout.trim(), '0/2');
    const raw = await d.docker(['service', 'logs', '--raw', '--no-task-ids', 'hello']);
    assert.equal(raw.stdout.trim().split('\n').filter((l) => l.startsWith('hi from ')).length, 2, raw.stdout);
  });

  it('published ports: the swarm assigns ingress ports, host-mode ports become the tasks\' port bindings', async () => {
    const d = daemon();
    const hostPort = await freePort();
    const create = await d.docker(['service', 'create', '-d', '--name', 'pub', '-p', '80', '-p', `mode=host,target=90,published=${hostPort}`, image, 'sh', '-c', LOOP]);
    assert.equal(create.code, 0, create.stderr);
    const s = await inspectService(d, 'pub');
    const ingress = s.Endpoint.Ports.find((p: { TargetPort: number }) => p.TargetPort === 80);
    assert.equal(ingress.PublishMode, 'ingress');
    assert.equal(ingress.Protocol, 'tcp');
    assert.ok(ingress.PublishedPort >= 30000 && ingress.PublishedPort <= 32767, String(ingress.PublishedPort));
    assert.deepEqual(s.Endpoint.Ports.find((p: { TargetPort: number }) => p.TargetPort === 90), { Protocol: 'tcp', TargetPort: 90, PublishedPort: hostPort, PublishMode: 'host' });
    assert.equal(s.Endpoint.Spec.Mode, 'vip');
    const ls = await d.docker(['service', 'ls', '--filter', 'name=pub', '--format', '{{.Ports}}']);
    assert.match(ls.stdout, new RegExp(`\\*:${ingress.PublishedPort}->80/tcp`));
    const [t] = await runningTasks(d, 'pub', 1);
    const hc = (await d.request('GET', `/containers/${t!.Status.ContainerStatus!.ContainerID}/json`)).json().HostConfig;
    assert.deepEqual(hc.PortBindings, { '90/tcp': [{ HostIp: '', HostPort: String(hostPort) }] });
    // An update keeps the assigned ingress port.
    const upd = await d.docker(['service', 'update', '-d', '--env-add', 'X=1', 'pub']);
    assert.equal(upd.code, 0, upd.stderr);
    assert.equal((await inspectService(d, 'pub')).Endpoint.Ports.find((p: { TargetPort: number }) => p.TargetPort === 80).PublishedPort, ingress.PublishedPort);
    assert.equal((await d.docker(['service', 'rm', 'pub'])).code, 0);
  });

  it('service rm removes the tasks and their containers; swarm leave --force forgets the swarm', async () => {
    const d = daemon();
    const rm = await d.docker(['service', 'rm', 'web', 'conv', 'hello']);
    assert.equal(rm.code, 0, rm.stderr);
    assert.equal((await d.docker(['service', 'ls', '-q'])).stdout.trim(), '');
    await eventually('no task containers left', async () => (await d.docker(['ps', '-aq', '--filter', 'is-task=true'])).stdout.trim() === '');
    // Like dockerd's, a removed service's task records go once their containers are gone.
    await eventually('no task records left', async () => (await d.request('GET', '/tasks')).json().length === 0);

    await d.docker(['service', 'create', '-d', '--name', 'left-behind', image, 'sh', '-c', LOOP]);
    await runningTasks(d, 'left-behind', 1);
    const leave = await d.docker(['swarm', 'leave', '--force']);
    assert.equal(leave.code, 0, leave.stderr);
    assert.match(leave.stdout, /Node left the swarm/);
    assert.equal((await d.docker(['ps', '-aq', '--filter', 'is-task=true'])).stdout.trim(), '');
    assert.equal((await d.docker(['info', '--format', '{{.Swarm.LocalNodeState}}'])).stdout.trim(), 'inactive');
    assert.equal((await d.request('HEAD', '/_ping')).headers['swarm'], 'inactive');
    const ls = await d.docker(['service', 'ls']);
    assert.match(ls.stderr, /This node is not a swarm manager/);
  });
});
