/**
 * routes/container-logs.ts on the wire, for what test/containers/lifecycle.test.ts (frames, tty,
 * stream choice, tail, timestamps, follow), logs-large.test.ts and log-rotation.test.ts do not ask:
 * since and until, a container that never ran, bad values and unknown containers.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, usePulledBusybox, type TestDaemon } from '../harness/index.js';
import { demuxChecked } from '../harness/multiplexed.js';

async function logs(d: TestDaemon, id: string, q: string): Promise<string> {
  const r = await d.request('GET', `/containers/${id}/logs?stdout=1&${q}`);
  assert.equal(r.status, 200, r.text());
  return demuxChecked(r.body).stdout;
}

/** A log timestamp (RFC 3339, nanoseconds) as the Unix seconds with fraction the API takes. */
function unixOf(ts: string): string {
  const [whole, frac] = ts.replace(/Z$/, '').split('.');
  return `${Math.floor(Date.parse(`${whole}Z`) / 1000)}.${frac}`;
}

describe('container logs API: since, until and refusals', () => {
  const daemon = useDaemon();
  const busybox = usePulledBusybox(daemon, useSeededRegistry('open'));

  it('since and until (Unix seconds with a fraction) select lines by their timestamps', async () => {
    const d = daemon();
    const run = await d.docker(['run', '-d', busybox(), 'sh', '-c', 'for i in 1 2 3 4; do echo line$i; sleep 0.2; done']);
    assert.equal(run.code, 0, run.stderr);
    const id = run.stdout.trim();
    try {
      assert.equal((await d.request('POST', `/containers/${id}/wait`, { timeoutMs: 60_000 })).status, 200);
      const stamped = (await logs(d, id, 'timestamps=1')).trim().split('\n').map((l) => l.split(' ') as [string, string]);
      assert.deepEqual(stamped.map(([, t]) => t), ['line1', 'line2', 'line3', 'line4']);
      const t2 = unixOf(stamped[1]![0]);
      const t3 = unixOf(stamped[2]![0]);
      assert.equal(await logs(d, id, `since=${t2}`), 'line3\nline4\n', 'since: after the given time');
      assert.equal(await logs(d, id, `until=${t2}`), 'line1\nline2\n', 'until: up to and including it');
      assert.equal(await logs(d, id, `since=${t2}&until=${t3}`), 'line3\n');
      assert.equal(await logs(d, id, `since=${t2}&tail=1`), 'line4\n');
      assert.equal(await logs(d, id, `since=${Math.ceil(Date.now() / 1000) + 5}`), '');
    } finally {
      await d.docker(['rm', '-f', id]);
    }
  });

  it('a container that never ran has an empty log; bad values are a 400, unknown containers a 404', async () => {
    const d = daemon();
    const created = await d.request('POST', '/containers/create', { body: { Image: busybox(), Cmd: ['true'] } });
    assert.equal(created.status, 201, created.text());
    const id = created.json<{ Id: string }>().Id;
    try {
      const empty = await d.request('GET', `/containers/${id}/logs?stdout=1&stderr=1`);
      assert.equal(empty.status, 200, empty.text());
      assert.equal(empty.body.length, 0);
      for (const q of ['since=yesterday', 'until=soon', 'tail=lots']) {
        const r = await d.request('GET', `/containers/${id}/logs?stdout=1&${q}`);
        assert.equal(r.status, 400, `${q}: ${r.text()}`);
      }
      const unknown = await d.request('GET', '/containers/no-such-container/logs?stdout=1');
      assert.equal(unknown.status, 404);
      assert.equal(unknown.json<{ message: string }>().message, 'No such container: no-such-container');
    } finally {
      await d.request('DELETE', `/containers/${id}?force=1`);
    }
  });
});
