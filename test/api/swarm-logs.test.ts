/**
 * routes/swarm-logs.ts on the wire, for what test/swarm/swarm-api.test.ts (task context in details,
 * tail of a task's logs, no stream chosen) does not ask: stream selection, timestamps, since, a
 * service named rather than by id, bad values and unknown objects.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, usePulledBusybox } from '../harness/index.js';
import { demuxChecked } from '../harness/multiplexed.js';
import { SERVICE_NAME, useSwarmService } from './swarm-fixture.js';

describe('swarm logs API', () => {
  const daemon = useDaemon();
  const swarm = useSwarmService(daemon, usePulledBusybox(daemon, useSeededRegistry('open')));

  it('service logs by name and id: each stream alone, both with timestamps', async () => {
    const d = daemon();
    const onlyErr = await d.request('GET', `/services/${SERVICE_NAME}/logs?stderr=1`);
    assert.equal(onlyErr.status, 200, onlyErr.text());
    assert.deepEqual(demuxChecked(onlyErr.body), { stdout: '', stderr: 'err-line\n' });
    const both = await d.request('GET', `/services/${swarm().serviceId}/logs?stdout=1&stderr=1&timestamps=1`);
    const { stdout, stderr } = demuxChecked(both.body);
    assert.match(stdout, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z out-line\n$/);
    assert.match(stderr, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z err-line\n$/);
  });

  it('task logs: stdout alone; since after the lines gives none', async () => {
    const d = daemon();
    const { task } = swarm();
    const out = await d.request('GET', `/tasks/${task.ID}/logs?stdout=1`);
    assert.equal(out.status, 200, out.text());
    assert.deepEqual(demuxChecked(out.body), { stdout: 'out-line\n', stderr: '' });
    const later = Math.ceil(Date.now() / 1000) + 1;
    const none = await d.request('GET', `/tasks/${task.ID}/logs?stdout=1&stderr=1&since=${later}`);
    assert.equal(none.status, 200);
    assert.equal(none.body.length, 0);
  });

  it('bad tail and since are a 400; unknown services and tasks a 404', async () => {
    const d = daemon();
    const { task } = swarm();
    for (const q of ['tail=lots', 'since=yesterday']) {
      const r = await d.request('GET', `/tasks/${task.ID}/logs?stdout=1&${q}`);
      assert.equal(r.status, 400, `${q}: ${r.text()}`);
    }
    const noService = await d.request('GET', '/services/no-such-service/logs?stdout=1');
    assert.equal(noService.status, 404);
    assert.equal(noService.json<{ message: string }>().message, 'service no-such-service not found');
    const noTask = await d.request('GET', '/tasks/no-such-task/logs?stdout=1');
    assert.equal(noTask.status, 404);
  });
});
