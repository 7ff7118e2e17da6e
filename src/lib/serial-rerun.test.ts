import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SerialRerun } from './serial-rerun.js';

describe('SerialRerun', () => {
  it('runs one pass at a time, once more for any number of requests during a pass, and reports failures', async () => {
    let passes = 0;
    let running = 0;
    let peak = 0;
    const errors: unknown[] = [];
    let release: () => void = () => undefined;
    const r = new SerialRerun(async () => {
      passes++;
      running++;
      peak = Math.max(peak, running);
      await new Promise<void>((res) => (release = res));
      running--;
      if (passes === 2) throw new Error('second pass failed');
    }, (err) => errors.push(err));
    r.run();
    r.run();
    r.run();
    assert.equal(passes, 1);
    release();
    for (let i = 0; i < 10 && passes < 2; i++) await new Promise((res) => setImmediate(res));
    assert.equal(passes, 2);
    release();
    for (let i = 0; i < 10 && r.running; i++) await r.running;
    assert.equal(r.running, undefined);
    assert.equal(passes, 2);
    assert.equal(peak, 1);
    assert.equal(errors.length, 1);
  });
});
