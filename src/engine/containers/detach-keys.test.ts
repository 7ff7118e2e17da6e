import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isKind } from '../../lib/errors.js';
import { DetachKeyScanner, parseDetachKeys } from './detach-keys.js';

describe('detach keys', () => {
  it('parses Docker key names', () => {
    assert.deepEqual([...parseDetachKeys('ctrl-p,ctrl-q')], [0x10, 0x11]);
    assert.deepEqual([...parseDetachKeys('ctrl-@,ctrl-_,a')], [0x00, 0x1f, 0x61]);
    assert.throws(() => parseDetachKeys('ctrl-pq'), (err: unknown) => isKind(err, 'invalid-argument'));
    assert.throws(() => parseDetachKeys('alt-x'), (err: unknown) => isKind(err, 'invalid-argument'));
  });

  it('passes ordinary input through untouched and detects the sequence across chunks', () => {
    const s = new DetachKeyScanner(parseDetachKeys('ctrl-p,ctrl-q'));
    assert.deepEqual(s.push(Buffer.from('abc')), { out: Buffer.from('abc'), detached: false });
    assert.deepEqual(s.push(Buffer.from('x\x10')), { out: Buffer.from('x'), detached: false });
    assert.deepEqual(s.push(Buffer.from('\x11rest')), { out: Buffer.alloc(0), detached: true });
  });

  it('releases held bytes when the sequence breaks, in order', () => {
    const s = new DetachKeyScanner(Buffer.from('qz'));
    assert.equal(s.push(Buffer.from('aq')).out.toString(), 'a');
    assert.equal(s.push(Buffer.from('xq')).out.toString(), 'qx');
    assert.equal(s.push(Buffer.from('q')).out.toString(), 'q'); // the first q released, the second held
    const last = s.push(Buffer.from('z'));
    assert.equal(last.detached, true);
    assert.equal(last.out.length, 0);
  });
});
