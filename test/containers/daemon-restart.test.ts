/**
 * Containers outlive berthd: a kill -9 of the daemon loses no container, no log line and no exit code.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { useDaemon, useSeededRegistry } from '../harness/index.js';

describe('daemon restart', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  it('re-adopts 20 running containers after kill -9, keeps their logs, and records exits that happened meanwhile', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    assert.equal((await d.docker(['pull', '-q', image])).code, 0);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await d.docker(['run', '-d', '--name', `keep${i}`, image, 'sh', '-c', `echo hello-${i}; while true; do sleep 1; echo tick; done`]);
      assert.equal(r.code, 0, r.stderr);
      ids.push(r.stdout.trim());
    }
    const dying = (await d.docker(['run', '-d', '--name', 'dies-later', image, 'sh', '-c', 'sleep 1.5; echo bye; exit 7'])).stdout.trim();
    const pids = new Map<string, number>();
    for (const id of ids) pids.set(id, (await d.request('GET', `/containers/${id}/json`)).json().State.Pid);

    await d.kill9();
    await new Promise((r) => setTimeout(r, 2500)); // dies-later exits while the daemon is down
    await d.restart();

    for (const [i, id] of ids.entries()) {
      const c = (await d.request('GET', `/containers/${id}/json`)).json();
      assert.equal(c.State.Status, 'running', `keep${i}`);
      assert.equal(c.State.Pid, pids.get(id), 'the same process, not a new one');
      const logs = await d.docker(['logs', `keep${i}`]);
      assert.match(logs.stdout, new RegExp(`^hello-${i}\n`));
    }
    const dead = (await d.request('GET', `/containers/${dying}/json`)).json();
    assert.equal(dead.State.Status, 'exited');
    assert.equal(dead.State.ExitCode, 7);
    assert.equal((await d.docker(['logs', 'dies-later'])).stdout, 'bye\n');

    // Re-adopted containers are still watched: stopping one records its exit.
    const stop = await d.docker(['stop', '-t', '0', 'keep0']);
    assert.equal(stop.code, 0, stop.stderr);
    assert.equal((await d.request('GET', '/containers/keep0/json')).json().State.ExitCode, 137);
    const rm = await d.docker(['rm', '-f', ...ids.map((_, i) => `keep${i}`)]);
    assert.equal(rm.code, 0, rm.stderr);
  });

  it('keeps an acknowledged container and tag across kill -9', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    assert.equal((await d.docker(['pull', '-q', image])).code, 0);
    assert.equal((await d.docker(['create', '--name', 'acked', image, 'true'])).code, 0);
    assert.equal((await d.docker(['tag', image, 'acked-tag:v1'])).code, 0);
    await d.kill9();
    await d.restart();
    assert.equal((await d.request('GET', '/containers/acked/json')).status, 200);
    assert.equal((await d.request('GET', '/images/acked-tag:v1/json')).status, 200);
  });

  it("an exited container's rootfs is unmounted: on its own after the exit, by a stop of the daemon right after one, and at the start after a kill -9", async (t) => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    assert.equal((await d.docker(['pull', '-q', image])).code, 0);
    const mounted = (id: string) => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => l.split(' ')[4] === `${d.dataRoot}/containers/${id}/merged`);
    const runToExit = async (name: string) => {
      const r = await d.docker(['run', '-d', '--name', name, image, 'sh', '-c', 'echo x > /written']);
      assert.equal(r.code, 0, r.stderr);
      const id = r.stdout.trim();
      assert.equal((await d.docker(['wait', id])).stdout.trim(), '0');
      return id;
    };

    const alone = await runToExit('unmounted-alone');
    for (let i = 0; i < 100 && mounted(alone); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(!mounted(alone), 'unmounted with no operation asking for it');

    const stopped = await runToExit('unmounted-at-stop');
    await d.stop();
    assert.ok(!mounted(stopped), 'a graceful stop ends the release first');
    await d.restart();

    const killed = await runToExit('unmounted-after-kill');
    if (!mounted(killed)) t.diagnostic('already unmounted before the kill: the last check proves nothing this time');
    await d.kill9();
    await d.restart();
    assert.ok(!mounted(killed), 'the next daemon unmounts it');
    // Each kept what it wrote, and starts again.
    for (const name of ['unmounted-alone', 'unmounted-at-stop', 'unmounted-after-kill']) {
      assert.match((await d.docker(['diff', name])).stdout, /^A \/written$/m, name);
      const r = await d.docker(['start', '-a', name]);
      assert.equal(r.code, 0, r.stderr);
    }
  });
});
