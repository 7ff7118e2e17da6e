import { test } from 'node:test';
import assert from 'node:assert/strict';
import { releaseBuffers } from './release-buffer.js';

test('releaseBuffers frees Buffers that span their whole ArrayBuffer, at once', () => {
  const size = 4 * 1024 * 1024;
  const before = process.memoryUsage().arrayBuffers;
  const bufs = [Buffer.alloc(size, 7), Buffer.alloc(size, 8)];
  assert.ok(process.memoryUsage().arrayBuffers >= before + 2 * size);
  releaseBuffers([...bufs, bufs[0]!]);
  assert.deepEqual(bufs.map((b) => b.length), [0, 0], 'detached');
  assert.ok(process.memoryUsage().arrayBuffers < before + size, 'their memory is no longer counted');
  releaseBuffers([]);
});

test('releaseBuffers leaves a slice of a larger ArrayBuffer alone (subarrays, pooled small Buffers)', () => {
  const whole = Buffer.alloc(64 * 1024, 1);
  const part = whole.subarray(1024);
  releaseBuffers([part]);
  assert.equal(part.length, 63 * 1024);
  assert.equal(whole[0], 1);
  const head = whole.subarray(0, 1024);
  releaseBuffers([head]);
  assert.equal(head.length, 1024, 'starts at 0 but is not the whole of it');
  const small = Buffer.from('a pooled buffer');
  releaseBuffers([small]);
  assert.equal(small.toString(), 'a pooled buffer');
});
