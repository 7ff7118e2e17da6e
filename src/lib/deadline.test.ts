import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { waitAtMost, withDeadline } from './deadline.js';

/** Timers pending in this process (node's own count, not ours). */
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('withDeadline', () => {
  it('answers what the promise settles with in time, and leaves no timer behind', async () => {
    const before = timers();
    assert.equal(await withDeadline(Promise.resolve(7), 60_000, () => new Error('late')), 7);
    assert.equal(timers(), before);
    await assert.rejects(withDeadline(Promise.reject(new Error('refused')), 60_000, () => new Error('late')), /^Error: refused$/);
    assert.equal(timers(), before);
  });

  it("rejects with the caller's error once the deadline passed, and ignores a later answer", async () => {
    let answer: (v: string) => void = () => undefined;
    const slow = new Promise<string>((r) => (answer = r));
    class Late extends Error {}
    const started = Date.now();
    await assert.rejects(withDeadline(slow, 30, () => new Late('no answer within 30 ms')), (err: unknown) => err instanceof Late && err.message === 'no answer within 30 ms');
    assert.ok(Date.now() - started >= 25, 'not before its deadline');
    answer('too late');
  });
});

describe('waitAtMost', () => {
  it('answers true once the promise fulfilled in time, passes its rejection on, and leaves no timer behind', async () => {
    const before = timers();
    let answer: () => void = () => undefined;
    const soon = new Promise<void>((r) => (answer = r));
    const waiting = waitAtMost(soon, 60_000);
    assert.equal(timers(), before + 1);
    answer();
    assert.equal(await waiting, true);
    assert.equal(timers(), before);
    await assert.rejects(waitAtMost(Promise.reject(new Error('refused')), 60_000), /^Error: refused$/);
    assert.equal(timers(), before);
  });

  it('answers false once the time ran out, and ignores a later outcome', async () => {
    let fail: (err: Error) => void = () => undefined;
    const slow = new Promise<void>((_, reject) => (fail = reject));
    const started = Date.now();
    assert.equal(await waitAtMost(slow, 30), false);
    assert.ok(Date.now() - started >= 25, 'not before its time');
    // Handled by waitAtMost: no unhandled rejection fails this test.
    fail(new Error('too late'));
    await new Promise((r) => setImmediate(r));
  });

  it('with unref, its timer does not hold the process', async () => {
    const before = timers();
    let answer: () => void = () => undefined;
    const waiting = waitAtMost(new Promise<void>((r) => (answer = r)), 60_000, { unref: true });
    assert.equal(timers(), before);
    answer();
    assert.equal(await waiting, true);
  });
});
