import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isCurrentManager } from './peer-tls.js';

describe('isCurrentManager', () => {
  const manager = { id: 'n1', spec: { Role: 'manager' } };
  const worker = { id: 'n1', spec: { Role: 'worker' } };

  it('takes a manager certificate whose node the cluster still has as a manager', () => {
    assert.equal(isCurrentManager('swarm-manager', manager), true);
    // A record without a role is a manager's, as everywhere in the swarm.
    assert.equal(isCurrentManager('swarm-manager', { spec: {} }), true);
  });

  it('refuses a demoted or removed node with its old manager certificate', () => {
    assert.equal(isCurrentManager('swarm-manager', worker), false);
    assert.equal(isCurrentManager('swarm-manager', undefined), false);
    assert.equal(isCurrentManager('swarm-manager', { id: 'n1' }), false);
  });

  it('refuses a worker certificate whatever its record says', () => {
    assert.equal(isCurrentManager('swarm-worker', manager), false);
    assert.equal(isCurrentManager('', manager), false);
  });
});
