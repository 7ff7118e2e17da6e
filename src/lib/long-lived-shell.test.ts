import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LongLivedShell, ShellError, ShellPool, shQuote } from './long-lived-shell.js';

test('the long-lived shell runs scripts in turn with their status and output, and replaces a dead shell', async () => {
  const shell = new LongLivedShell('test shell', { PATH: process.env.PATH ?? '/usr/bin:/bin', MARK: 'set' });
  try {
    assert.deepEqual(await shell.run(`echo ${shQuote("it's $MARK")}; echo "$MARK" >&2`), { status: 0, output: "it's $MARK\nset\n" });
    // A failing script is a status, not an error; the shell lives on.
    assert.deepEqual(await shell.run('(echo no; exit 7)'), { status: 7, output: 'no\n' });
    const outs = await Promise.all([1, 2, 3].map((i) => shell.run(`echo ${i}`)));
    assert.deepEqual(outs.map((o) => o.output), ['1\n', '2\n', '3\n']);
    const died = await shell.run('kill -9 $$').catch((e: unknown) => e);
    assert.ok(died instanceof ShellError);
    assert.equal(died.notStarted, false);
    assert.equal((await shell.run('echo again')).output, 'again\n');
  } finally {
    shell.close();
  }
});

test('a shell that cannot start says so (nothing ran)', async () => {
  const shell = new LongLivedShell('test shell', { PATH: '/nonexistent' });
  try {
    const err = await shell.run('echo never').catch((e: unknown) => e);
    assert.ok(err instanceof ShellError);
    assert.equal(err.notStarted, true);
  } finally {
    shell.close();
  }
});

test('a shell pool runs scripts side by side and keeps one shell while work comes one at a time', async () => {
  const pool = new ShellPool('test pool', 3, { PATH: process.env.PATH ?? '/usr/bin:/bin' });
  const dir = mkdtempSync(join(tmpdir(), 'berth-pool-'));
  try {
    // One at a time: always the same shell.
    const first = (await pool.run('echo $$')).output;
    assert.equal((await pool.run('echo $$')).output, first);
    // Three together: each waits for a file only a later script creates, which one shell running
    // scripts in turn could never finish (bounded: each gives up after 5 s and reports it).
    const wait = (f: string) => `i=0; while [ ! -e ${shQuote(join(dir, f))} ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; [ -e ${shQuote(join(dir, f))} ] && echo $$`;
    const outs = await Promise.all([
      pool.run(`${wait('b')}`),
      pool.run(`touch ${shQuote(join(dir, 'b'))}; ${wait('c')}`),
      pool.run(`touch ${shQuote(join(dir, 'c'))}; echo $$`),
    ]);
    assert.ok(outs.every((o) => o.status === 0), JSON.stringify(outs));
    assert.equal(new Set(outs.map((o) => o.output)).size, 3);
  } finally {
    pool.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
