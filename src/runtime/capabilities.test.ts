import { test } from 'node:test';
import assert from 'node:assert/strict';
import { capabilitiesInMask, clampCapabilities, ownCapabilities } from './capabilities.js';

test('decodes capability masks', () => {
  assert.deepEqual([...capabilitiesInMask('0000000000000003')], ['CAP_CHOWN', 'CAP_DAC_OVERRIDE']);
  const most = capabilitiesInMask('000001fffeffffff'); // everything but CAP_SYS_RESOURCE (24)
  assert.equal(most.size, 40);
  assert.ok(!most.has('CAP_SYS_RESOURCE'));
  assert.ok(most.has('CAP_CHECKPOINT_RESTORE'));
});

test('own capabilities are effective ∩ bounding', () => {
  const status = 'Name:\tx\nCapEff:\t0000000000000007\nCapBnd:\t0000000000000005\n';
  assert.deepEqual([...ownCapabilities(status)], ['CAP_CHOWN', 'CAP_DAC_READ_SEARCH']);
  assert.ok(ownCapabilities().size > 0);
});

test('clamps every set', () => {
  const allowed = new Set(['CAP_CHOWN', 'CAP_KILL']);
  assert.deepEqual(
    clampCapabilities({ bounding: ['CAP_CHOWN', 'CAP_SYS_RESOURCE'], effective: ['CAP_KILL'], inheritable: [], ambient: undefined }, allowed),
    { bounding: ['CAP_CHOWN'], effective: ['CAP_KILL'], inheritable: [] },
  );
  assert.equal(clampCapabilities(undefined, allowed), undefined);
});
