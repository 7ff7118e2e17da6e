import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeRegistryAuth, encodeRegistryAuth, hasCredentials, normalizeAuthConfig } from './auth-config.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');
const b64url = (s: string) => Buffer.from(s).toString('base64url');

test('decodes base64url and standard base64, with or without padding', () => {
  // '?>' in the password forces '+'/'/' vs '-'/'_' differences between the alphabets.
  const json = JSON.stringify({ username: 'u', password: 'p?>?>?>~~~', serveraddress: 'localhost:5000' });
  const want = { username: 'u', password: 'p?>?>?>~~~', serveraddress: 'localhost:5000' };
  assert.notEqual(b64(json).replace(/=+$/, ''), b64url(json));
  assert.deepEqual(decodeRegistryAuth(b64(json)), want);
  assert.deepEqual(decodeRegistryAuth(b64(json).replace(/=+$/, '')), want);
  assert.deepEqual(decodeRegistryAuth(b64url(json)), want);
  assert.deepEqual(decodeRegistryAuth(b64url(json) + '='.repeat((4 - (b64url(json).length % 4)) % 4)), want);
  assert.deepEqual(decodeRegistryAuth(encodeRegistryAuth(want)), want);
});

test('keys are case-insensitive (docker-py credential-store style)', () => {
  const h = b64url(JSON.stringify({ Username: 'a', Password: 'b', ServerAddress: 's', IdentityToken: 't', Email: '' }));
  assert.deepEqual(decodeRegistryAuth(h), { username: 'a', password: 'b', serveraddress: 's', identitytoken: 't' });
});

test('auth field expands to username and password', () => {
  const h = b64url(JSON.stringify({ auth: b64('alice:s3:cr3t') }));
  assert.deepEqual(decodeRegistryAuth(h), { auth: b64('alice:s3:cr3t'), username: 'alice', password: 's3:cr3t' });
  // Explicit fields win over auth.
  const h2 = b64url(JSON.stringify({ auth: b64('alice:x'), username: 'bob', password: 'y' }));
  assert.equal(decodeRegistryAuth(h2)?.username, 'bob');
});

test('empty, {} and undecodable headers are anonymous', () => {
  for (const h of [undefined, '', '  ', b64url('{}'), b64url('null'), b64url('[]'), b64url('"x"'), '!!!not base64',
    b64url('{not json'), b64url(JSON.stringify({ username: '', password: '' })), b64url(JSON.stringify({ other: 'x' }))]) {
    assert.equal(decodeRegistryAuth(h), undefined, String(h));
  }
});

test('hasCredentials', () => {
  assert.equal(hasCredentials(undefined), false);
  assert.equal(hasCredentials({ serveraddress: 'x' }), false);
  assert.equal(hasCredentials({ username: 'x' }), true);
  assert.equal(hasCredentials({ registrytoken: 'x' }), true);
  assert.equal(hasCredentials(normalizeAuthConfig({ IDENTITYTOKEN: 'r' })), true);
});
