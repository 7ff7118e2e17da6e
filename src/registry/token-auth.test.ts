import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenCache, type TokenGrant } from './token-auth.js';

test('cache keys separate realms, scopes and credentials, not scope order', () => {
  const base = { realm: 'https://a/token', service: 's', scopes: ['repository:x:pull'] };
  const k = TokenCache.key(base);
  assert.equal(k, TokenCache.key({ ...base }));
  assert.notEqual(k, TokenCache.key({ ...base, realm: 'https://b/token' }));
  assert.notEqual(k, TokenCache.key({ ...base, scopes: ['repository:y:pull'] }));
  assert.notEqual(k, TokenCache.key({ ...base, auth: { username: 'u', password: 'p' } }));
  assert.notEqual(TokenCache.key({ ...base, auth: { username: 'u', password: 'p' } }), TokenCache.key({ ...base, auth: { username: 'u', password: 'q' } }));
  assert.equal(TokenCache.key({ ...base, scopes: ['a', 'b'] }), TokenCache.key({ ...base, scopes: ['b', 'a'] }));
  assert.ok(!k.includes('"p"'), 'no secrets in keys');
});

test('concurrent gets share one fetch; expiry and failures refetch', async () => {
  const cache = new TokenCache();
  let calls = 0;
  let expiresAt = Date.now() + 60_000;
  const fetch = async (): Promise<TokenGrant> => {
    calls++;
    await new Promise((r) => setTimeout(r, 5));
    return { token: `t${calls}`, expiresAt };
  };
  const [a, b] = await Promise.all([cache.get('k', fetch), cache.get('k', fetch)]);
  assert.equal(calls, 1);
  assert.equal(a.token, 't1');
  assert.equal(b.token, 't1');
  assert.equal((await cache.get('k', fetch)).token, 't1');

  cache.invalidate('k');
  expiresAt = Date.now() - 1; // the next grant is born expired
  assert.equal((await cache.get('k', fetch)).token, 't2');
  assert.equal((await cache.get('k', fetch)).token, 't3');

  await assert.rejects(cache.get('bad', () => Promise.reject(new Error('boom'))));
  assert.equal((await cache.get('bad', fetch)).token, 't4', 'a failed fetch is not cached');
});
