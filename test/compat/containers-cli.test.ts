/** The docker CLI (v28) driving the container lifecycle against berthd. */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { useDaemon, useSeededRegistry } from '../harness/index.js';

describe('docker CLI: containers', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  before(async () => {
    image = reg().seeded.refs.busybox;
    const r = await daemon().docker(['pull', image]);
    assert.equal(r.code, 0, r.stderr);
  });

  it('run -d, ps, inspect, logs, stop, rm', async () => {
    const d = daemon();
    const run = await d.docker(['run', '-d', '--name', 'cli-web', '--label', 'app=web', image, 'sh', '-c', 'echo started; sleep 60']);
    assert.equal(run.code, 0, run.stderr);
    const id = run.stdout.trim();
    assert.match(id, /^[a-f0-9]{64}$/);
    const ps = await d.docker(['ps', '--format', '{{.ID}} {{.Names}} {{.Status}} {{.Labels}}']);
    assert.match(ps.stdout, new RegExp(`^${id.slice(0, 12)} cli-web Up .* app=web$`, 'm'));
    const fmt = await d.docker(['inspect', '--format', '{{.State.Status}} {{.Name}} {{.Config.Image}}', 'cli-web']);
    assert.equal(fmt.stdout.trim(), `running /cli-web ${image}`);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await d.docker(['logs', 'cli-web'])).stdout, 'started\n');
    const stop = await d.docker(['stop', '-t', '1', 'cli-web']);
    assert.equal(stop.code, 0, stop.stderr);
    assert.equal(stop.stdout.trim(), 'cli-web');
    const psa = await d.docker(['ps', '-a', '--filter', 'name=cli-web', '--format', '{{.Status}}']);
    assert.match(psa.stdout, /^Exited \(137\) /);
    assert.equal((await d.docker(['rm', 'cli-web'])).code, 0);
    const gone = await d.docker(['inspect', 'cli-web']);
    assert.notEqual(gone.code, 0);
    assert.match(gone.stderr, /No such object: cli-web|No such container/);
  });

  it('logs -f follows until the container stops; kill sends the signal', async () => {
    const d = daemon();
    assert.equal((await d.docker(['run', '-d', '--name', 'cli-follow', image, 'sh', '-c', 'trap "echo got-usr1; exit 0" USR1; echo ready; while true; do sleep 0.1; done'])).code, 0);
    const follow = d.docker(['logs', '-f', 'cli-follow'], { timeoutMs: 20_000 });
    await new Promise((r) => setTimeout(r, 500));
    const kill = await d.docker(['kill', '--signal', 'USR1', 'cli-follow']);
    assert.equal(kill.code, 0, kill.stderr);
    const f = await follow;
    assert.equal(f.code, 0, f.stderr);
    assert.equal(f.stdout, 'ready\ngot-usr1\n');
    const wait = await d.docker(['wait', 'cli-follow']);
    assert.equal(wait.stdout.trim(), '0');
  });

  it('pause, unpause, restart, rename, events', async () => {
    const d = daemon();
    const since = Math.floor(Date.now() / 1000);
    assert.equal((await d.docker(['run', '-d', '--name', 'cli-p', image, 'sleep', '60'])).code, 0);
    assert.equal((await d.docker(['pause', 'cli-p'])).code, 0);
    assert.match((await d.docker(['ps', '--filter', 'name=cli-p', '--format', '{{.Status}}'])).stdout, /\(Paused\)/);
    assert.equal((await d.docker(['unpause', 'cli-p'])).code, 0);
    assert.equal((await d.docker(['restart', '-t', '0', 'cli-p'])).code, 0);
    assert.equal((await d.docker(['rename', 'cli-p', 'cli-q'])).code, 0);
    assert.equal((await d.docker(['rm', '-f', 'cli-q'])).code, 0);
    const ev = await d.docker(['events', '--since', String(since), '--until', String(Math.ceil(Date.now() / 1000) + 1), '--filter', 'type=container', '--format', '{{.Action}}']);
    assert.equal(ev.code, 0, ev.stderr);
    const actions = ev.stdout.trim().split('\n');
    for (const a of ['create', 'start', 'pause', 'unpause', 'kill', 'die', 'stop', 'restart', 'rename', 'destroy']) assert.ok(actions.includes(a), `${a} in ${actions.join(',')}`);
  });

  it('events streams live until interrupted', async () => {
    const d = daemon();
    const child = spawn('docker', ['events', '--filter', 'event=create', '--format', '{{.Actor.Attributes.name}}'], { env: { ...process.env, DOCKER_HOST: d.dockerHost, DOCKER_CONFIG: d.dockerConfig } });
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    await new Promise((r) => setTimeout(r, 400));
    assert.equal((await d.docker(['create', '--name', 'cli-live-event', image, 'true'])).code, 0);
    for (let i = 0; i < 50 && !out.includes('cli-live-event'); i++) await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGINT');
    assert.match(out, /cli-live-event/);
  });
});
