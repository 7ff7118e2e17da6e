import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { roleOfToken } from './join-protocol.js';

describe('roleOfToken', () => {
  const tokens = { worker: `SWMTKN-1-${'a'.repeat(50)}-${'w'.repeat(25)}`, manager: `SWMTKN-1-${'a'.repeat(50)}-${'m'.repeat(25)}` };

  it('admits each token as its role, and nothing else', () => {
    assert.equal(roleOfToken(tokens.manager, tokens), 'manager');
    assert.equal(roleOfToken(tokens.worker, tokens), 'worker');
    assert.equal(roleOfToken(`${tokens.worker}x`, tokens), undefined);
    assert.equal(roleOfToken(tokens.worker.slice(0, -1), tokens), undefined);
    assert.equal(roleOfToken(undefined, tokens), undefined);
    assert.equal(roleOfToken(42, tokens), undefined);
  });

  it('a manager that could not open the tokens (empty) admits nobody, an empty token least of all', () => {
    assert.equal(roleOfToken('', { worker: '', manager: '' }), undefined);
    assert.equal(roleOfToken('', { ...tokens, manager: '' }), undefined);
    assert.equal(roleOfToken(tokens.manager, { worker: '', manager: '' }), undefined);
  });
});
