import { test } from 'node:test';
import assert from 'node:assert/strict';
import { releaseBuffer } from './release-buffer.js';

test('releaseBuffer frees a Buffer that spans its whole ArrayBuffer, at once', () => {
  const size = 4 * 1024 * 1024;
  const before = process.memoryUsage().arrayBuffers;
  const buf = Buffer.alloc(size, 7);
  assert.ok(process.memoryUsage().arrayBuffers >= before + size);
  releaseBuffer(buf);
  assert.equal(buf.length, 0, 'detached');
  assert.ok(process.memoryUsage().arrayBuffers < before + size, 'its memory is no longer counted');
});

test('releaseBuffer leaves a slice of a larger ArrayBuffer alone (subarrays, pooled small Buffers)', () => {
  const whole = Buffer.alloc(64 * 1024, 1);
  const part = whole.subarray(1024);
  releaseBuffer(part);
  assert.equal(part.length, 63 * 1024);
  assert.equal(whole[0], 1);
  const head = whole.subarray(0, 1024);
  releaseBuffer(head);
  assert.equal(head.length, 1024, 'starts at 0 but is not the whole of it');
  const small = Buffer.from('a pooled buffer');
  releaseBuffer(small);
  assert.equal(small.toString(), 'a pooled buffer');
});
