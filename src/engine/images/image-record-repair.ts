/**
 * An image's config when the stored text does not read. The config's bytes are the image: its id is
 * their digest, and pulls, loads, imports and commits also keep them as a blob in the content store.
 * So a damaged column is read back from that blob (checked against the id); without a good blob the
 * image is unusable, and says so, while every other image lists and runs as before.
 */
import { readFileSync, statSync } from 'node:fs';
import { sha256Of, type Digest } from '../../lib/digest.js';
import { MediaType, type Descriptor, type ImageConfig } from '../../lib/oci.js';
import type { ImageRecord } from '../../state/image-records.js';
import type { ContentStore } from '../../images/content-store.js';

export type ConfigRead = { config: ImageConfig; repaired?: string } | { config?: undefined; error: string };

/** An object whose layers, if it names any, are a list: pull and load accept a config without `rootfs` too. */
const isConfig = (v: unknown): v is ImageConfig => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const rootfs = (v as { rootfs?: unknown }).rootfs;
  return rootfs === undefined || (typeof rootfs === 'object' && rootfs !== null && Array.isArray((rootfs as { diff_ids?: unknown }).diff_ids));
};

function parseConfig(text: string): ImageConfig | string {
  try {
    const v: unknown = JSON.parse(text);
    return isConfig(v) ? v : 'not an image config';
  } catch (err) {
    return (err as Error).message;
  }
}

/** The stored config, else its blob's; `error` names what is wrong when neither reads. */
export function readImageConfig(content: ContentStore, record: ImageRecord): ConfigRead {
  const stored = parseConfig(record.config);
  if (typeof stored !== 'string') return { config: stored };
  const blob = intactBlob(content, record.id);
  if (blob) {
    const fromBlob = parseConfig(blob.toString('utf8'));
    if (typeof fromBlob !== 'string') return { config: fromBlob, repaired: `config unreadable (${stored}), read from its blob` };
  }
  return { error: `the stored config of image ${record.id} is unreadable (${stored}) and no intact copy of it is kept: remove the image and pull or build it again` };
}

/** What a listing shows of an image whose config is lost: its row's facts only. */
export function placeholderConfig(record: ImageRecord): ImageConfig {
  return { created: record.created, architecture: '', os: '', rootfs: { type: 'layers', diff_ids: [] } };
}

/** A blob of the content store by digest, if it is there and intact. */
function intactBlob(content: ContentStore, digest: string): Buffer | undefined {
  try {
    const bytes = readFileSync(content.path(digest as Digest));
    return sha256Of(bytes) === digest ? bytes : undefined;
  } catch {
    return undefined;
  }
}

interface ManifestLike {
  config?: { digest?: unknown };
  layers?: unknown;
  manifests?: { digest?: unknown }[];
}

const parseManifest = (bytes: Buffer | undefined): ManifestLike | undefined => {
  try {
    return bytes ? (JSON.parse(bytes.toString('utf8')) as ManifestLike) : undefined;
  } catch {
    return undefined;
  }
};

/**
 * The layer blobs of an image whose stored list was lost: from the manifest its digest references
 * name (a pulled image's blobs as the registry gave them; in an index, the child whose config is
 * this image), else, layer by layer, the blob another image records for the same diff id (`known`)
 * or the uncompressed tar kept under it (load, import, commit). A layer found nowhere gets a
 * descriptor of size -1, which no blob matches: push and save compress it from its files, and the
 * list stays aligned with the layers (a commit or build on this image appends to it).
 */
export function recoverLayerBlobs(content: ContentStore, record: ImageRecord, config: ImageConfig, manifestDigests: string[], known: Map<string, Descriptor>): Descriptor[] {
  const diffIds = config.rootfs?.diff_ids ?? [];
  for (const d of manifestDigests) {
    let m = parseManifest(intactBlob(content, d));
    if (m?.manifests) m = m.manifests.map((c) => parseManifest(typeof c.digest === 'string' ? intactBlob(content, c.digest) : undefined)).find((c) => c?.config?.digest === record.id);
    if (m?.config?.digest === record.id && Array.isArray(m.layers) && m.layers.length === diffIds.length) return m.layers as Descriptor[];
  }
  const out: Descriptor[] = [];
  for (const diffId of diffIds) {
    const other = known.get(diffId);
    if (other) {
      out.push(other);
      continue;
    }
    let size = -1;
    try {
      size = statSync(content.path(diffId)).size;
    } catch {
      // found nowhere
    }
    out.push({ mediaType: MediaType.ociLayer, digest: diffId, size });
  }
  return out;
}
