import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LongLivedShell, ShellError, shQuote } from './long-lived-shell.js';

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
