/**
 * RegistryClient against a real docker-registry (anonymous, htpasswd, JWT token auth) and, for
 * failures a real registry will not produce (corrupt blobs, redirects, lying manifests), against
 * small node:http servers.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { BerthError } from '../lib/errors.js';
import { sha256Of } from '../lib/digest.js';
import { MediaType, type Descriptor } from '../lib/oci.js';
import { RegistryClient, type ResolvedImage } from './registry-client.js';
import { parseReference } from './reference.js';
import { pushImage, pushIndex, startRegistry, startTokenServer, type PushedImage, type TestRegistry, type TokenServer } from '../../test/harness/bare-registry.js';

const AMD64 = { os: 'linux', architecture: 'amd64' };

async function readAll(s: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function isBerth(kind: string, message: RegExp | string) {
  return (e: unknown) => {
    assert.ok(e instanceof BerthError, `expected BerthError, got ${String(e)}`);
    assert.equal(e.kind, kind, e.message);
    if (typeof message === 'string') assert.equal(e.message, message);
    else assert.match(e.message, message);
    return true;
  };
}

async function checkLayers(client: RegistryClient, img: ResolvedImage, pushed: PushedImage) {
  assert.equal(img.manifest.layers.length, pushed.layers.length);
  for (const [i, layer] of pushed.layers.entries()) {
    const stream = await client.openBlob(img, img.manifest.layers[i]!);
    assert.ok((await readAll(stream as Readable)).equals(layer.data));
  }
}

describe('anonymous registry', () => {
  let reg: TestRegistry;
  const client = new RegistryClient();
  const repo = `berth-test/anon-${randomBytes(4).toString('hex')}`;
  let pushed: PushedImage;
  before(async () => {
    reg = await startRegistry();
    pushed = await pushImage(reg, repo, 'v1', { layerSizes: [3 * 1024 * 1024 + 17, 10] });
  });
  after(async () => {
    client.close();
    await reg?.stop();
  });

  test('pulls manifest, config and layers by tag', async () => {
    const img = await client.resolve(parseReference(`${reg.host}/${repo}:v1`), {});
    assert.equal(img.rootDigest, pushed.manifestDigest);
    assert.equal(img.manifestDigest, pushed.manifestDigest);
    assert.ok(img.manifestBytes.equals(pushed.manifestBytes));
    assert.equal(img.manifestMediaType, MediaType.dockerManifest);
    assert.equal(img.index, undefined);
    assert.ok(img.config.equals(pushed.config));
    assert.equal(img.endpoint, `http://${reg.host}/`, 'loopback falls back to plain HTTP');
    await checkLayers(client, img, pushed);
  });

  test('pulls by digest', async () => {
    const img = await client.resolve(parseReference(`${reg.host}/${repo}@${pushed.manifestDigest}`), {});
    assert.equal(img.manifestDigest, pushed.manifestDigest);
    assert.ok(img.config.equals(pushed.config));
  });

  test('unknown tag and unknown repository map to not-found', async () => {
    await assert.rejects(client.resolve(parseReference(`${reg.host}/${repo}:nope`), {}),
      isBerth('not-found', `manifest for ${reg.host}/${repo}:nope not found: manifest unknown: manifest unknown`));
    await assert.rejects(client.resolve(parseReference(`${reg.host}/berth-test/missing-${randomBytes(3).toString('hex')}`), {}),
      isBerth('not-found', /not found/));
  });

  test('a layer stream can be abandoned midway', async () => {
    const img = await client.resolve(parseReference(`${reg.host}/${repo}:v1`), {});
    const stream = (await client.openBlob(img, img.manifest.layers[0]!)) as Readable;
    for await (const _ of stream) break; // destroys the stream after one chunk
    assert.ok(stream.destroyed);
  });

  test('platform of a single manifest is left to the caller; index selection is by platform', async () => {
    const amd = await pushImage(reg, repo, undefined, { platform: AMD64, oci: true });
    const arm = await pushImage(reg, repo, undefined, { platform: { os: 'linux', architecture: 'arm64', variant: 'v8' }, oci: true });
    const attestation: Descriptor = { ...amd.descriptor, platform: { os: 'unknown', architecture: 'unknown' } };
    const index = await pushIndex(reg, repo, 'multi', [attestation, amd.descriptor, arm.descriptor]);
    const ref = parseReference(`${reg.host}/${repo}:multi`);

    const a = await client.resolve(ref, { platform: AMD64 });
    assert.equal(a.rootDigest, index.digest);
    assert.equal(a.manifestDigest, amd.manifestDigest);
    assert.ok(a.index?.bytes.equals(index.bytes));
    assert.equal(a.index?.mediaType, MediaType.ociIndex);
    assert.equal(a.manifestMediaType, MediaType.ociManifest);
    assert.ok(a.config.equals(amd.config));
    await checkLayers(client, a, amd);

    const b = await client.resolve(ref, { platform: { os: 'linux', architecture: 'arm64' } });
    assert.equal(b.manifestDigest, arm.manifestDigest);
    assert.ok(b.config.equals(arm.config));

    await assert.rejects(client.resolve(ref, { platform: { os: 'linux', architecture: 's390x' } }),
      isBerth('not-found', 'no matching manifest for linux/s390x in the manifest list entries'));
    const byDigest = await client.resolve(parseReference(`${reg.host}/${repo}@${index.digest}`), { platform: AMD64 });
    assert.equal(byDigest.manifestDigest, amd.manifestDigest);
  });

  test('mirrors serve Docker Hub references, in order, skipping dead ones', async () => {
    await pushImage(reg, 'library/mirrored', 'latest');
    const mirrored = new RegistryClient({ mirrors: ['http://127.0.0.1:1', `http://${reg.host}`] });
    try {
      const img = await mirrored.resolve(parseReference('mirrored'), {});
      assert.equal(img.endpoint, `http://${reg.host}/`);
      assert.equal(img.ref.path, 'library/mirrored');
    } finally {
      mirrored.close();
    }
  });

  test('login to an open registry succeeds', async () => {
    assert.deepEqual(await client.login({ serveraddress: reg.host, username: 'x', password: 'y' }), { Status: 'Login Succeeded', IdentityToken: '' });
  });
});

describe('TLS registry with a self-signed certificate on loopback', () => {
  let reg: TestRegistry;
  const client = new RegistryClient();
  before(async () => {
    reg = await startRegistry({ tls: true });
  });
  after(async () => {
    client.close();
    await reg?.stop();
  });

  test('is reached over HTTPS without verification', async () => {
    const pushed = await pushImage(reg, 'berth-test/tls', 'v1');
    const img = await client.resolve(parseReference(`${reg.host}/berth-test/tls:v1`), {});
    assert.equal(img.endpoint, `https://${reg.host}/`);
    await checkLayers(client, img, pushed);
  });
});

describe('htpasswd (Basic) registry', () => {
  let reg: TestRegistry;
  const client = new RegistryClient();
  const creds = { user: 'berth', password: `pw-${randomBytes(4).toString('hex')}` };
  const repo = 'berth-test/basic';
  let pushed: PushedImage;
  before(async () => {
    reg = await startRegistry({ htpasswd: creds });
    pushed = await pushImage(reg, repo, 'v1', { auth: creds });
  });
  after(async () => {
    client.close();
    await reg?.stop();
  });

  test('right password pulls', async () => {
    const img = await client.resolve(parseReference(`${reg.host}/${repo}:v1`), { auth: { username: creds.user, password: creds.password } });
    assert.equal(img.manifestDigest, pushed.manifestDigest);
    await checkLayers(client, img, pushed);
  });

  test('wrong password is unauthorized; no credentials is pull access denied', async () => {
    const ref = parseReference(`${reg.host}/${repo}:v1`);
    await assert.rejects(client.resolve(ref, { auth: { username: creds.user, password: 'wrong' } }),
      isBerth('unauthorized', `Get "http://${reg.host}/v2/${repo}/manifests/v1": unauthorized: authentication required`));
    await assert.rejects(client.resolve(ref, {}),
      isBerth('not-found', `pull access denied for ${reg.host}/${repo}, repository does not exist or may require 'docker login': unauthorized: authentication required`));
  });

  test('login', async () => {
    assert.deepEqual(await client.login({ serveraddress: `http://${reg.host}/v2/`, username: creds.user, password: creds.password }),
      { Status: 'Login Succeeded', IdentityToken: '' });
    await assert.rejects(client.login({ serveraddress: reg.host, username: creds.user, password: 'nope' }),
      isBerth('unauthorized', `login attempt to http://${reg.host}/v2/ failed with status: 401 Unauthorized`));
  });
});

describe('token (Bearer) registry', () => {
  let tokens: TokenServer;
  let reg: TestRegistry;
  const client = new RegistryClient();
  const user = 'alice';
  const password = `pw-${randomBytes(4).toString('hex')}`;
  const repo = 'berth-test/bearer';
  let pushed: PushedImage;
  before(async () => {
    tokens = await startTokenServer({ [user]: password });
    reg = await startRegistry({ token: tokens });
    pushed = await pushImage(reg, repo, 'v1', { auth: tokens.mint(user, repo, ['pull', 'push']), layerSizes: [100, 200] });
  });
  after(async () => {
    client.close();
    await reg?.stop();
    await tokens?.close();
  });

  test('credentials get a token, reused across requests and pulls', async () => {
    const ref = parseReference(`${reg.host}/${repo}:v1`);
    const auth = { username: user, password };
    const before = tokens.requests.length;
    const img = await client.resolve(ref, { auth });
    await checkLayers(client, img, pushed);
    await client.resolve(ref, { auth });
    const seen = tokens.requests.slice(before);
    assert.equal(seen.length, 1, 'one token for manifest, config, layers and a second pull');
    assert.equal(seen[0]!.method, 'GET');
    assert.equal(seen[0]!.params.get('service'), tokens.service);
    assert.equal(seen[0]!.params.get('scope'), `repository:${repo}:pull`);
    assert.equal(seen[0]!.params.get('account'), user);
    assert.match(seen[0]!.authorization ?? '', /^Basic /);
  });

  test('anonymous gets pull access denied; wrong password is unauthorized', async () => {
    const ref = parseReference(`${reg.host}/${repo}:v1`);
    await assert.rejects(client.resolve(ref, {}),
      isBerth('not-found', `pull access denied for ${reg.host}/${repo}, repository does not exist or may require 'docker login': denied: requested access to the resource is denied`));
    await assert.rejects(client.resolve(ref, { auth: { username: user, password: 'wrong' } }),
      isBerth('unauthorized', /^Get "http:\/\/127\.0\.0\.1:\d+\/token\?.*": unauthorized: incorrect username or password$/));
  });

  test('login returns a refresh token that works as identitytoken (OAuth POST)', async () => {
    const res = await client.login({ serveraddress: reg.host, username: user, password });
    assert.equal(res.Status, 'Login Succeeded');
    assert.ok(res.IdentityToken.length > 0);
    const login = tokens.requests.at(-1)!;
    assert.equal(login.params.get('offline_token'), 'true');
    assert.equal(login.params.get('client_id'), 'docker');

    const before = tokens.requests.length;
    const img = await client.resolve(parseReference(`${reg.host}/${repo}:v1`), { auth: { identitytoken: res.IdentityToken } });
    assert.equal(img.manifestDigest, pushed.manifestDigest);
    const post = tokens.requests.slice(before);
    assert.equal(post.length, 1);
    assert.equal(post[0]!.method, 'POST');
    assert.equal(post[0]!.params.get('grant_type'), 'refresh_token');
    assert.equal(post[0]!.params.get('scope'), `repository:${repo}:pull`);

    await assert.rejects(client.login({ serveraddress: reg.host, username: user, password: 'bad' }),
      isBerth('unauthorized', `Get "http://${reg.host}/v2/": unauthorized: incorrect username or password`));
  });

  test('registrytoken is sent as is, without asking the token service', async () => {
    const before = tokens.requests.length;
    const img = await client.resolve(parseReference(`${reg.host}/${repo}:v1`), { auth: { registrytoken: tokens.mint('bob', repo, ['pull']) } });
    assert.equal(img.manifestDigest, pushed.manifestDigest);
    assert.equal(tokens.requests.length, before);
  });
});

/** A tiny fake registry for what a real one never does. */
describe('misbehaving servers', () => {
  const servers: Server[] = [];
  const client = new RegistryClient();
  after(async () => {
    client.close();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
    const s = createServer(handler);
    servers.push(s);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    return `127.0.0.1:${(s.address() as { port: number }).port}`;
  }

  /** Serves one image; `blob` may override a blob response. */
  function image(layer: Buffer) {
    const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [sha256Of(layer)] } }));
    const layerDesc: Descriptor = { mediaType: MediaType.dockerLayerGzip, digest: sha256Of(layer), size: layer.length };
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2, mediaType: MediaType.dockerManifest,
      config: { mediaType: MediaType.dockerConfig, digest: sha256Of(config), size: config.length }, layers: [layerDesc],
    }));
    return { config, layerDesc, manifest, digest: sha256Of(manifest) };
  }

  test('a corrupted blob fails the stream with dockerd\'s message', async () => {
    const layer = randomBytes(50_000);
    const img = image(layer);
    const host = await serve((req, res) => {
      if (req.url === '/v2/') return res.writeHead(200).end('{}');
      if (req.url?.includes('/manifests/')) return res.writeHead(200, { 'content-type': MediaType.dockerManifest }).end(img.manifest);
      if (req.url?.endsWith(img.layerDesc.digest)) {
        const bad = Buffer.from(layer);
        bad[1234] ^= 0xff;
        return res.writeHead(200).end(bad);
      }
      if (req.url?.endsWith(sha256Of(img.config))) return res.writeHead(200).end(img.config);
      res.writeHead(404).end();
    });
    const resolved = await client.resolve(parseReference(`${host}/x:y`), {});
    const stream = await client.openBlob(resolved, img.layerDesc);
    await assert.rejects(readAll(stream as Readable), isBerth('internal', `filesystem layer verification failed for digest ${img.layerDesc.digest}`));
  });

  test('a blob longer than its descriptor fails early; a wrong manifest digest is refused', async () => {
    const layer = randomBytes(1000);
    const img = image(layer);
    const lying = image(randomBytes(10));
    const host = await serve((req, res) => {
      if (req.url === '/v2/') return res.writeHead(200).end('{}');
      if (req.url?.includes('/manifests/bydigest')) {
        return res.writeHead(200, { 'content-type': MediaType.dockerManifest, 'docker-content-digest': lying.digest }).end(img.manifest);
      }
      if (req.url?.includes('/manifests/')) return res.writeHead(200, { 'content-type': MediaType.dockerManifest }).end(img.manifest);
      if (req.url?.endsWith(img.layerDesc.digest)) {
        res.writeHead(200); // chunked: no Content-Length to check up front
        res.write(layer);
        res.end(Buffer.alloc(10));
        return;
      }
      if (req.url?.endsWith(sha256Of(img.config))) return res.writeHead(200).end(img.config);
      res.writeHead(404).end();
    });
    const resolved = await client.resolve(parseReference(`${host}/x:y`), {});
    await assert.rejects(readAll((await client.openBlob(resolved, img.layerDesc)) as Readable), { message: /filesystem layer verification failed/ });
    await assert.rejects(client.resolve(parseReference(`${host}/x@${lying.digest}`), {}), { message: /manifest verification failed for digest/ });
    await assert.rejects(client.resolve(parseReference(`${host}/x:bydigest`), {}), { message: `manifest verification failed for digest ${lying.digest}: got ${img.digest}` });
  });

  test('redirected blobs do not carry credentials to another host', async () => {
    const layer = randomBytes(2000);
    const img = image(layer);
    const cdnSaw: Array<string | undefined> = [];
    const cdn = await serve((req, res) => {
      cdnSaw.push(req.headers.authorization);
      res.writeHead(200).end(req.url === '/layer' ? layer : img.config);
    });
    const registrySaw: Array<string | undefined> = [];
    const host = await serve((req, res) => {
      registrySaw.push(req.headers.authorization);
      if (!req.headers.authorization) return res.writeHead(401, { 'www-authenticate': 'Basic realm="fake"' }).end();
      if (req.url === '/v2/') return res.writeHead(200).end('{}');
      if (req.url?.includes('/manifests/')) return res.writeHead(200, { 'content-type': MediaType.dockerManifest }).end(img.manifest);
      const target = req.url?.endsWith(img.layerDesc.digest) ? '/layer' : '/config';
      res.writeHead(307, { location: `http://${cdn}${target}` }).end();
    });
    const resolved = await client.resolve(parseReference(`${host}/x:y`), { auth: { username: 'u', password: 'p' } });
    assert.ok((await readAll((await client.openBlob(resolved, img.layerDesc)) as Readable)).equals(layer));
    assert.deepEqual(cdnSaw, [undefined, undefined]);
    assert.ok(registrySaw.slice(1).every((a) => a === `Basic ${Buffer.from('u:p').toString('base64')}`));
  });

  test('schema1 manifests are refused as deprecated', async () => {
    const host = await serve((req, res) => {
      if (req.url === '/v2/') return res.writeHead(200).end('{}');
      res.writeHead(200, { 'content-type': MediaType.schema1Signed }).end(JSON.stringify({ schemaVersion: 1, name: 'x', tag: 'y', fsLayers: [] }));
    });
    await assert.rejects(client.resolve(parseReference(`${host}/x:y`), {}), isBerth('invalid-argument', /schema 1, a deprecated format/));
  });

  test('aborting a pull mid-blob closes the connection', async () => {
    const layer = randomBytes(4 * 1024 * 1024);
    const img = image(layer);
    let blobClosed!: () => void;
    const closed = new Promise<void>((r) => (blobClosed = r));
    const host = await serve((req, res) => {
      if (req.url === '/v2/') return res.writeHead(200).end('{}');
      if (req.url?.includes('/manifests/')) return res.writeHead(200, { 'content-type': MediaType.dockerManifest }).end(img.manifest);
      if (req.url?.endsWith(img.layerDesc.digest)) {
        res.on('close', () => blobClosed());
        res.writeHead(200, { 'content-length': layer.length });
        res.write(layer.subarray(0, 100_000)); // then stall
        return;
      }
      res.writeHead(200).end(img.config);
    });
    const ac = new AbortController();
    const resolved = await client.resolve(parseReference(`${host}/x:y`), { signal: ac.signal });
    const stream = (await client.openBlob(resolved, img.layerDesc, ac.signal)) as Readable;
    const read = readAll(stream);
    setTimeout(() => ac.abort(), 50);
    await assert.rejects(read, { name: 'AbortError' });
    await closed;
  });

  test('an aborted resolve rejects promptly', async () => {
    const host = await serve(() => {
      // never answers
    });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    await assert.rejects(client.resolve(parseReference(`${host}/x:y`), { signal: ac.signal }), { name: 'AbortError' });
  });
});
