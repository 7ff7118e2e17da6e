/** A docker CLI command that must succeed: its stdout, trimmed; a failure names the command and its stderr. */
import assert from 'node:assert/strict';
import type { TestDaemon } from './daemon.js';

export async function dockerOk(d: TestDaemon, args: string[], timeoutMs = 90_000): Promise<string> {
  const r = await d.docker(args, { timeoutMs });
  assert.equal(r.code, 0, `docker ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}
