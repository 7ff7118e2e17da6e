/** Exec sessions in a real container (conmon --exec, crun exec). Needs root. */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { DriverFixture, logText, streamText, uniqueId } from '../../test/fixtures/runtime.js';

let fx: DriverFixture;

before(async () => {
  fx = await DriverFixture.start();
});

after(() => fx?.stop());

describe('exec driver', () => {
  test('exec: output, exit codes, a missing binary, a tty', async () => {
    const c = await fx.create(['sleep', '100'], {
      process: { args: ['sleep', '100'], env: ['FOO=bar'], cwd: '/', user: { uid: 0, gid: 0 }, terminal: false },
    });
    const driver = fx.driver;
    const exited = driver.lifecycle.waitExit(c.id);
    await driver.lifecycle.start(c.id);

    const e1 = await driver.execs.exec(c.id, {
      execId: uniqueId('ex'),
      process: { args: ['sh', '-c', 'echo hello $FOO; echo warn >&2; exit 5'], env: ['FOO=baz'], terminal: false },
      stdin: false,
    });
    const [out, err, r1] = await Promise.all([streamText(e1.stdout), streamText(e1.stderr), e1.exit]);
    assert.ok(e1.pid > 0, `exec started (${err} ${r1.error ?? ''})`);
    assert.equal(out, 'hello baz\n');
    assert.equal(err, 'warn\n');
    assert.equal(r1.exitCode, 5);

    const e2 = await driver.execs.exec(c.id, {
      execId: uniqueId('ex'),
      process: { args: ['sh', '-c', 'cat; echo done'], env: [], terminal: false },
      stdin: true,
    });
    e2.stdin?.end('from stdin\n');
    const [out2, r2] = await Promise.all([streamText(e2.stdout), e2.exit]);
    assert.equal(out2, 'from stdin\ndone\n');
    assert.equal(r2.exitCode, 0);

    // Detached: no reader for the output, the exit code still arrives.
    const e5 = await driver.execs.exec(c.id, {
      execId: uniqueId('ex'),
      process: { args: ['sh', '-c', 'i=0; while [ $i -lt 3000 ]; do echo 0123456789012345678901234567890123456789; i=$((i+1)); done; exit 6'], env: [], terminal: false },
      stdin: false,
      discardOutput: true,
    });
    assert.equal(e5.stdout, undefined);
    assert.equal((await e5.exit).exitCode, 6);

    const e3 = await driver.execs.exec(c.id, { execId: uniqueId('ex'), process: { args: ['nosuchcmd'], env: [], terminal: false }, stdin: false });
    const [err3, r3] = await Promise.all([streamText(e3.stderr), e3.exit]);
    assert.equal(e3.pid, 0);
    assert.equal(r3.exitCode, 127);
    assert.match(err3 + (r3.error ?? ''), /not found/);

    // combinedOutput (healthcheck probes): started from the exec shell, stdout and stderr in one stream.
    const e6 = await driver.execs.exec(c.id, {
      execId: uniqueId('ex'),
      process: { args: ['sh', '-c', 'echo one; echo two >&2; exit 3'], env: [], terminal: false },
      stdin: false,
      combinedOutput: true,
    });
    assert.equal(e6.stderr, undefined, 'one stream: the shell-started path');
    const [out6, r6] = await Promise.all([streamText(e6.stdout), e6.exit]);
    assert.ok(e6.pid > 0);
    assert.equal(out6, 'one\ntwo\n');
    assert.equal(r6.exitCode, 3);
    // A child left behind holds the output: once the reader gives up, the exec's directory still goes.
    const heldId = uniqueId('ex');
    const held = await driver.execs.exec(c.id, { execId: heldId, process: { args: ['sh', '-c', 'echo left; sleep 300 &'], env: [], terminal: false }, stdin: false, combinedOutput: true });
    assert.equal((await held.exit).exitCode, 0);
    held.stdout?.destroy();
    const heldDir = driver.host.execDir(c.id, heldId);
    for (let i = 0; i < 100 && existsSync(heldDir); i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(existsSync(heldDir), false, 'the exec directory is removed');
    const e7 = await driver.execs.exec(c.id, { execId: uniqueId('ex'), process: { args: ['nosuchcmd'], env: [], terminal: false }, stdin: false, combinedOutput: true });
    const r7 = await e7.exit;
    assert.equal(e7.pid, 0);
    assert.equal(r7.exitCode, 127);
    assert.match(r7.error ?? '', /not found/);

    let readyPath = '';
    const e4 = await driver.execs.exec(c.id, {
      execId: uniqueId('ex'),
      process: { args: ['sh', '-c', 'tty; exit 4'], env: [], terminal: true },
      stdin: false,
      onAttachReady: (p) => {
        readyPath = p;
        assert.ok(existsSync(p), 'attach socket exists before the process starts');
      },
    });
    assert.equal(readyPath, e4.attachSocketPath);
    assert.equal((await e4.exit).exitCode, 4);
    assert.match(await logText(e4.logPath ?? ''), /^\/dev\/pts\/\d+/);
    await e4.dispose();

    await driver.lifecycle.kill(c.id, 'KILL');
    assert.equal((await exited).exitCode, 137);
  });

  test('output waits for a reader that comes after conmon has ended', async () => {
    const c = await fx.create(['sleep', '100']);
    const driver = fx.driver;
    const exited = driver.lifecycle.waitExit(c.id);
    await driver.lifecycle.start(c.id);
    const execId = uniqueId('ex');
    const e = await driver.execs.exec(c.id, {
      execId,
      process: { args: ['sh', '-c', 'echo to stdout; echo to stderr >&2'], env: [], terminal: false },
      stdin: false,
    });
    assert.equal((await e.exit).exitCode, 0);
    // The exec's directory goes once conmon has exited and its pipes are closed: only then read.
    const dir = driver.host.execDir(c.id, execId);
    for (let i = 0; i < 200 && existsSync(dir); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(!existsSync(dir), 'conmon ended');
    const [out, err] = await Promise.all([streamText(e.stdout), streamText(e.stderr)]);
    assert.equal(out, 'to stdout\n');
    assert.equal(err, 'to stderr\n');

    await driver.lifecycle.kill(c.id, 'KILL');
    await exited;
  });
});
