/**
 * `docker login`, `docker pull` and `docker push` through berthd (the real docker CLI on the unix socket)
 * against docker-registry over HTTPS with a private CA: they work once the CA (and, for a
 * registry that wants one, a client certificate) is in the certs.d directory, and fail with
 * dockerd's x509 wording when it is not.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { sha256Of } from '../../src/lib/digest.js';
import { MediaType } from '../../src/lib/oci.js';
import { pushBlob, pushManifest, startRegistry, type Credentials, type PushTarget, type TestRegistry } from '../harness/bare-registry.js';
import { startDaemon, type TestDaemon } from './daemon.js';
import { createCa, loopbackName, type CertFiles, type TestCa } from './pki.js';

const UNKNOWN_AUTHORITY = 'tls: failed to verify certificate: x509: certificate signed by unknown authority';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** A one-file layer (a real gzip tar: the daemon unpacks it). */
async function tinyLayer(): Promise<{ gz: Buffer; diffId: string }> {
  const pack = tar.pack();
  pack.entry({ name: 'hello.txt', mode: 0o644, mtime: new Date('2024-01-01T00:00:00Z') }, 'hello over TLS\n');
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  return { gz: gzipSync(raw), diffId: sha256Of(raw) };
}

async function pushTinyImage(reg: PushTarget, repo: string, tag: string, auth?: Credentials): Promise<string> {
  const layer = await tinyLayer();
  const layerDesc = await pushBlob(reg, repo, layer.gz, MediaType.dockerLayerGzip, auth);
  const config = Buffer.from(JSON.stringify({
    architecture: process.arch === 'arm64' ? 'arm64' : 'amd64', os: 'linux', config: { Cmd: ['/hello.txt'] },
    rootfs: { type: 'layers', diff_ids: [layer.diffId] },
  }));
  const configDesc = await pushBlob(reg, repo, config, MediaType.dockerConfig, auth);
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MediaType.dockerManifest, config: configDesc, layers: [layerDesc] }));
  return pushManifest(reg, repo, tag, manifest, MediaType.dockerManifest, auth);
}

describe('docker login and pull through berthd over HTTPS with a private CA', async () => {
  const loop = await loopbackName();
  const skip = loop ? false : 'no host name resolves to a loopback address on this machine';
  const dir = mkdtempSync(join(tmpdir(), 'berth-tls-cli-'));
  const certsDir = join(dir, 'certs.d');
  const creds = { user: 'cli-user', password: 'cli-secret-pw' };
  let ca: TestCa;
  let basicReg: TestRegistry;
  let mtlsReg: TestRegistry;
  let goodClient: CertFiles;
  let daemon: TestDaemon;
  let dockerConfig: string;

  const docker = (args: string[], input?: string): Promise<Run> =>
    new Promise((resolve) => {
      const child = execFile('docker', args, {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, DOCKER_HOST: `unix://${daemon.socket}`, DOCKER_CONFIG: dockerConfig },
        timeout: 120_000,
      }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
      child.stdin?.end(input);
    });
  const certsFor = (host: string, files: Record<string, string>) => {
    const d = join(certsDir, host);
    rmSync(d, { recursive: true, force: true });
    mkdirSync(d, { recursive: true });
    for (const [name, text] of Object.entries(files)) writeFileSync(join(d, name), text);
  };

  before(async () => {
    if (!loop) return;
    mkdirSync(certsDir);
    dockerConfig = join(dir, 'docker-config');
    mkdirSync(dockerConfig);
    ca = createCa(dir, 'registry-ca');
    const server = ca.issue('registry', { cn: loop.name, dns: [loop.name], usage: 'server' });
    const clientCa = createCa(dir, 'client-ca');
    goodClient = clientCa.issue('client', { cn: 'berthd', usage: 'client' });
    basicReg = await startRegistry({ tls: server, address: loop.address, hostname: loop.name, htpasswd: creds });
    mtlsReg = await startRegistry({ tls: { ...server, clientCas: [clientCa.cert] }, address: loop.address, hostname: loop.name });
    await pushTinyImage(basicReg, 'tls/hello', 'v1', creds);
    await pushTinyImage({ url: mtlsReg.url, clientCert: { cert: goodClient.certPem, key: goodClient.keyPem } }, 'tls/mtls', 'v1');
    daemon = await startDaemon({ env: { BERTH_CERTS_D: certsDir } });
  });

  after(async () => {
    await daemon?.stop();
    await basicReg?.stop();
    await mtlsReg?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('without the CA, login and pull fail with the registry and the x509 reason', { skip }, async () => {
    rmSync(join(certsDir, basicReg.host), { recursive: true, force: true });
    const login = await docker(['login', basicReg.host, '-u', creds.user, '--password-stdin'], creds.password);
    assert.notEqual(login.code, 0);
    assert.ok(login.stderr.includes(`Get "https://${basicReg.host}/v2/": ${UNKNOWN_AUTHORITY}`), login.stderr);
    const pull = await docker(['pull', `${basicReg.host}/tls/hello:v1`]);
    assert.notEqual(pull.code, 0);
    assert.ok(pull.stderr.includes(`Error response from daemon: Get "https://${basicReg.host}/v2/": ${UNKNOWN_AUTHORITY}`), pull.stderr);
  });

  test('with the CA in certs.d, login and an authenticated pull succeed', { skip }, async () => {
    certsFor(basicReg.host, { 'ca.crt': ca.certPem });
    const login = await docker(['login', basicReg.host, '-u', creds.user, '--password-stdin'], creds.password);
    assert.equal(login.code, 0, login.stderr);
    assert.match(login.stdout, /Login Succeeded/);
    const bad = await docker(['login', basicReg.host, '-u', creds.user, '--password-stdin'], 'wrong-password');
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /401 Unauthorized/);
    const pull = await docker(['pull', `${basicReg.host}/tls/hello:v1`]);
    assert.equal(pull.code, 0, pull.stderr);
    assert.match(pull.stdout, /Downloaded newer image|Image is up to date/);
    const images = await docker(['images', '--format', '{{.Repository}}:{{.Tag}}']);
    assert.ok(images.stdout.split('\n').includes(`${basicReg.host}/tls/hello:v1`), images.stdout);
  });

  test('a registry that requires a client certificate gets the one in certs.d', { skip }, async () => {
    certsFor(mtlsReg.host, { 'ca.crt': ca.certPem });
    const refused = await docker(['pull', `${mtlsReg.host}/tls/mtls:v1`]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, new RegExp(`Get "https://${mtlsReg.host}/v2/": remote error: tls: (bad certificate|certificate required)`));
    certsFor(mtlsReg.host, { 'ca.crt': ca.certPem, 'client.cert': goodClient.certPem, 'client.key': goodClient.keyPem });
    const pull = await docker(['pull', `${mtlsReg.host}/tls/mtls:v1`]);
    assert.equal(pull.code, 0, pull.stderr);
  });
  test('push over HTTPS: the CA and the client certificate in certs.d, credentials from docker login; pulls back as the same image', { skip }, async () => {
    certsFor(basicReg.host, { 'ca.crt': ca.certPem });
    certsFor(mtlsReg.host, { 'ca.crt': ca.certPem, 'client.cert': goodClient.certPem, 'client.key': goodClient.keyPem });
    const login = await docker(['login', basicReg.host, '-u', creds.user, '--password-stdin'], creds.password);
    assert.equal(login.code, 0, login.stderr);
    const source = `${basicReg.host}/tls/hello:v1`;
    assert.equal((await docker(['pull', source])).code, 0);
    const id = (await docker(['image', 'inspect', '-f', '{{.Id}}', source])).stdout.trim();
    for (const target of [`${basicReg.host}/tls/pushed:v1`, `${mtlsReg.host}/tls/pushed:v1`]) {
      assert.equal((await docker(['tag', source, target])).code, 0);
      const push = await docker(['push', target]);
      assert.equal(push.code, 0, push.stderr);
      assert.match(push.stdout, /v1: digest: sha256:[0-9a-f]{64} size: \d+/);
      assert.equal((await docker(['rmi', target])).code, 0);
      const pull = await docker(['pull', target]);
      assert.equal(pull.code, 0, pull.stderr);
      assert.equal((await docker(['image', 'inspect', '-f', '{{.Id}}', target])).stdout.trim(), id);
    }
  });
});
