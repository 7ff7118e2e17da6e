/** GET /containers/{id}/top (`docker top`) and /stats (`docker stats`) on real running containers. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createInterface } from 'node:readline';
import { createContainer, inspect, runShell, useBusyboxDaemon, waitExit, waitForPath } from './support.js';

describe('top and stats', () => {
  const { daemon, image, containers } = useBusyboxDaemon();

  it('top: the container processes only, with the default -ef and with ps_args', async () => {
    const d = daemon();
    const id = await runShell(d, image(), 'sleep 1001 & sleep 1002 & touch /ready; wait');
    containers.push(id);
    await waitForPath(d, id, '/ready');
    const pid = (await inspect(d, 'containers', id)).State.Pid as number;

    const r = await d.request('GET', `/containers/${id}/top`);
    assert.equal(r.status, 200, r.text());
    const top = r.json();
    assert.deepEqual(top.Titles, ['UID', 'PID', 'PPID', 'C', 'STIME', 'TTY', 'TIME', 'CMD']);
    const cmds = top.Processes.map((p: string[]) => p[7]).sort();
    assert.deepEqual(cmds, ['sh -c sleep 1001 & sleep 1002 & touch /ready; wait', 'sleep 1001', 'sleep 1002']);
    assert.ok(top.Processes.some((p: string[]) => p[1] === String(pid)), 'the init process is listed by its host pid');

    const aux = await d.request('GET', `/containers/${id}/top?ps_args=${encodeURIComponent('-o pid,comm')}`);
    assert.equal(aux.status, 200, aux.text());
    assert.deepEqual(aux.json().Titles, ['PID', 'COMMAND']);
    assert.deepEqual(aux.json().Processes.map((p: string[]) => p[1]).sort(), ['sh', 'sleep', 'sleep']);

    const cli = await d.docker(['top', id]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /sleep 1001/);
    assert.doesNotMatch(cli.stdout, /berthd|conmon/);
  });

  it('top: 409 for a container that is not running, 404 for none, 500 for bad ps args', async () => {
    const d = daemon();
    const id = await createContainer(d, { Image: image(), Cmd: ['true'] });
    containers.push(id);
    const r = await d.request('GET', `/containers/${id}/top`);
    assert.equal(r.status, 409);
    assert.match(r.json().message, /is not running/);
    assert.equal((await d.request('GET', '/containers/nope/top')).status, 404);
    const running = await runShell(d, image(), 'exec sleep 1000');
    containers.push(running);
    const bad = await d.request('GET', `/containers/${running}/top?ps_args=--no-such-option`);
    assert.equal(bad.status, 500);
    assert.match(bad.json().message, /Error running ps/);
  });

  it('stats: one sample with stream=0 carries usage, limits and a precpu for CPU %', async () => {
    const d = daemon();
    const id = await runShell(d, image(), 'while :; do :; done', { HostConfig: { Memory: 64 * 1024 * 1024, PidsLimit: 50 } });
    containers.push(id);
    const r = await d.request('GET', `/containers/${id}/stats?stream=0`, { timeoutMs: 30_000 });
    assert.equal(r.status, 200, r.text());
    const s = r.json();
    assert.equal(s.id, id);
    assert.match(s.name, /^\//);
    assert.ok(Date.parse(s.read) > Date.parse(s.preread), 'preread is the earlier sample');
    assert.ok(s.cpu_stats.cpu_usage.total_usage > s.precpu_stats.cpu_usage.total_usage, 'a busy loop uses CPU');
    assert.ok(s.cpu_stats.system_cpu_usage > s.precpu_stats.system_cpu_usage);
    assert.ok(s.cpu_stats.online_cpus >= 1);
    assert.ok(s.cpu_stats.cpu_usage.usage_in_usermode > 0);
    assert.equal(typeof s.cpu_stats.throttling_data.periods, 'number');
    assert.ok(s.memory_stats.usage > 0);
    assert.equal(s.memory_stats.limit, 64 * 1024 * 1024);
    assert.equal(typeof s.memory_stats.stats, 'object');
    assert.equal(s.pids_stats.current, 1);
    assert.equal(s.pids_stats.limit, 50);
    assert.ok('blkio_stats' in s);

    const one = (await d.request('GET', `/containers/${id}/stats?stream=0&one-shot=1`)).json();
    assert.equal(one.preread, '0001-01-01T00:00:00Z');
    assert.equal(one.precpu_stats.cpu_usage.total_usage, 0);
  });

  it('stats: a stream gives one object per second until the client leaves', async () => {
    const d = daemon();
    const id = await runShell(d, image(), 'exec sleep 1000');
    containers.push(id);
    const res = await d.stream('GET', `/containers/${id}/stats`);
    assert.equal(res.statusCode, 200);
    const lines: any[] = [];
    const started = Date.now();
    for await (const line of createInterface({ input: res })) {
      lines.push(JSON.parse(line));
      if (lines.length === 3) break;
    }
    res.destroy();
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 1500 && elapsed < 10_000, `3 samples in ${elapsed} ms`);
    assert.equal(lines[1].preread, lines[0].read);
    assert.deepEqual(lines[1].precpu_stats, lines[0].cpu_stats);
  });

  it('stats: a stopped container gives zeros; docker stats --no-stream prints sane numbers', async () => {
    const d = daemon();
    const stopped = await runShell(d, image(), 'true');
    containers.push(stopped);
    assert.equal(await waitExit(d, stopped), 0);
    const z = (await d.request('GET', `/containers/${stopped}/stats?stream=0`)).json();
    assert.equal(z.read, '0001-01-01T00:00:00Z');
    assert.equal(z.cpu_stats.cpu_usage.total_usage, 0);
    assert.equal(z.id, stopped);

    const id = await runShell(d, image(), 'exec sleep 1000', { HostConfig: { Memory: 32 * 1024 * 1024 } });
    containers.push(id);
    const name = (await inspect(d, 'containers', id)).Name.slice(1);
    const r = await d.docker(['stats', '--no-stream', '--format', '{{.Name}}|{{.CPUPerc}}|{{.MemUsage}}|{{.PIDs}}', id]);
    assert.equal(r.code, 0, r.stderr);
    const [n, cpu, mem, pids] = r.stdout.trim().split('|');
    assert.equal(n, name);
    assert.match(cpu!, /^\d+\.\d\d%$/);
    assert.ok(Number.parseFloat(cpu!) < 50, `an idle container: ${cpu}`);
    assert.match(mem!, /^[\d.]+[KMG]?i?B \/ 32MiB$/);
    assert.equal(pids, '1');
  });
});
