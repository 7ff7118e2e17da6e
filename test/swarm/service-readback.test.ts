/**
 * Service specs read back as dockerd reads them: any key case in, canonical out, unknown fields gone;
 * modes (global, replicas, jobs), ForceUpdate and RollbackConfig kept; job services run to completion.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { runDockerPy } from '../harness/python.js';
import { eventually, inspectService, tasksOf } from './support.js';

describe('service specs read back', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';

  before(async () => {
    image = reg().seeded.refs.busybox;
    assert.equal((await daemon().request('POST', '/swarm/init', { body: { ListenAddr: '127.0.0.1:0', AdvertiseAddr: '127.0.0.1' } })).status, 200);
  });
  after(async () => {
    await daemon().request('POST', '/swarm/leave?force=1').catch(() => undefined);
  });

  it('normalises key case like Go, keeps modes, ForceUpdate and RollbackConfig, drops unknown fields', async () => {
    const d = daemon();
    const body = {
      name: 'case_svc',
      taskTemplate: { containerSpec: { image, args: ['sleep', '1000'], LABELS: { MixedCase: 'v' } }, forceupdate: 3, Unknown: true },
      mode: { replicated: { replicas: 2 } },
      rollbackConfig: { parallelism: 2, FAILUREACTION: 'continue', order: 'start-first', monitor: 1e9 },
      Bogus: 1,
    };
    const r = await d.request('POST', '/services/create', { body });
    assert.equal(r.status, 201, r.text());
    const spec = (await inspectService(d, 'case_svc')).Spec;
    assert.equal(spec.Name, 'case_svc');
    assert.deepEqual(spec.Mode, { Replicated: { Replicas: 2 } });
    assert.deepEqual(spec.RollbackConfig, { Parallelism: 2, FailureAction: 'continue', Order: 'start-first', Monitor: 1e9 });
    assert.equal(spec.TaskTemplate.ForceUpdate, 3);
    assert.deepEqual(spec.TaskTemplate.ContainerSpec.Labels, { MixedCase: 'v' }, 'map keys stay as given');
    assert.equal(spec.Bogus, undefined);
    assert.equal(spec.TaskTemplate.Unknown, undefined);

    const global = await d.request('POST', '/services/create', { body: { Name: 'glob_svc', TaskTemplate: { ContainerSpec: { Image: image, Args: ['sleep', '1000'] } }, Mode: { global: {} } } });
    assert.equal(global.status, 201, global.text());
    assert.deepEqual((await inspectService(d, 'glob_svc')).Spec.Mode, { Global: {} });

    // docker service update --force bumps ForceUpdate and replaces the tasks.
    const cli = await d.docker(['service', 'update', '--detach', '--force', 'case_svc']);
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal((await inspectService(d, 'case_svc')).Spec.TaskTemplate.ForceUpdate, 4);
    const ls = await d.docker(['service', 'ls', '--format', '{{.Name}} {{.Mode}}']);
    assert.match(ls.stdout, /case_svc replicated/);
    assert.match(ls.stdout, /glob_svc global/);
    assert.equal((await d.request('DELETE', '/services/case_svc')).status, 200);
    assert.equal((await d.request('DELETE', '/services/glob_svc')).status, 200);
  });

  it('docker-py: lowercase modes, RollbackConfig and force_update read back in canonical form', async () => {
    const d = daemon();
    const script = `
import docker, json
from docker.types import ServiceMode, RollbackConfig
c = docker.from_env()
img = ${JSON.stringify(image)}
a = c.services.create(img, ['sleep', '1000'], name='py_rep', mode=ServiceMode('replicated', replicas=2),
                      rollback_config=RollbackConfig(parallelism=3, failure_action='pause', order='start-first'))
b = c.services.create(img, ['sleep', '1000'], name='py_glob', mode=ServiceMode('global'))
a.reload()
a.update(force_update=True)
print(json.dumps({'rep': c.services.get('py_rep').attrs['Spec'], 'glob': c.services.get('py_glob').attrs['Spec']}))
a.remove(); b.remove()
`;
    const r = await runDockerPy(d.socket, script);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    assert.deepEqual(out.rep.Mode, { Replicated: { Replicas: 2 } });
    assert.deepEqual(out.glob.Mode, { Global: {} });
    // docker-py's update sends the spec read back with insertDefaults, so the defaults are stored too.
    assert.deepEqual({ ...out.rep.RollbackConfig, Delay: undefined, Monitor: undefined, MaxFailureRatio: undefined }, { Parallelism: 3, FailureAction: 'pause', Order: 'start-first', Delay: undefined, Monitor: undefined, MaxFailureRatio: undefined });
    assert.equal(out.rep.TaskTemplate.ForceUpdate, 1, 'force_update bumps ForceUpdate and it is kept');
  });

  it('runs a replicated job to its completions, MaxConcurrent at a time', async () => {
    const d = daemon();
    const r = await d.request('POST', '/services/create', {
      body: { Name: 'job_svc', TaskTemplate: { ContainerSpec: { Image: image, Args: ['sh', '-c', 'sleep 0.3'] } }, Mode: { ReplicatedJob: { MaxConcurrent: 2, TotalCompletions: 3 } } },
    });
    assert.equal(r.status, 201, r.text());
    const s = await inspectService(d, 'job_svc');
    assert.deepEqual(s.Spec.Mode, { ReplicatedJob: { MaxConcurrent: 2, TotalCompletions: 3 } });
    assert.equal(typeof s.JobStatus.JobIteration.Index, 'number');
    let maxRunning = 0;
    const tasks = await eventually('three completed tasks', async () => {
      const ts = await tasksOf(d, 'job_svc');
      maxRunning = Math.max(maxRunning, ts.filter((t) => ['running', 'starting', 'ready', 'preparing'].includes(t.Status.State)).length);
      return ts.filter((t) => t.Status.State === 'complete').length === 3 ? ts : undefined;
    }, 60_000, 50);
    assert.ok(maxRunning <= 2, `at most 2 at once, saw ${maxRunning}`);
    assert.deepEqual(tasks.map((t) => t.Slot).sort(), [1, 2, 3]);
    await new Promise((res) => setTimeout(res, 1000));
    assert.equal((await tasksOf(d, 'job_svc')).length, 3, 'completed jobs are not rerun');
    const ls = await d.docker(['service', 'ls', '--format', '{{.Name}} {{.Mode}}', '--filter', 'mode=replicated-job']);
    assert.equal(ls.stdout.trim(), 'job_svc replicated job');
    assert.equal((await d.request('DELETE', '/services/job_svc')).status, 200);
  });

  it('runs a global job once on the node (docker CLI) and refuses an update config for jobs', async () => {
    const d = daemon();
    const create = await d.docker(['service', 'create', '--detach', '--name', 'gjob', '--mode', 'global-job', image, 'true']);
    assert.equal(create.code, 0, create.stderr);
    await eventually('the global job to complete', async () => (await tasksOf(d, 'gjob')).some((t) => t.Status.State === 'complete'), 30_000);
    assert.deepEqual((await inspectService(d, 'gjob')).Spec.Mode, { GlobalJob: {} });
    const bad = await d.request('POST', '/services/create', { body: { Name: 'j2', TaskTemplate: { ContainerSpec: { Image: image } }, Mode: { GlobalJob: {} }, UpdateConfig: { Parallelism: 1 } } });
    assert.equal(bad.status, 400);
    assert.match(bad.json().message, /Jobs may not have an update config/);
    assert.equal((await d.request('DELETE', '/services/gjob')).status, 200);
  });
});
