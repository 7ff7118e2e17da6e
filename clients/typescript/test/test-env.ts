/**
 * What the client tests run against: a berthd and seeded registries started by the project's
 * test harness (`node dist/test/harness/cli.js up --out FILE`), whose description file is named
 * by BERTH_CLIENT_TEST_ENV. Temp dirs made here are removed after the test file.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { createHash, randomBytes } from 'node:crypto';

export interface TestRegistry {
  host: string;
  username?: string;
  password?: string;
}

export interface TestEnv {
  /** DOCKER_HOST form of berthd's socket. */
  dockerHost: string;
  registries: { open: TestRegistry; basic: TestRegistry; token: TestRegistry };
}

export function loadTestEnv(): TestEnv {
  const file = process.env.BERTH_CLIENT_TEST_ENV;
  if (!file) throw new Error('BERTH_CLIENT_TEST_ENV is not set: run the tests through scripts/test-clients.sh');
  return JSON.parse(readFileSync(file, 'utf8')) as TestEnv;
}

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

export function tempDir(prefix = 'berth-client-test-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

/** A name unique to this run, for containers and image tags the test creates. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

/**
 * Pushes to an open registry an image whose only layer is random bytes (valid digests, not a
 * tar): a daemon fails on it after the pull has begun, so the failure arrives inside the stream.
 */
export async function pushBrokenImage(registryHost: string): Promise<string> {
  const name = uniqueName('broken');
  const base = `http://${registryHost}/v2/${name}`;
  const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
  const upload = async (data: Buffer): Promise<string> => {
    const digest = sha(data);
    const start = await fetch(`${base}/blobs/uploads/`, { method: 'POST' });
    if (start.status !== 202) throw new Error(`blob upload start: ${start.status}`);
    const location = new URL(start.headers.get('location')!, `http://${registryHost}`);
    location.searchParams.set('digest', digest);
    const put = await fetch(location, { method: 'PUT', body: new Uint8Array(data), headers: { 'Content-Type': 'application/octet-stream' } });
    if (put.status !== 201) throw new Error(`blob upload: ${put.status}`);
    return digest;
  };
  const layer = randomBytes(4096);
  const layerDigest = await upload(layer);
  const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [layerDigest] }, config: {} }));
  const configDigest = await upload(config);
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: configDigest, size: config.length },
    layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: layerDigest, size: layer.length }],
  });
  const res = await fetch(`${base}/manifests/latest`, { method: 'PUT', body: manifest, headers: { 'Content-Type': 'application/vnd.oci.image.manifest.v1+json' } });
  if (res.status !== 201) throw new Error(`manifest upload: ${res.status}`);
  return `${registryHost}/${name}:latest`;
}
