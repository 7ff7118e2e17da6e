/**
 * routes/container-extras.ts on the wire, for what test/containers-extra/ (commit.test.ts,
 * diff-export.test.ts, top-stats.test.ts) does not ask: export of a container that never ran, and
 * the refusals of export and stats.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, usePulledBusybox } from '../harness/index.js';
import tarStream from 'tar-stream';

async function tarNames(tar: Buffer): Promise<string[]> {
  const extract = tarStream.extract();
  extract.end(tar);
  const names: string[] = [];
  for await (const entry of extract) {
    names.push(entry.header.name);
    entry.resume();
  }
  return names;
}

describe('container extras API: export and stats refusals', () => {
  const daemon = useDaemon();
  const busybox = usePulledBusybox(daemon, useSeededRegistry('open'));

  it('export of a created, never started container: the image files as a tar', async () => {
    const d = daemon();
    const created = await d.request('POST', '/containers/create', { body: { Image: busybox(), Cmd: ['true'] } });
    assert.equal(created.status, 201, created.text());
    const id = created.json<{ Id: string }>().Id;
    try {
      const res = await d.request('GET', `/containers/${id}/export`, { timeoutMs: 60_000 });
      assert.equal(res.status, 200, res.text().slice(0, 200));
      assert.equal(res.headers['content-type'], 'application/x-tar');
      const names = await tarNames(res.body);
      assert.ok(names.includes('bin/busybox') && names.includes('etc/passwd'), names.slice(0, 8).join(', '));
      assert.equal((await d.request('GET', `/containers/${id}/json`)).json<{ State: { Status: string } }>().State.Status, 'created');
    } finally {
      await d.request('DELETE', `/containers/${id}?force=1`);
    }
  });

  it('unknown containers are a 404 for export and stats; stats refuses one-shot with a stream', async () => {
    const d = daemon();
    for (const path of ['/containers/no-such-container/export', '/containers/no-such-container/stats?stream=0']) {
      const r = await d.request('GET', path);
      assert.equal(r.status, 404, path);
      assert.equal(r.json<{ message: string }>().message, 'No such container: no-such-container');
    }
    const run = await d.docker(['run', '-d', busybox(), 'sleep', '300']);
    assert.equal(run.code, 0, run.stderr);
    const id = run.stdout.trim();
    try {
      const both = await d.request('GET', `/containers/${id}/stats?stream=1&one-shot=1`);
      assert.equal(both.status, 400);
      assert.equal(both.json<{ message: string }>().message, 'cannot have stream=true and one-shot=true');
    } finally {
      await d.docker(['rm', '-f', id]);
    }
  });
});
