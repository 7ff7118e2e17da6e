import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
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

test('names that resolve to loopback get verified TLS unless a configured CIDR covers them', async (t) => {
  const name = hostname();
  const { address } = await lookup(name).catch(() => ({ address: '' }));
  if (!address.startsWith('127.') && address !== '::1') return t.skip(`${name} does not resolve to loopback here`);
  assert.equal(await new RegistryHosts().isInsecure(`${name}:5000`), false);
  const family = address.includes(':') ? '::1/128' : '127.0.0.0/8';
  assert.equal(await new RegistryHosts({ insecureRegistries: [family] }).isInsecure(`${name}:5000`), true);
});

test('certs.d files travel with the HTTPS endpoints of their host', async () => {
  const root = mkdtempSync(join(tmpdir(), 'berth-certsd-'));
  try {
    mkdirSync(join(root, 'reg.example:5000'));
    writeFileSync(join(root, 'reg.example:5000', 'ca.crt'), 'CA PEM');
    writeFileSync(join(root, 'reg.example:5000', 'client.cert'), 'CERT PEM');
    writeFileSync(join(root, 'reg.example:5000', 'client.key'), 'KEY PEM');
    mkdirSync(join(root, '127.0.0.1:5000'));
    writeFileSync(join(root, '127.0.0.1:5000', 'extra.crt'), 'LOCAL CA');
    const h = new RegistryHosts({ certsDir: root });
    const [ep] = (await h.host('reg.example:5000')).endpoints;
    assert.deepEqual([ep!.tls?.ca, ep!.tls?.cert, ep!.tls?.key], [['CA PEM'], 'CERT PEM', 'KEY PEM']);
    const local = (await h.host('127.0.0.1:5000')).endpoints;
    assert.deepEqual(local.map((e) => e.tls?.ca), [['LOCAL CA'], undefined]);
    assert.equal((await h.host('other.example')).endpoints[0]!.tls, undefined);
    // Mirrors have their own directories.
    const mirrored = await new RegistryHosts({ certsDir: root, mirrors: ['reg.example:5000'] }).pullHosts('docker.io');
    assert.deepEqual(mirrored.map((x) => x.endpoints[0]!.tls?.ca), [['CA PEM'], undefined]);
    // The certs root is never left through a crafted name.
    assert.equal(await h.tlsFor('..'), undefined);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
