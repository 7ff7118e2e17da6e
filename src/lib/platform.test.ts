import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Descriptor, Platform } from './oci.js';
import { formatPlatform, hostPlatform, normalizePlatform, parsePlatform, selectManifest } from './platform.js';

const entry = (n: number, platform: Platform): Descriptor => ({
  mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: `sha256:${String(n).repeat(64).slice(0, 64)}`, size: 1, platform,
});

const entries = [
  entry(1, { os: 'unknown', architecture: 'unknown' }), // attestation manifests
  entry(2, { os: 'linux', architecture: 'amd64' }),
  entry(3, { os: 'linux', architecture: 'arm', variant: 'v6' }),
  entry(4, { os: 'linux', architecture: 'arm', variant: 'v7' }),
  entry(5, { os: 'linux', architecture: 'arm64', variant: 'v8' }),
  entry(6, { os: 'linux', architecture: 's390x' }),
];

test('selects by os, architecture and variant with defaults', () => {
  assert.equal(selectManifest(entries, { os: 'linux', architecture: 'amd64' }), entries[1]);
  assert.equal(selectManifest(entries, { os: 'linux', architecture: 'x86_64' }), entries[1]);
  assert.equal(selectManifest(entries, { os: 'linux', architecture: 'arm64' }), entries[4]);
  assert.equal(selectManifest(entries, { os: 'linux', architecture: 'aarch64', variant: 'v8' }), entries[4]);
  assert.equal(selectManifest(entries, { os: 'linux', architecture: 'arm' }), entries[3]);
  assert.equal(selectManifest(entries, { os: 'linux', architecture: 'arm', variant: 'v6' }), entries[2]);
  // arm64 entries without a variant still match arm64/v8.
  assert.equal(selectManifest([entry(7, { os: 'linux', architecture: 'arm64' })], { os: 'linux', architecture: 'arm64', variant: 'v8' }).digest.slice(7, 8), '7');
  // an arm/v7 host runs v6 images when no v7 exists
  assert.equal(selectManifest([entries[2]!], { os: 'linux', architecture: 'arm' }), entries[2]);
});

test('no match gives dockerd message', () => {
  assert.throws(() => selectManifest(entries.slice(2), { os: 'linux', architecture: 'amd64' }), {
    message: 'no matching manifest for linux/amd64 in the manifest list entries',
  });
  assert.throws(() => selectManifest(entries, { os: 'windows', architecture: 'amd64' }), (e: Error & { kind?: string }) => e.kind === 'not-found');
  assert.throws(() => selectManifest([entries[3]!], { os: 'linux', architecture: 'arm', variant: 'v6' }));
});

test('parse, format, normalize, host', () => {
  assert.deepEqual(parsePlatform('linux/arm64'), { os: 'linux', architecture: 'arm64' });
  assert.deepEqual(parsePlatform('Linux/AMD64'), { os: 'linux', architecture: 'amd64' });
  assert.deepEqual(parsePlatform('linux/x86_64'), { os: 'linux', architecture: 'amd64' });
  assert.deepEqual(parsePlatform('linux/armhf'), { os: 'linux', architecture: 'arm', variant: 'v7' });
  assert.deepEqual(parsePlatform('linux/arm/v6'), { os: 'linux', architecture: 'arm', variant: 'v6' });
  assert.deepEqual(parsePlatform('linux'), hostPlatform());
  assert.equal(parsePlatform(''), undefined);
  assert.equal(parsePlatform(undefined), undefined);
  assert.throws(() => parsePlatform('linux//x'), { name: 'BerthError' });
  assert.throws(() => parsePlatform('linux/'), { name: 'BerthError' });
  assert.throws(() => parsePlatform('a/b/c/d'), { name: 'BerthError' });
  assert.equal(formatPlatform({ os: 'linux', architecture: 'arm', variant: 'v7' }), 'linux/arm/v7');
  assert.deepEqual(normalizePlatform({ os: 'linux', architecture: 'armhf' }), { os: 'linux', architecture: 'arm', variant: 'v7' });
  assert.equal(hostPlatform().os, 'linux');
  assert.ok(hostPlatform().architecture.length > 0);
});
