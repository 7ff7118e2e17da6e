import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { malformedPort, roleOfToken } from './join-protocol.js';

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

describe('malformedPort', () => {
  it('takes ports 1–65535, or none', () => {
    assert.equal(malformedPort({}), undefined);
    assert.equal(malformedPort({ clientPort: 1, peerPort: 65535, listenPort: 2377 }), undefined);
  });

  it('names the first that is no port', () => {
    assert.equal(malformedPort({ clientPort: 0 }), 'clientPort');
    assert.equal(malformedPort({ clientPort: 2379, peerPort: 65536 }), 'peerPort');
    assert.equal(malformedPort({ listenPort: 2377.5 }), 'listenPort');
    assert.equal(malformedPort({ listenPort: -1 }), 'listenPort');
    assert.equal(malformedPort({ peerPort: '2380' as unknown as number }), 'peerPort');
    assert.equal(malformedPort({ clientPort: null as unknown as number }), 'clientPort');
  });
});
