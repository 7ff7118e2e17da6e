/**
 * routes/containers.ts on the wire, for what the lifecycle, list and create tests in test/containers/
 * do not call: POST /containers/prune (filters until, label, label!; ContainersDeleted and
 * SpaceReclaimed; running and paused containers kept).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { useDaemon, useSeededRegistry, usePulledBusybox, type TestDaemon } from '../harness/index.js';
import { query } from './support.js';

interface PruneReport {
  ContainersDeleted: string[] | null;
  SpaceReclaimed: number;
}

async function prune(d: TestDaemon, filters?: Record<string, string[]>): Promise<PruneReport> {
  const res = await d.request('POST', `/containers/prune${query({ filters: filters && JSON.stringify(filters) })}`);
  assert.equal(res.status, 200, res.text());
  return res.json<PruneReport>();
}

/** A container made by `docker create` or `docker run`; its id. */
async function container(d: TestDaemon, args: string[]): Promise<string> {
  const r = await d.docker(args);
  assert.equal(r.code, 0, r.stderr);
  const printed = r.stdout.trim();
  if (/^[0-9a-f]{64}$/.test(printed)) return printed;
  // `run` without -d prints the container's output, not its id: ask by name.
  return (await d.request('GET', `/containers/${args[args.indexOf('--name') + 1]}/json`)).json<{ Id: string }>().Id;
}

async function allIds(d: TestDaemon): Promise<string[]> {
  return (await d.request('GET', '/containers/json?all=1')).json<{ Id: string }[]>().map((c) => c.Id).sort();
}

describe('containers API: prune', () => {
  const daemon = useDaemon();
  const busybox = usePulledBusybox(daemon, useSeededRegistry('open'));

  it('removes exited and created containers, keeps running and paused ones; the answer lists them and their writable layers', async () => {
    const d = daemon();
    const wrote = await container(d, ['run', '--name', 'p-wrote', busybox(), 'sh', '-c', 'head -c 200000 /dev/urandom > /big']);
    const created = await container(d, ['create', '--name', 'p-created', busybox(), 'true']);
    const running = await container(d, ['run', '-d', '--name', 'p-running', busybox(), 'sleep', '300']);
    const paused = await container(d, ['run', '-d', '--name', 'p-paused', busybox(), 'sleep', '300']);
    assert.equal((await d.docker(['pause', paused])).code, 0);
    try {
      const sizes = new Map((await d.request('GET', '/containers/json?all=1&size=1')).json<{ Id: string; SizeRw: number }[]>().map((c) => [c.Id, c.SizeRw]));
      assert.ok(sizes.get(wrote)! >= 200000, `SizeRw of the container that wrote 200000 bytes: ${sizes.get(wrote)}`);

      const report = await prune(d);
      assert.deepEqual([...(report.ContainersDeleted ?? [])].sort(), [wrote, created].sort());
      assert.equal(report.SpaceReclaimed, sizes.get(wrote)! + sizes.get(created)!);
      assert.deepEqual(await allIds(d), [running, paused].sort());
      assert.equal((await d.request('GET', `/containers/${wrote}/json`)).status, 404);
      const states = (await d.request('GET', '/containers/json?all=1')).json<{ Id: string; State: string }[]>();
      assert.deepEqual(Object.fromEntries(states.map((c) => [c.Id, c.State])), { [running]: 'running', [paused]: 'paused' });

      assert.deepEqual(await prune(d), { ContainersDeleted: null, SpaceReclaimed: 0 }, 'nothing left to prune');
    } finally {
      await d.docker(['rm', '-f', running, paused]);
    }
  });

  it('label and label! select by key or key=value; docker container prune --filter reports the same', async () => {
    const d = daemon();
    const a = await container(d, ['create', '--label', 'team=a', '--label', 'tier=web', busybox(), 'true']);
    const b = await container(d, ['create', '--label', 'team=b', busybox(), 'true']);
    const none = await container(d, ['create', busybox(), 'true']);
    try {
      assert.deepEqual((await prune(d, { label: ['team=a', 'tier'] })).ContainersDeleted, [a], 'every label filter must match');
      assert.deepEqual((await prune(d, { label: ['team=c'] })).ContainersDeleted, null);
      assert.deepEqual((await prune(d, { 'label!': ['team'] })).ContainersDeleted, [none]);
      assert.deepEqual(await allIds(d), [b]);
      const cli = await d.docker(['container', 'prune', '--force', '--filter', 'label=team=b']);
      assert.equal(cli.code, 0, cli.stderr);
      assert.match(cli.stdout, new RegExp(`Deleted Containers:\\n${b}\\n`));
      assert.match(cli.stdout, /Total reclaimed space: \d/);
      assert.deepEqual(await allIds(d), []);
    } finally {
      await d.docker(['rm', '-f', a, b, none]);
    }
  });

  it('until: a timestamp or a duration; only containers created before it go', async () => {
    const d = daemon();
    const old = await container(d, ['create', busybox(), 'true']);
    // Created times have sub-second precision; a clear gap keeps the cut between the two.
    await sleep(1100);
    const cut = new Date();
    await sleep(1100);
    const young = await container(d, ['create', busybox(), 'true']);
    try {
      assert.deepEqual((await prune(d, { until: ['1h'] })).ContainersDeleted, null, 'both are younger than an hour');
      assert.deepEqual((await prune(d, { until: [String(Math.floor(cut.getTime() / 1000))] })).ContainersDeleted, [old]);
      assert.deepEqual((await prune(d, { until: [new Date(Date.now() + 60_000).toISOString()] })).ContainersDeleted, [young]);
    } finally {
      await d.docker(['rm', '-f', old, young]);
    }
  });

  it('bad filters are a 400 and remove nothing', async () => {
    const d = daemon();
    const kept = await container(d, ['create', busybox(), 'true']);
    try {
      for (const filters of ['{"status":["exited"]}', '{"until":["not a time"]}', '{not json']) {
        const res = await d.request('POST', `/containers/prune?filters=${encodeURIComponent(filters)}`);
        assert.equal(res.status, 400, `${filters}: ${res.text()}`);
        assert.match(res.json<{ message: string }>().message, /invalid filter/);
      }
      assert.deepEqual(await allIds(d), [kept]);
    } finally {
      await d.docker(['rm', '-f', kept]);
    }
  });
});
