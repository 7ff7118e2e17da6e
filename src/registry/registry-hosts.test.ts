import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RegistryHosts } from './registry-hosts.js';

test('loopback and configured registries are insecure; Docker Hub never is', async () => {
  const h = new RegistryHosts({ insecureRegistries: ['myreg.example:5000', '10.20.0.0/16', 'http://plain.example', 'fd00::/8'] });
  for (const host of ['127.0.0.1:5000', '127.9.9.9', 'localhost:5000', 'localhost', '[::1]:5000', 'myreg.example:5000',
    '10.20.3.4:443', 'plain.example', 'plain.example:8080', '[fd00::1]:5000']) {
    assert.equal(await h.isInsecure(host), true, host);
  }
  for (const host of ['docker.io', 'registry-1.docker.io', 'myreg.example:5001', '10.21.0.1', '8.8.8.8:5000', 'no-such-host.invalid']) {
    assert.equal(await h.isInsecure(host), false, host);
  }
});

test('endpoints: HTTPS verified by default, HTTPS-unverified then HTTP for insecure hosts', async () => {
  const h = new RegistryHosts();
  const secure = await h.host('quay.example');
  assert.deepEqual(secure.endpoints.map((e) => [e.base.href, e.tlsVerify]), [['https://quay.example/', true]]);
  const local = await h.host('127.0.0.1:5000');
  assert.deepEqual(local.endpoints.map((e) => [e.base.href, e.tlsVerify]), [['https://127.0.0.1:5000/', false], ['http://127.0.0.1:5000/', false]]);
  const hub = await h.host('docker.io');
  assert.deepEqual(hub.endpoints.map((e) => [e.base.href, e.tlsVerify]), [['https://registry-1.docker.io/', true]]);
});

test('mirrors: Docker Hub pulls only, in order, https:// by default, Hub last', async () => {
  const h = new RegistryHosts({ mirrors: ['mirror.example', 'http://127.0.0.1:5001/some/path', 'https://m2.example:8443'] });
  const hosts = await h.pullHosts('docker.io');
  assert.deepEqual(hosts.map((x) => [x.mirror, x.endpoints.map((e) => `${e.base.href} ${e.tlsVerify}`)]), [
    [true, ['https://mirror.example/ true']],
    [true, ['http://127.0.0.1:5001/ false']],
    [true, ['https://m2.example:8443/ true']],
    [false, ['https://registry-1.docker.io/ true']],
  ]);
  assert.deepEqual((await h.pullHosts('quay.example')).map((x) => x.name), ['quay.example']);
  assert.throws(() => new RegistryHosts({ mirrors: ['ftp://x'] }), { name: 'BerthError' });
});
