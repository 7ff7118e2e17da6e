/**
 * Config.Healthcheck on real containers: the probe runs inside the container, State.Health follows
 * its results (starting → healthy → unhealthy after Retries failures), events and `docker ps`
 * show it, the health filter finds it, and a probe that overruns its Timeout is a failure.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, inspect, runShell, uniqueName, useBusyboxDaemon } from './support.js';

const SECOND = 1e9;

describe('healthchecks', () => {
  const { daemon, image, containers } = useBusyboxDaemon();

  const health = async (id: string) => (await inspect(daemon(), 'containers', id)).State.Health;

  it('starting → healthy → unhealthy, with events, ps status, the health filter and the probe output logged', async () => {
    const d = daemon();
    const since = Math.floor(Date.now() / 1000);
    const name = uniqueName('hc');
    // Healthy once /ok exists (the failures before that fall in the start period and do not
    // count); /ok is removed again a few seconds later, and then failures count.
    const id = await runShell(d, image(), 'sleep 2; touch /ok; sleep 3; rm /ok; exec sleep 1000', {
      Healthcheck: { Test: ['CMD-SHELL', 'echo probing; test -f /ok'], Interval: 0.5 * SECOND, Timeout: 5 * SECOND, Retries: 2, StartPeriod: 60 * SECOND, StartInterval: 0.5 * SECOND },
    });
    containers.push(id);
    await d.request('POST', `/containers/${id}/rename?name=${name}`);
    assert.equal((await health(id)).Status, 'starting');
    const ps = await d.docker(['ps', '--filter', `id=${id}`, '--format', '{{.Status}}']);
    assert.match(ps.stdout, /\(health: starting\)/);

    await eventually(async () => (await health(id)).Status === 'healthy', 20_000, 'healthy');
    const h = await health(id);
    assert.equal(h.FailingStreak, 0);
    const last = h.Log[h.Log.length - 1];
    assert.equal(last.ExitCode, 0);
    assert.equal(last.Output, 'probing\n');
    assert.ok(Date.parse(last.End) >= Date.parse(last.Start));
    const psHealthy = await d.docker(['ps', '--filter', 'health=healthy', '--format', '{{.Names}} {{.Status}}']);
    assert.match(psHealthy.stdout, new RegExp(`^${name} Up .* \\(healthy\\)$`, 'm'));

    await eventually(async () => (await health(id)).Status === 'unhealthy', 20_000, 'unhealthy');
    const u = await health(id);
    assert.ok(u.FailingStreak >= 2);
    assert.ok(u.Log.length <= 5, 'only the last 5 results are kept');
    assert.equal(u.Log[u.Log.length - 1].ExitCode, 1);
    const filtered = (await d.request('GET', `/containers/json?filters=${encodeURIComponent(JSON.stringify({ health: ['unhealthy'] }))}`)).json();
    assert.deepEqual(filtered.map((c: { Id: string }) => c.Id), [id]);

    const ev = await d.docker(['events', '--since', String(since), '--until', String(Math.floor(Date.now() / 1000) + 1), '--filter', `container=${id}`, '--filter', 'event=health_status', '--format', '{{.Action}}']);
    assert.equal(ev.code, 0, ev.stderr);
    assert.deepEqual(ev.stdout.trim().split('\n'), ['health_status: healthy', 'health_status: unhealthy']);
  });

  it('a probe that overruns its timeout fails with dockerd\'s message; exec-form tests run without a shell', async () => {
    const d = daemon();
    const slow = await runShell(d, image(), 'exec sleep 1000', {
      Healthcheck: { Test: ['CMD', 'sleep', '30'], Interval: 0.5 * SECOND, Timeout: 0.3 * SECOND, Retries: 1 },
    });
    containers.push(slow);
    await eventually(async () => (await health(slow)).Status === 'unhealthy', 20_000, 'unhealthy by timeout');
    const log = (await health(slow)).Log;
    assert.equal(log[0].ExitCode, -1);
    assert.match(log[0].Output, /^Health check exceeded timeout \(300ms\)/);
    // The timed-out probe was killed: only the container's own process is left.
    const top = (await d.request('GET', `/containers/${slow}/top`)).json();
    await eventually(async () => (await d.request('GET', `/containers/${slow}/top`)).json().Processes.length === 1, 10_000, `probes gone: ${JSON.stringify(top.Processes)}`);
  });

  it('a probe whose background child keeps its output open is recorded with what it wrote, as dockerd: without waiting for the child', async () => {
    const d = daemon();
    const id = await runShell(d, image(), 'exec sleep 1000', {
      Healthcheck: { Test: ['CMD-SHELL', 'echo before-exit; sleep 300 &'], Interval: 0.3 * SECOND, Timeout: 60 * SECOND, Retries: 1 },
    });
    containers.push(id);
    // Each probe leaves a sleep holding the pipes for 5 minutes; the results come anyway.
    await eventually(async () => (await health(id)).Log.length >= 2, 30_000, 'two probe results');
    const h = await health(id);
    assert.equal(h.Status, 'healthy');
    for (const e of h.Log) assert.deepEqual([e.ExitCode, e.Output], [0, 'before-exit\n']);
  });

  it('failures inside the start period do not count; NONE disables an image healthcheck', async () => {
    const d = daemon();
    const id = await runShell(d, image(), 'exec sleep 1000', {
      Healthcheck: { Test: ['CMD', 'false'], Interval: 0.3 * SECOND, StartPeriod: 60 * SECOND, StartInterval: 0.3 * SECOND, Retries: 1 },
    });
    containers.push(id);
    await eventually(async () => (await health(id)).Log.length >= 3, 20_000, 'three probes');
    const h = await health(id);
    assert.equal(h.Status, 'starting');
    assert.equal(h.FailingStreak, 0);

    const none = await runShell(d, image(), 'exec sleep 1000', { Healthcheck: { Test: ['NONE'] } });
    containers.push(none);
    const c = await inspect(d, 'containers', none);
    assert.equal(c.State.Health, undefined);
  });

  it('the check stops with the container and starts again with it', async () => {
    const d = daemon();
    const id = await runShell(d, image(), 'exec sleep 1000', { Healthcheck: { Test: ['CMD', 'true'], Interval: 0.3 * SECOND } });
    containers.push(id);
    await eventually(async () => (await health(id)).Status === 'healthy', 20_000, 'healthy');
    assert.equal((await d.request('POST', `/containers/${id}/stop?t=1`)).status, 204);
    const stoppedLog = (await health(id)).Log.length;
    await new Promise((r) => setTimeout(r, 1200));
    assert.equal((await health(id)).Log.length, stoppedLog, 'no probes while stopped');
    assert.equal((await d.request('POST', `/containers/${id}/start`)).status, 204);
    assert.equal((await health(id)).Status, 'starting');
    await eventually(async () => (await health(id)).Status === 'healthy', 20_000, 'healthy again');
  });
});
