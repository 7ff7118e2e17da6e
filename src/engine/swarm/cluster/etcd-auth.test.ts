import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { roleOfNodeDoc } from './etcd-auth.js';

describe('roleOfNodeDoc', () => {
  it('reads a node document\'s role; one that does not read is unknown, never a manager nor gone', () => {
    assert.equal(roleOfNodeDoc(JSON.stringify({ w: 'n1', d: { id: 'n1', spec: { Role: 'worker' } } })), 'worker');
    assert.equal(roleOfNodeDoc(JSON.stringify({ w: 'n1', d: { id: 'n1', spec: { Role: 'manager' } } })), 'manager');
    // A spec without a role is a manager's, as everywhere in the swarm (placement, swarm-roles).
    assert.equal(roleOfNodeDoc(JSON.stringify({ d: { spec: {} } })), 'manager');
    for (const damaged of ['{"d":{"spec":{"Role":"wor', 'null', '42', '{}', '{"d":{"spec":"worker"}}']) {
      assert.equal(roleOfNodeDoc(damaged), undefined, damaged);
    }
  });
});
