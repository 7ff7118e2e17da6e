import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isRunning, run } from './child-process.js';
import { startDaemon, withDaemonLogs, type TestDaemon } from './daemon.js';
import { mountsUnder } from './mounts.js';
import { startRegistry, type TestRegistry } from './registry.js';
import { seedRegistry, type SeededImages } from '../fixtures/seed-registry.js';

/** The daemon harness itself: start, talk, restart, crash, and a teardown that leaves nothing behind. */

describe('test daemon', () => {
  let d: TestDaemon;
  let reg: TestRegistry;
  let seeded: SeededImages;
  before(async () => {
    [d, reg] = await Promise.all([startDaemon(), startRegistry('open')]);
    seeded = await seedRegistry(reg);
  });
  after(async () => {
    await d?.teardown();
    await reg?.stop();
  });

  it('answers /_ping on its socket and the docker CLI talks to it', async () => {
    await withDaemonLogs(d, async () => {
      const ping = await d.request('GET', '/_ping');
      assert.equal(ping.status, 200);
      assert.equal(ping.text(), 'OK');
      const v = await d.docker(['version', '--format', '{{.Server.APIVersion}}']);
      assert.equal(v.code, 0, v.stderr);
      assert.match(v.stdout.trim(), /^1\.\d+$/);
    });
  });

  it('keeps its data across restart() and kill9()', async () => {
    await withDaemonLogs(d, async () => {
      const pull = await d.docker(['pull', seeded.refs.busybox]);
      assert.equal(pull.code, 0, pull.stderr);
      const first = d.pid;
      await d.restart();
      assert.notEqual(d.pid, first);
      let ls = await d.docker(['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}']);
      assert.ok(ls.stdout.includes(seeded.refs.busybox), ls.stdout);
      const crashed = d.pid;
      await d.kill9();
      assert.equal(d.running, false);
      assert.equal(isRunning(crashed), false);
      await d.restart();
      ls = await d.docker(['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}']);
      assert.ok(ls.stdout.includes(seeded.refs.busybox), ls.stdout);
    });
  });

  it('reports the log tail when startup fails', async () => {
    await assert.rejects(startDaemon({ args: ['--no-such-flag'], readyTimeoutMs: 5000 }), /berthd exited during startup[\s\S]*--- berthd log/);
  });

  it('teardown() kills leftover processes, unmounts and removes the dir', async () => {
    const t = await startDaemon();
    // Stand-ins for what a crashed daemon leaves: a process working inside its dirs and a mount.
    const workdir = join(t.execRoot, 'leftover');
    mkdirSync(workdir, { recursive: true });
    const straggler = spawn('sleep', ['300'], { cwd: workdir, detached: true, stdio: 'ignore' });
    straggler.unref();
    const stragglerExit = new Promise<string>((resolve) => straggler.once('exit', (_code, sig) => resolve(String(sig))));
    const mnt = join(t.dataRoot, 'mnt');
    mkdirSync(mnt, { recursive: true });
    const m = await run('mount', ['-t', 'tmpfs', 'berth-test', mnt]);
    assert.equal(m.code, 0, m.stderr);
    const daemonPid = t.pid;
    await t.kill9();
    await t.teardown();
    assert.equal(isRunning(daemonPid), false);
    const sig = await Promise.race([stragglerExit, new Promise<string>((r) => setTimeout(() => r('still running'), 5000))]);
    assert.equal(sig, 'SIGKILL', 'the straggler was killed');
    assert.deepEqual(mountsUnder(t.dir), []);
    assert.equal(existsSync(t.dir), false);
  });
});
