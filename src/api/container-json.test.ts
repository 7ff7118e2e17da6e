import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ContainerRecord, ContainerState } from '../engine/containers/container-model.js';
import { humanDuration, status, statusText } from './container-json.js';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');

function record(state: Partial<ContainerState>): ContainerRecord {
  return {
    state: { status: 'running', pid: 1, exitCode: 0, error: '', oomKilled: false, startedAt: new Date(T0).toISOString(), finishedAt: '0001-01-01T00:00:00Z', ...state },
  } as ContainerRecord;
}

describe('status texts', () => {
  it('word elapsed time as docker ps does', () => {
    assert.equal(humanDuration(400), 'Less than a second');
    assert.equal(humanDuration(1000), '1 second');
    assert.equal(humanDuration(59_000), '59 seconds');
    assert.equal(humanDuration(90_000), '2 minutes');
    assert.equal(humanDuration(60_000), 'About a minute');
    assert.equal(humanDuration(3600_000), 'About an hour');
    assert.equal(humanDuration(3 * 86400_000), '3 days');
    assert.equal(statusText(record({}), T0 + 5 * 60_000), 'Up 5 minutes');
    assert.equal(statusText(record({ status: 'paused' }), T0 + 2000), 'Up 2 seconds (Paused)');
    assert.equal(statusText(record({ health: { status: 'starting', failingStreak: 0, log: [] } }), T0 + 2000), 'Up 2 seconds (health: starting)');
    assert.equal(statusText(record({ status: 'exited', exitCode: 3, finishedAt: new Date(T0).toISOString() }), T0 + 7200_000), 'Exited (3) 2 hours ago');
    assert.equal(statusText(record({ status: 'exited' }), T0), 'Created');
    assert.equal(statusText(record({ status: 'created' }), T0), 'Created');
  });

  it('say until when their wording holds: the same text before that instant, another from it', () => {
    const states: Partial<ContainerState>[] = [
      {},
      { status: 'paused' },
      { status: 'exited', exitCode: 1, finishedAt: new Date(T0).toISOString() },
      { status: 'restarting', exitCode: 1, finishedAt: new Date(T0).toISOString() },
    ];
    // Elapsed times across every unit, from before the start (clock skew) to years.
    const elapsed: number[] = [-5000, -1, 0, 1, 499, 500, 501, 999, 1499, 1500, 30_000, 59_499, 59_500, 89_499, 89_500, 3_569_500, 3_600_000, 5_399_500];
    for (let ms = 1000; ms < 4 * 365 * 86400_000; ms = Math.floor(ms * 1.37) + 7) elapsed.push(ms);
    for (const state of states) {
      const c = record(state);
      for (const e of elapsed) {
        const now = T0 + e;
        const { text, until } = status(c, now);
        assert.equal(text, statusText(c, now));
        assert.ok(until > now, `until ${until} not after now ${now}`);
        assert.equal(statusText(c, until - 1), text, `elapsed ${e}: still ${text} just before ${until - T0}`);
        assert.notEqual(statusText(c, until), text, `elapsed ${e}: ${text} changes at ${until - T0}`);
      }
    }
  });

  it('never expire for states without a time in them', () => {
    for (const s of ['created', 'removing', 'dead'] as const) assert.equal(status(record({ status: s }), T0).until, Infinity);
    assert.equal(status(record({ status: 'exited' }), T0).until, Infinity);
  });
});
