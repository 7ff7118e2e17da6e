import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseChallenges } from './www-authenticate.js';

test('parses a Docker Hub bearer challenge', () => {
  const h = 'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull"';
  assert.deepEqual(parseChallenges(h), [{
    scheme: 'bearer',
    params: { realm: 'https://auth.docker.io/token', service: 'registry.docker.io', scope: 'repository:library/busybox:pull' },
  }]);
});

test('parses several challenges joined by commas, unquoted values and escapes', () => {
  const h = 'Basic realm="Registry Realm", Bearer realm=http://127.0.0.1:1/t, Service="a \\"b\\"" ,error="insufficient_scope"';
  assert.deepEqual(parseChallenges(h), [
    { scheme: 'basic', params: { realm: 'Registry Realm' } },
    { scheme: 'bearer', params: { realm: 'http://127.0.0.1:1/t', service: 'a "b"', error: 'insufficient_scope' } },
  ]);
  assert.deepEqual(parseChallenges(['Basic realm="x"', 'Bearer realm="y"']).map((c) => c.scheme), ['basic', 'bearer']);
});

test('tolerates junk', () => {
  assert.deepEqual(parseChallenges(undefined), []);
  assert.deepEqual(parseChallenges(''), []);
  assert.deepEqual(parseChallenges('Basic'), [{ scheme: 'basic', params: {} }]);
  assert.deepEqual(parseChallenges('Negotiate abc==, Basic realm="r'), [
    { scheme: 'negotiate', params: {} },
    { scheme: 'basic', params: { realm: 'r' } },
  ]);
  assert.ok(parseChallenges('="x", Basic').some((c) => c.scheme === 'basic'));
});
