/**
 * The registry client against Debian's docker-registry over HTTPS with a private CA: certs.d
 * CAs and client certificates, Basic auth over TLS, and dockerd-worded failures.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseReference } from '../../src/registry/reference.js';
import { RegistryClient, type RegistryOptions } from '../../src/registry/registry-client.js';
import { pushImage, startRegistry, startTokenServer, type TestRegistry } from '../harness/bare-registry.js';
import { createCa, loopbackName, type CertFiles, type TestCa } from './pki.js';

const UNKNOWN_AUTHORITY = 'tls: failed to verify certificate: x509: certificate signed by unknown authority';

describe('registries over HTTPS with their own CA', async () => {
  const loop = await loopbackName();
  const skip = loop ? false : 'no host name resolves to a loopback address on this machine';
  const dir = mkdtempSync(join(tmpdir(), 'berth-tls-registry-'));
  const certsDir = join(dir, 'certs.d');
  const creds = { user: 'tls-user', password: 'tls-secret-pw' };
  let ca: TestCa;
  let otherCa: TestCa;
  let basicReg: TestRegistry;
  let mtlsReg: TestRegistry;
  let goodClient: CertFiles;
  const clients: RegistryClient[] = [];

  const client = (opts: RegistryOptions = {}) => {
    const c = new RegistryClient({ certsDir, ...opts });
    clients.push(c);
    return c;
  };
  /** Writes `<certs.d>/<host>/<name>` files, replacing the directory. */
  const certsFor = (host: string, files: Record<string, string>) => {
    const d = join(certsDir, host);
    rmSync(d, { recursive: true, force: true });
    mkdirSync(d, { recursive: true });
    for (const [name, text] of Object.entries(files)) writeFileSync(join(d, name), text);
  };

  before(async () => {
    if (!loop) return;
    ca = createCa(dir, 'berth-test-ca');
    otherCa = createCa(dir, 'other-ca');
    const server = ca.issue('registry', { cn: loop.name, dns: [loop.name], usage: 'server' });
    const clientCa = createCa(dir, 'client-ca');
    basicReg = await startRegistry({ tls: server, address: loop.address, hostname: loop.name, htpasswd: creds });
    mtlsReg = await startRegistry({ tls: { ...server, clientCas: [clientCa.cert] }, address: loop.address, hostname: loop.name });
    goodClient = clientCa.issue('client', { cn: 'berth-client', usage: 'client' });
  });

  after(async () => {
    for (const c of clients) c.close();
    await basicReg?.stop();
    await mtlsReg?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('pull with Basic auth succeeds when certs.d holds the CA', { skip }, async () => {
    certsFor(basicReg.host, { 'ca.crt': ca.certPem });
    const pushed = await pushImage(basicReg, 'tls/basic', 'v1', { auth: creds });
    const c = client();
    const img = await c.resolve(parseReference(`${basicReg.host}/tls/basic:v1`), { auth: { username: creds.user, password: creds.password } });
    assert.equal(img.manifestDigest, pushed.manifestDigest);
    assert.equal(img.endpoint, `https://${basicReg.host}/`);
    const blob = await c.openBlob(img, pushed.layers[0]!.desc);
    const chunks: Buffer[] = [];
    for await (const chunk of blob) chunks.push(chunk as Buffer);
    assert.deepEqual(Buffer.concat(chunks), pushed.layers[0]!.data);
  });

  test('login checks credentials over verified TLS', { skip }, async () => {
    certsFor(basicReg.host, { 'ca.crt': ca.certPem });
    const ok = await client().login({ username: creds.user, password: creds.password, serveraddress: basicReg.host });
    assert.equal(ok.Status, 'Login Succeeded');
    await assert.rejects(client().login({ username: creds.user, password: 'wrong', serveraddress: `https://${basicReg.host}` }), (err: Error) => {
      assert.equal((err as { kind?: string }).kind, 'unauthorized');
      assert.match(err.message, /401 Unauthorized/);
      return true;
    });
  });

  test('without the CA, pull and login fail naming the registry and the reason', { skip }, async () => {
    rmSync(join(certsDir, basicReg.host), { recursive: true, force: true });
    const expected = `Get "https://${basicReg.host}/v2/": ${UNKNOWN_AUTHORITY}`;
    await assert.rejects(client().resolve(parseReference(`${basicReg.host}/tls/basic:v1`)), { message: expected });
    await assert.rejects(client().login({ username: creds.user, password: creds.password, serveraddress: basicReg.host }), { message: expected });
    // A CA that did not sign the registry's certificate does not help.
    certsFor(basicReg.host, { 'ca.crt': otherCa.certPem });
    await assert.rejects(client().resolve(parseReference(`${basicReg.host}/tls/basic:v1`)), { message: expected });
  });

  test('an insecure registry is reached over HTTPS without verification', { skip }, async () => {
    rmSync(join(certsDir, basicReg.host), { recursive: true, force: true });
    const img = await client({ insecureRegistries: [basicReg.host] })
      .resolve(parseReference(`${basicReg.host}/tls/basic:v1`), { auth: { username: creds.user, password: creds.password } });
    assert.equal(img.endpoint, `https://${basicReg.host}/`);
  });

  test('client certificates from certs.d open a registry that requires them', { skip }, async () => {
    const reg = mtlsReg;
    const pushed = await pushImage({ url: reg.url, clientCert: { cert: goodClient.certPem, key: goodClient.keyPem } }, 'tls/mtls', 'v1');
    certsFor(reg.host, { 'ca.crt': ca.certPem, 'client.cert': goodClient.certPem, 'client.key': goodClient.keyPem });
    const img = await client().resolve(parseReference(`${reg.host}/tls/mtls:v1`));
    assert.equal(img.manifestDigest, pushed.manifestDigest);

    // No client certificate: the registry ends the handshake.
    certsFor(reg.host, { 'ca.crt': ca.certPem });
    await assert.rejects(client().resolve(parseReference(`${reg.host}/tls/mtls:v1`)), (err: Error) => {
      assert.match(err.message, new RegExp(`^Get "https://${reg.host}/v2/": remote error: tls: (certificate required|bad certificate)`));
      return true;
    });

    // A certificate from a CA the registry does not trust.
    const stranger = otherCa.issue('stranger', { cn: 'stranger', usage: 'client' });
    certsFor(reg.host, { 'ca.crt': ca.certPem, 'client.cert': stranger.certPem, 'client.key': stranger.keyPem });
    await assert.rejects(client().resolve(parseReference(`${reg.host}/tls/mtls:v1`)), (err: Error) => {
      assert.match(err.message, new RegExp(`^Get "https://${reg.host}/v2/": remote error: tls: (unknown certificate authority|bad certificate)`));
      return true;
    });
  });

  test('a client certificate without its key is a clear configuration error', { skip }, async () => {
    certsFor(mtlsReg.host, { 'ca.crt': ca.certPem, 'client.cert': 'x' });
    await assert.rejects(client().resolve(parseReference(`${mtlsReg.host}/tls/mtls:v1`)), {
      message: 'missing key client.key for client certificate client.cert. CA certificates must use the extension .crt',
    });
    certsFor(mtlsReg.host, { 'ca.crt': ca.certPem, 'client.key': 'x' });
    await assert.rejects(client().resolve(parseReference(`${mtlsReg.host}/tls/mtls:v1`)), { message: 'missing client certificate client.cert for key client.key' });
  });

  test('a token service over HTTPS is trusted through the registry\'s CA, and verified', { skip }, async () => {
    for (const [signer, ok] of [[ca, true], [otherCa, false]] as const) {
      const tokenCert = signer.issue(`token-${signer.name}`, { cn: loop!.name, dns: [loop!.name], usage: 'server' });
      const tokens = await startTokenServer({ [creds.user]: creds.password }, {
        tls: { cert: tokenCert.certPem, key: tokenCert.keyPem }, address: loop!.address, hostname: loop!.name,
      });
      const server = ca.issue(`token-registry-${signer.name}`, { cn: loop!.name, dns: [loop!.name], usage: 'server' });
      const reg = await startRegistry({ tls: server, address: loop!.address, hostname: loop!.name, token: tokens });
      try {
        const pushed = await pushImage(reg, 'tls/token', 'v1', { auth: tokens.mint(creds.user, 'tls/token', ['pull', 'push']) });
        // Only the registry's directory holds the CA; the token service shares it.
        certsFor(reg.host, { 'ca.crt': ca.certPem });
        const pull = client().resolve(parseReference(`${reg.host}/tls/token:v1`), { auth: { username: creds.user, password: creds.password } });
        if (ok) {
          assert.equal((await pull).manifestDigest, pushed.manifestDigest);
          assert.ok(tokens.requests.length > 0);
        } else {
          await assert.rejects(pull, (err: Error) => {
            assert.match(err.message, new RegExp(`^Get "https://${loop!.name}:\\d+/token\\?.*": ${UNKNOWN_AUTHORITY}$`));
            return true;
          });
        }
      } finally {
        await reg.stop();
        await tokens.close();
      }
    }
  });

  test('a certificate for another name fails with Go\'s wording', { skip }, async () => {
    const wrong = ca.issue('wrong-name', { cn: 'elsewhere.invalid', dns: ['elsewhere.invalid'], usage: 'server' });
    const server = createServer({ cert: wrong.certPem, key: wrong.keyPem }, (_req, res) => res.end());
    await new Promise<void>((r) => server.listen(0, loop!.address, r));
    try {
      const host = `${loop!.name}:${(server.address() as { port: number }).port}`;
      certsFor(host, { 'ca.crt': ca.certPem });
      await assert.rejects(client().resolve(parseReference(`${host}/x/y:z`)), {
        message: `Get "https://${host}/v2/": tls: failed to verify certificate: x509: certificate is valid for elsewhere.invalid, not ${loop!.name}`,
      });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
