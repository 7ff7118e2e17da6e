import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { WorkGate } from './work-gate.js';

describe('WorkGate', () => {
  it('runs at most `limit` at once, the rest in arrival order, and passes errors through', async () => {
    const gate = new WorkGate(2);
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    const releases: (() => void)[] = [];
    const jobs = [0, 1, 2, 3, 4].map((i) =>
      gate.run(async () => {
        running++;
        peak = Math.max(peak, running);
        order.push(i);
        await new Promise<void>((r) => releases.push(r));
        running--;
        return i;
      }),
    );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [0, 1]);
    assert.deepEqual(gate.load, { running: 2, waiting: 3 });
    // Each finished job lets the next waiter in; bounded, in case one never came.
    for (let k = 0; k < 10 && releases.length; k++) {
      releases.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    assert.deepEqual(await Promise.all(jobs), [0, 1, 2, 3, 4]);
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
    assert.equal(peak, 2);
    await assert.rejects(gate.run(() => Promise.reject(new Error('boom'))), /boom/);
    assert.deepEqual(gate.load, { running: 0, waiting: 0 });
  });
});
