import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ToolShell } from './tool-shell.js';
import { ToolError } from './run-tool.js';

test('the tool shell runs steps with their input, in order, and stops at the first failure', async () => {
  const shell = new ToolShell();
  try {
    assert.equal(await shell.run([{ argv: ['cat'], input: "it's\nEOF\n$HOME `x`" }, { argv: ['echo', 'a b', "c'd"] }]), "it's\nEOF\n$HOME `x`\na b c'd\n");
    const failed = await shell.run([{ argv: ['sh', '-c', 'echo oops >&2; exit 3'] }, { argv: ['echo', 'not reached'] }]).catch((e: unknown) => e);
    assert.ok(failed instanceof ToolError);
    assert.equal(failed.exitCode, 3);
    assert.equal(failed.stderr, 'oops\n');
    // Jobs queue up; each gets its own output.
    const outs = await Promise.all([1, 2, 3].map((i) => shell.run([{ argv: ['echo', String(i)] }])));
    assert.deepEqual(outs, ['1\n', '2\n', '3\n']);
    // A shell that died is replaced for the next job.
    await assert.rejects(shell.run([{ argv: ['sh', '-c', 'kill -9 $PPID'] }]), ToolError);
    assert.equal(await shell.run([{ argv: ['echo', 'again'] }]), 'again\n');
  } finally {
    shell.close();
  }
});

test('tool(): stdout alone back, the stderr and status of a failure in a ToolError, input as a here-document', async () => {
  const shell = new ToolShell(2);
  try {
    assert.equal(await shell.tool('sh', ['-c', 'echo out; echo noise >&2']), 'out\n');
    assert.equal(await shell.tool('cat', [], { input: "it's\nEOF\n$HOME `x`" }), "it's\nEOF\n$HOME `x`\n");
    assert.equal(await shell.tool('cat', [], { input: 'a\n' }), 'a\n');
    const failed = await shell.tool('sh', ['-c', 'echo partial; echo "bad thing" >&2; exit 4']).catch((e: unknown) => e);
    assert.ok(failed instanceof ToolError);
    assert.equal(failed.exitCode, 4);
    assert.equal(failed.stderr, 'bad thing');
    const missing = await shell.tool('/nonexistent/tool', ['x']).catch((e: unknown) => e);
    assert.ok(missing instanceof ToolError);
    assert.equal(missing.exitCode, 127);
    // Side by side in the pool, each its own output.
    assert.deepEqual(await Promise.all([1, 2, 3, 4].map((i) => shell.tool('echo', [String(i)]))), ['1\n', '2\n', '3\n', '4\n']);
  } finally {
    shell.close();
  }
});
