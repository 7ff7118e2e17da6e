import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BerthError } from '../lib/errors.js';
import { familiarName, familiarString, fullName, fullString, parseReference, tryParseReference } from './reference.js';

const D = 'sha256:' + 'ab'.repeat(32);

test('normalizes Docker Hub short names', () => {
  assert.deepEqual(parseReference('busybox'), { domain: 'docker.io', path: 'library/busybox', tag: 'latest' });
  assert.deepEqual(parseReference('library/busybox:1.36'), { domain: 'docker.io', path: 'library/busybox', tag: '1.36' });
  assert.deepEqual(parseReference('docker.io/busybox'), { domain: 'docker.io', path: 'library/busybox', tag: 'latest' });
  assert.deepEqual(parseReference('index.docker.io/user/app'), { domain: 'docker.io', path: 'user/app', tag: 'latest' });
  assert.deepEqual(parseReference('user/app:v1'), { domain: 'docker.io', path: 'user/app', tag: 'v1' });
});

test('recognizes registry hosts only by dot, colon or localhost', () => {
  assert.deepEqual(parseReference('localhost:5000/a/b:t'), { domain: 'localhost:5000', path: 'a/b', tag: 't' });
  assert.deepEqual(parseReference('localhost/foo'), { domain: 'localhost', path: 'foo', tag: 'latest' });
  assert.deepEqual(parseReference('quay.io/x/y'), { domain: 'quay.io', path: 'x/y', tag: 'latest' });
  assert.deepEqual(parseReference('127.0.0.1:5000/x'), { domain: '127.0.0.1:5000', path: 'x', tag: 'latest' });
  assert.deepEqual(parseReference('[::1]:5000/x:y'), { domain: '[::1]:5000', path: 'x', tag: 'y' });
  // "myhost" has no dot/colon: it is a Hub user name, not a host.
  assert.deepEqual(parseReference('myhost/app'), { domain: 'docker.io', path: 'myhost/app', tag: 'latest' });
});

test('digests, with and without tags', () => {
  assert.deepEqual(parseReference(`busybox@${D}`), { domain: 'docker.io', path: 'library/busybox', digest: D });
  assert.deepEqual(parseReference(`busybox:1@${D}`), { domain: 'docker.io', path: 'library/busybox', tag: '1', digest: D });
  assert.deepEqual(parseReference(`localhost:5000/x@${D}`), { domain: 'localhost:5000', path: 'x', digest: D });
});

test('defaultTag: false leaves name-only references bare', () => {
  assert.deepEqual(parseReference('busybox', { defaultTag: false }), { domain: 'docker.io', path: 'library/busybox' });
});

test('rejects malformed references with dockerd wording', () => {
  const bad = ['', 'Busybox', 'a//b', 'a/', ':tag', 'busybox:', 'busybox:-x', 'busybox@sha256:abc', 'busy box',
    'host:port/x', '-a', 'a-', 'localhost:5000/A', 'x@md5:' + 'a'.repeat(32), 'a'.repeat(300)];
  for (const s of bad) {
    assert.throws(() => parseReference(s), (e: unknown) => {
      assert.ok(e instanceof BerthError, s);
      assert.equal(e.kind, 'invalid-argument');
      assert.match(e.message, /invalid reference format/, s);
      return true;
    }, s);
    assert.equal(tryParseReference(s), undefined);
  }
  assert.throws(() => parseReference('Busybox'), { message: 'invalid reference format: repository name (library/Busybox) must be lowercase' });
  assert.throws(() => parseReference('ab'.repeat(32)), { message: /cannot specify 64-byte hexadecimal strings/ });
});

test('accepts the separators the grammar allows', () => {
  for (const s of ['a_b', 'a__b', 'a.b', 'a---b', 'a/b.c/d_e', 'x:' + 'v'.repeat(128), 'x:V1.0_rc-2']) {
    assert.ok(parseReference(s), s);
  }
  assert.throws(() => parseReference('a___b'));
  assert.throws(() => parseReference('x:' + 'v'.repeat(129)));
});

test('familiar and full forms', () => {
  const cases: Array<[string, string, string, string, string]> = [
    ['busybox', 'busybox', 'busybox:latest', 'docker.io/library/busybox', 'docker.io/library/busybox:latest'],
    ['user/app:v1', 'user/app', 'user/app:v1', 'docker.io/user/app', 'docker.io/user/app:v1'],
    ['library/a/b', 'library/a/b', 'library/a/b:latest', 'docker.io/library/a/b', 'docker.io/library/a/b:latest'],
    ['localhost:5000/foo', 'localhost:5000/foo', 'localhost:5000/foo:latest', 'localhost:5000/foo', 'localhost:5000/foo:latest'],
    [`busybox@${D}`, 'busybox', `busybox@${D}`, 'docker.io/library/busybox', `docker.io/library/busybox@${D}`],
  ];
  for (const [input, fam, famStr, full, fullStr] of cases) {
    const r = parseReference(input);
    assert.equal(familiarName(r), fam, input);
    assert.equal(familiarString(r), famStr, input);
    assert.equal(fullName(r), full, input);
    assert.equal(fullString(r), fullStr, input);
    assert.deepEqual(parseReference(fullStr), r, 'full string round-trips');
    assert.deepEqual(parseReference(famStr), r, 'familiar string round-trips');
  }
});
