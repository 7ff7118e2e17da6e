/**
 * Operations that change a container's state for a moment are on record before they act: a kill -9
 * of berthd in the middle of a commit's pause, a restart or an exec is finished or undone when the
 * daemon comes back, so the container is in the state the API last acknowledged.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isAlive, useDaemon, useSeededRegistry } from '../harness/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('operations interrupted by kill -9', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  async function waitFor(what: string, fn: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await fn())) {
      if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
      await sleep(20);
    }
  }

  it('a container paused only by an interrupted commit runs again after the restart', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    // Enough upper-dir data that the commit stays paused for a while.
    const run = await d.docker(['run', '-d', '--name', 'busy', image, 'sh', '-c', 'dd if=/dev/urandom of=/big bs=1M count=120 2>/dev/null; echo ready; while :; do sleep 1; done']);
    assert.equal(run.code, 0, run.stderr);
    await waitFor('the data to be written', async () => (await d.docker(['logs', 'busy'])).stdout.includes('ready'), 60_000);

    let caught = false;
    for (let attempt = 0; attempt < 3 && !caught; attempt++) {
      const commit = d.request('POST', '/commit?container=busy&repo=snap&pause=1').catch(() => undefined);
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline) {
        const st = (await d.request('GET', '/containers/busy/json')).json().State;
        if (st.Paused) {
          caught = true;
          break;
        }
        await sleep(5);
      }
      if (caught) await d.kill9();
      await commit;
    }
    assert.ok(caught, 'saw the container paused by the commit');
    await d.restart();

    const st = (await d.request('GET', '/containers/busy/json')).json().State;
    assert.equal(st.Paused, false);
    assert.equal(st.Status, 'running');
    // Frozen processes cannot run an exec: this one must finish.
    const exec = await d.docker(['exec', 'busy', 'echo', 'thawed'], { timeoutMs: 15_000 });
    assert.equal(exec.code, 0, exec.stderr);
    assert.equal(exec.stdout, 'thawed\n');
    // A pause the user asked for is kept across a restart.
    assert.equal((await d.docker(['pause', 'busy'])).code, 0);
    await d.kill9();
    await d.restart();
    assert.equal((await d.request('GET', '/containers/busy/json')).json().State.Paused, true);
    assert.equal((await d.docker(['rm', '-f', 'busy'])).code, 0);
  });

  it('a restart interrupted between its stop and its start is finished', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    const run = await d.docker(['run', '-d', '--name', 'bouncy', image, 'sh', '-c', 'trap "echo got-term; sleep 1; exit 0" TERM; echo up; while :; do sleep 0.1; done']);
    assert.equal(run.code, 0, run.stderr);
    await waitFor('the container to be up', async () => (await d.docker(['logs', 'bouncy'])).stdout.includes('up'));
    const before = (await d.request('GET', '/containers/bouncy/json')).json().State;

    const restart = d.request('POST', '/containers/bouncy/restart?t=10').catch(() => undefined);
    await waitFor('SIGTERM to reach the container', async () => (await d.docker(['logs', 'bouncy'])).stdout.includes('got-term'));
    await d.kill9();
    await restart;
    // The container exits while berthd is down.
    await waitFor('the old process to exit', async () => !isAlive(before.Pid), 10_000);
    await d.restart();

    const after = (await d.request('GET', '/containers/bouncy/json')).json().State;
    assert.equal(after.Status, 'running', JSON.stringify(after));
    assert.notEqual(after.Pid, before.Pid);
    assert.equal((await d.docker(['rm', '-f', 'bouncy'])).code, 0);
  });

  it('an exec running when berthd died is ended on restart', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    assert.equal((await d.docker(['run', '-d', '--name', 'host', image, 'sleep', '1000'])).code, 0);
    const create = await d.request('POST', '/containers/host/exec', { body: { Cmd: ['sleep', '999'] } });
    assert.equal(create.status, 201, create.text());
    const execId = create.json().Id;
    assert.equal((await d.request('POST', `/exec/${execId}/start`, { body: { Detach: true } })).status, 200);
    let pid = 0;
    await waitFor('the exec to run', async () => {
      pid = (await d.request('GET', `/exec/${execId}/json`)).json().Pid;
      return pid > 0;
    });
    assert.ok(isAlive(pid));
    await d.kill9();
    await d.restart();
    await waitFor('the orphaned exec to be ended', async () => !isAlive(pid), 10_000);
    assert.equal((await d.request('GET', '/containers/host/json')).json().State.Status, 'running', 'the container itself keeps running');
    const exec = await d.docker(['exec', 'host', 'echo', 'ok']);
    assert.equal(exec.stdout, 'ok\n', exec.stderr);
    assert.equal((await d.docker(['rm', '-f', 'host'])).code, 0);
  });
});
