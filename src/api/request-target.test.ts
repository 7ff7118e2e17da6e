import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseRequestTarget } from './request-target.js';

/** What the router got from the WHATWG URL parser before: the reference. */
function viaUrl(url: string) {
  const u = new URL(url, 'http://berth');
  return { path: u.pathname, query: [...u.searchParams] };
}

describe('request targets', () => {
  it('split as the URL parser splits them, for plain and for odd targets', () => {
    const targets = [
      '/_ping', '/v1.47/_ping', '/v1.47/containers/json?all=1&filters=%7B%22label%22%3A%5B%22a%3Db%22%5D%7D',
      '/containers/json?', '/images/127.0.0.1:5000/busybox:latest/json', '/images/sha256:abc@x/json?a=1+2&b=%20c',
      '/containers/x/archive?path=/etc/../etc/hosts', '/containers/json?filters={"name":["a b"]}', "/x?q='quoted'",
      '/v1.41/containers/../_ping', '/v1.41/./_ping', '/a/%2e%2E/b', '/a/%2E/b', '//_ping', '/a\\b', '/a b?c d',
      '/a"b?x=<y>', '/a{b}', '/a|b^c`', '/_ping#frag', '/x?y=1#frag', '/x/%C3%A9?k=%C3%A9', '/x/\u00e9?k=\u00e9',
      '/images/my%2Fimage/json', '/.hidden', '/a/..', '/a/.', '/', '/?', '/v1.47', '/v1.47/',
    ];
    for (const t of targets) {
      const got = parseRequestTarget(t);
      assert.deepEqual({ path: got.path, query: [...new URLSearchParams(got.search)] }, viaUrl(t), t);
    }
  });

  it('take plain targets as they are, without the URL parser', () => {
    assert.deepEqual(parseRequestTarget('/v1.47/containers/json?all=1'), { path: '/v1.47/containers/json', search: 'all=1' });
    assert.deepEqual(parseRequestTarget('/_ping'), { path: '/_ping', search: '' });
  });
});
