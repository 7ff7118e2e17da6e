/**
 * Recognizing and checking the manifest documents a registry returns: image manifests,
 * indexes/lists, and the deprecated schema 1 that Berth refuses.
 */
import { BerthError, invalidArgument } from '../lib/errors.js';
import { isDigest } from '../lib/digest.js';
import { MediaType, type Descriptor, type ImageIndex, type ImageManifest } from '../lib/oci.js';

/** Sent as `Accept` on manifest requests: every type Berth can use. */
export const MANIFEST_ACCEPT = [MediaType.ociIndex, MediaType.dockerManifestList, MediaType.ociManifest, MediaType.dockerManifest].join(', ');

export type ManifestKind = 'manifest' | 'index';

const MANIFEST_TYPES = new Set<string>([MediaType.dockerManifest, MediaType.ociManifest]);
const INDEX_TYPES = new Set<string>([MediaType.dockerManifestList, MediaType.ociIndex]);
const SCHEMA1_TYPES = new Set<string>([MediaType.schema1, MediaType.schema1Signed]);

export interface ParsedManifestDocument {
  kind: ManifestKind;
  /** The effective media type (from Content-Type, else from the document). */
  mediaType: string;
  manifest?: ImageManifest;
  index?: ImageIndex;
}

/**
 * Classifies and validates a manifest document. `contentType` is the response's Content-Type
 * (parameters ignored); registries that send a generic type are classified by the content.
 * `name` (familiar reference) only appears in error messages.
 */
export function parseManifestDocument(bytes: Buffer, contentType: string | undefined, name: string): ParsedManifestDocument {
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw invalidArgument(`invalid manifest for ${name}: not JSON`, err);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw invalidArgument(`invalid manifest for ${name}: not a JSON object`);
  const obj = doc as Record<string, unknown>;
  const declared = typeof obj.mediaType === 'string' ? obj.mediaType : undefined;
  const header = contentType?.split(';')[0]?.trim().toLowerCase();
  let mediaType = header !== undefined && header !== '' ? header : declared ?? '';

  if (obj.schemaVersion === 1 || SCHEMA1_TYPES.has(mediaType)) {
    throw new BerthError('invalid-argument',
      `${name} uses Docker Image manifest version 2, schema 1, a deprecated format Berth does not support; ` +
      'the image must be republished as an OCI or Docker schema 2 image');
  }
  if (!MANIFEST_TYPES.has(mediaType) && !INDEX_TYPES.has(mediaType)) {
    // Generic or missing Content-Type: trust the document's own mediaType, else its shape.
    if (declared !== undefined && (MANIFEST_TYPES.has(declared) || INDEX_TYPES.has(declared))) mediaType = declared;
    else if (Array.isArray(obj.manifests)) mediaType = MediaType.ociIndex;
    else if (obj.config !== undefined) mediaType = MediaType.ociManifest;
    else throw invalidArgument(`unsupported manifest media type ${JSON.stringify(mediaType)} for ${name}`);
  }
  if (obj.schemaVersion !== 2) throw invalidArgument(`invalid manifest for ${name}: schemaVersion must be 2`);

  if (INDEX_TYPES.has(mediaType)) {
    if (!Array.isArray(obj.manifests)) throw invalidArgument(`invalid manifest list for ${name}: no manifests`);
    obj.manifests.forEach((d, i) => checkDescriptor(d, `${name}: manifests[${i}]`));
    return { kind: 'index', mediaType, index: obj as unknown as ImageIndex };
  }
  checkDescriptor(obj.config, `${name}: config`);
  if (!Array.isArray(obj.layers)) throw invalidArgument(`invalid manifest for ${name}: no layers`);
  obj.layers.forEach((d, i) => checkDescriptor(d, `${name}: layers[${i}]`));
  return { kind: 'manifest', mediaType, manifest: obj as unknown as ImageManifest };
}

function checkDescriptor(d: unknown, where: string): asserts d is Descriptor {
  if (d === null || typeof d !== 'object') throw invalidArgument(`invalid manifest for ${where}: not a descriptor`);
  const o = d as Record<string, unknown>;
  if (typeof o.mediaType !== 'string') throw invalidArgument(`invalid manifest for ${where}: missing mediaType`);
  if (typeof o.digest !== 'string' || !isDigest(o.digest)) {
    throw invalidArgument(`invalid manifest for ${where}: unsupported or malformed digest ${JSON.stringify(o.digest)}`);
  }
  if (typeof o.size !== 'number' || !Number.isSafeInteger(o.size) || o.size < 0) throw invalidArgument(`invalid manifest for ${where}: bad size`);
  if (o.urls !== undefined && !(Array.isArray(o.urls) && o.urls.every((u) => typeof u === 'string'))) {
    throw invalidArgument(`invalid manifest for ${where}: bad urls`);
  }
}
