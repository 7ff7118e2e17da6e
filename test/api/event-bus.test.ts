/**
 * The event bus behind GET /events, in process: timestamps must follow publication order, since
 * clients resume a stream with `since=<last timeNano>`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EventBus, type EngineEvent } from '../../src/engine/events.js';

describe('event bus', () => {
  it('timeNano strictly increases, even for events published in the same microsecond', () => {
    const bus = new EventBus();
    const seen: EngineEvent[] = [];
    const stop = bus.subscribe((e) => seen.push(e));
    for (let i = 0; i < 20_000; i++) bus.publish('image', 'tag', `id-${i}`);
    stop();
    for (let i = 1; i < seen.length; i++) {
      assert.ok(seen[i]!.timeNano > seen[i - 1]!.timeNano, `event ${i} (${seen[i]!.timeNano}) is not after ${seen[i - 1]!.timeNano}`);
    }
    const now = Date.now() * 1e6;
    assert.ok(Math.abs(seen[seen.length - 1]!.timeNano - now) < 5e9, 'timeNano is wall-clock time');
    assert.equal(seen[0]!.time, Math.floor(seen[0]!.timeNano / 1e9));
  });

  it('replay from an event\'s timeNano starts at that event, in order', () => {
    const bus = new EventBus();
    for (let i = 0; i < 100; i++) bus.publish('image', 'tag', `id-${i}`);
    const all = bus.replay(0);
    const from = all[40]!.timeNano;
    const again = bus.replay(from);
    assert.deepEqual(again.map((e) => e.Actor.ID), all.slice(40).map((e) => e.Actor.ID));
    const window = bus.replay(all[10]!.timeNano, all[20]!.timeNano);
    assert.deepEqual(window.map((e) => e.Actor.ID), all.slice(10, 21).map((e) => e.Actor.ID));
  });
});
