import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MediaType } from '../lib/oci.js';
import { MANIFEST_ACCEPT, parseManifestDocument } from './manifest-format.js';
import { parseErrorBody, formatErrorEntry } from './registry-errors.js';

const D = 'sha256:' + 'a'.repeat(64);
const manifest = { schemaVersion: 2, config: { mediaType: MediaType.ociConfig, digest: D, size: 2 }, layers: [{ mediaType: MediaType.ociLayerGzip, digest: D, size: 3 }] };
const index = { schemaVersion: 2, manifests: [{ mediaType: MediaType.ociManifest, digest: D, size: 4, platform: { os: 'linux', architecture: 'amd64' } }] };
const buf = (o: unknown) => Buffer.from(JSON.stringify(o));

test('Accept lists the four supported types', () => {
  for (const t of [MediaType.ociIndex, MediaType.ociManifest, MediaType.dockerManifest, MediaType.dockerManifestList]) assert.ok(MANIFEST_ACCEPT.includes(t));
});

test('classifies by Content-Type (ignoring parameters), then by document', () => {
  assert.equal(parseManifestDocument(buf(manifest), `${MediaType.dockerManifest}; charset=utf-8`, 'x').mediaType, MediaType.dockerManifest);
  assert.equal(parseManifestDocument(buf(manifest), 'application/json', 'x').kind, 'manifest');
  assert.equal(parseManifestDocument(buf(index), 'text/plain', 'x').kind, 'index');
  assert.equal(parseManifestDocument(buf({ ...index, mediaType: MediaType.dockerManifestList }), undefined, 'x').mediaType, MediaType.dockerManifestList);
});

test('refuses schema1 and malformed documents', () => {
  assert.throws(() => parseManifestDocument(buf({ schemaVersion: 1 }), 'application/json', 'x'), /deprecated/);
  assert.throws(() => parseManifestDocument(buf(manifest), MediaType.schema1Signed, 'x'), /deprecated/);
  assert.throws(() => parseManifestDocument(Buffer.from('{'), MediaType.ociManifest, 'x'), /not JSON/);
  assert.throws(() => parseManifestDocument(buf({ ...manifest, layers: [{ mediaType: 'x', digest: 'sha512:' + 'a'.repeat(128), size: 1 }] }), MediaType.ociManifest, 'x'), /digest/);
  assert.throws(() => parseManifestDocument(buf({ ...manifest, config: { ...manifest.config, size: -1 } }), MediaType.ociManifest, 'x'), /size/);
  assert.throws(() => parseManifestDocument(buf({ schemaVersion: 2 }), 'application/json', 'x'), /unsupported manifest media type/);
});

test('registry and token-service error bodies', () => {
  const e = parseErrorBody('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"x"}}]}');
  assert.equal(formatErrorEntry(e[0]!), 'manifest unknown: manifest unknown');
  assert.equal(formatErrorEntry(parseErrorBody('{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}')[0]!), 'toomanyrequests: slow down');
  assert.equal(formatErrorEntry(parseErrorBody('{"details":"incorrect username or password"}')[0]!), 'incorrect username or password');
  assert.deepEqual(parseErrorBody('<html>'), []);
});
