import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { newDataKey, seal, unseal } from './data-key.js';

describe('data key sealing', () => {
  it('opens what it sealed; a wrong key, altered data or a cut tag is refused', () => {
    const key = newDataKey();
    const sealed = seal(key, { secret: 'hunter2' });
    assert.deepEqual(unseal(key, sealed), { secret: 'hunter2' });
    assert.throws(() => unseal(newDataKey(), sealed));
    const data = Buffer.from(sealed.data, 'base64');
    data[0]! ^= 1;
    assert.throws(() => unseal(key, { ...sealed, data: data.toString('base64') }));
    // The tag's first 4 bytes are the right ones: only its length is wrong, and that must not pass.
    const cut = Buffer.from(sealed.tag, 'base64').subarray(0, 4).toString('base64');
    assert.throws(() => unseal(key, { ...sealed, tag: cut }));
  });
});
