import assert from 'node:assert/strict';

/**
 * Splits a whole multiplexed (stdcopy) body into stdout and stderr, checking every frame header:
 * stream 1 or 2, three zero bytes, a non-empty payload of the stated length.
 */
export function demuxChecked(buf: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let i = 0;
  while (i < buf.length) {
    assert.ok(i + 8 <= buf.length, 'truncated frame header');
    const type = buf[i]!;
    assert.deepEqual([...buf.subarray(i + 1, i + 4)], [0, 0, 0]);
    const len = buf.readUInt32BE(i + 4);
    assert.ok(len > 0, 'empty frame');
    const payload = buf.subarray(i + 8, i + 8 + len);
    assert.equal(payload.length, len, 'truncated frame');
    (type === 1 ? out : type === 2 ? err : assert.fail(`unexpected stream type ${type}`)).push(payload);
    i += 8 + len;
  }
  return { stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
}
