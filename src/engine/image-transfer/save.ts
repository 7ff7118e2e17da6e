/**
 * `docker save`: one tar holding the images as dockerd 25+ writes them: an OCI image layout
 * (`oci-layout`, `index.json`, `blobs/sha256/` with each config, an OCI manifest per image and each
 * layer's uncompressed tar named by its diff id, shared layers once) plus the Docker archive's
 * `manifest.json` and `repositories`. Streamed: each layer tar is read from the blob kept for it
 * (decompressed on the way, its size checked) straight into the archive.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import { Readable } from 'node:stream';
import { decompressLayer } from '../../images/decompress.js';
import { END_OF_ARCHIVE, encodeEntryHeader, padding } from '../../images/tar-format.js';
import { BerthError, invalidArgument } from '../../lib/errors.js';
import { hexOf, type Digest } from '../../lib/digest.js';
import { MediaType, type Descriptor } from '../../lib/oci.js';
import { familiarName, familiarString, fullString, tryParseReference, type Reference } from '../../registry/reference.js';
import type { ImageRecord } from '../../state/image-records.js';
import { lookupImage } from '../images/image-lookup.js';
import type { ImageService } from '../images/image-service.js';
import { layerBlobsOf, type LayerBlob } from './layer-blobs.js';

interface SavedImage {
  image: ImageRecord;
  refs: Reference[];
}

/** A layer tar in the archive: where its bytes come from and its exact size. */
interface LayerSource {
  diffId: Digest;
  size: number;
  open: () => Readable;
  compressed: boolean;
}

const READ_CHUNK = 1024 * 1024;
const GZIP_TYPES = new Set<string>([MediaType.dockerLayerGzip, MediaType.ociLayerGzip]);

/**
 * Resolves the names (as dockerd: a tag, a repository meaning all its tags, or an id) and
 * prepares every layer, so errors come before the first byte; then returns the archive stream.
 */
export async function saveImages(images: ImageService, names: string[]): Promise<Readable> {
  if (names.length === 0) throw invalidArgument('no images specified');
  const selected = new Map<string, SavedImage>();
  for (const name of names) {
    for (const { image, ref } of resolve(images, name)) {
      let e = selected.get(image.id);
      if (!e) selected.set(image.id, (e = { image, refs: [] }));
      if (ref && !e.refs.some((r) => fullString(r) === fullString(ref))) e.refs.push(ref);
    }
  }
  const layers = new Map<string, LayerSource>();
  const perImage = new Map<string, LayerBlob[]>();
  for (const { image } of selected.values()) {
    const blobs = await layerBlobsOf(images, image, { compressed: false });
    perImage.set(image.id, blobs);
    for (const b of blobs) if (!layers.has(b.diffId)) layers.set(b.diffId, await layerSource(b));
  }
  const archive = Readable.from(archiveChunks([...selected.values()], perImage, layers), { objectMode: false, highWaterMark: 1024 * 1024 });
  for (const { image } of selected.values()) images.events.publish('image', 'save', image.id, { name: image.id });
  return archive;
}

function resolve(images: ImageService, name: string): { image: ImageRecord; ref?: Reference }[] {
  const found = lookupImage(images.records, name);
  const parsed = tryParseReference(name, { defaultTag: false });
  // A repository named without a tag stands for all its tags.
  if (parsed && !parsed.tag && !parsed.digest && found.ref) {
    const repo = familiarName(parsed);
    const out: { image: ImageRecord; ref?: Reference }[] = [];
    for (const r of images.records.allRefs()) {
      const ref = r.kind === 'tag' ? tryParseReference(r.ref, { defaultTag: false }) : undefined;
      const image = ref && familiarName(ref) === repo ? images.records.getImage(r.imageId) : undefined;
      if (image && ref) out.push({ image, ref });
    }
    if (out.length > 0) return out;
  }
  if (found.ref && !found.ref.digest) return [{ image: found.image, ref: found.ref }];
  return [{ image: found.image }];
}

/** The uncompressed tar of a layer: the stored blob as it is, or decompressed (size known first). */
async function layerSource(b: LayerBlob): Promise<LayerSource> {
  // Large reads: a 64 KiB chunk at a time, the thread pool round trips and the per-chunk stream work
  // (this generator, the response) cost more than the copying.
  if (b.desc.digest === b.diffId) return { diffId: b.diffId, size: b.desc.size, open: () => createReadStream(b.path, { highWaterMark: READ_CHUNK }), compressed: false };
  const open = () => decompressLayer(b.desc.mediaType, createReadStream(b.path, { highWaterMark: READ_CHUNK }));
  let size = GZIP_TYPES.has(b.desc.mediaType) ? await gzipIsize(b.path) : undefined;
  if (size === undefined) {
    size = 0;
    for await (const chunk of open() as AsyncIterable<Buffer>) size += chunk.length;
  }
  return { diffId: b.diffId, size, open, compressed: true };
}

/** The uncompressed size a single-member gzip file records in its last four bytes. */
async function gzipIsize(path: string): Promise<number | undefined> {
  const fh = await fs.open(path, 'r');
  try {
    const { size } = await fh.stat();
    if (size < 18) return undefined;
    const buf = Buffer.alloc(4);
    await fh.read(buf, 0, 4, size - 4);
    return buf.readUInt32LE(0);
  } finally {
    await fh.close();
  }
}

/** The archive's bytes: tar headers from tar-format.ts, blobs in digest order, then the layout files. */
async function* archiveChunks(saved: SavedImage[], perImage: Map<string, LayerBlob[]>, layers: Map<string, LayerSource>): AsyncGenerator<Buffer> {
  const blobs = new Map<string, { size: number; data?: Buffer; layer?: LayerSource }>();
  const manifestJson: Record<string, unknown>[] = [];
  const index: Descriptor[] = [];
  const repositories: Record<string, Record<string, string>> = {};
  for (const { image, refs } of saved) {
    const diffIds = perImage.get(image.id)!.map((b) => b.diffId);
    const config = Buffer.from(image.config);
    blobs.set(image.id, { size: config.length, data: config });
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MediaType.ociManifest,
        config: { mediaType: MediaType.ociConfig, digest: image.id, size: config.length },
        layers: diffIds.map((d) => ({ mediaType: MediaType.ociLayer, digest: d, size: layers.get(d)!.size })),
      }),
    );
    const manifestDigest = sha(manifest);
    blobs.set(manifestDigest, { size: manifest.length, data: manifest });
    for (const d of diffIds) blobs.set(d, { size: layers.get(d)!.size, layer: layers.get(d)! });
    const desc: Descriptor = { mediaType: MediaType.ociManifest, digest: manifestDigest, size: manifest.length };
    for (const ref of refs) {
      index.push({ ...desc, annotations: { 'io.containerd.image.name': fullString(ref), 'org.opencontainers.image.ref.name': ref.tag ?? 'latest' } });
      (repositories[familiarName(ref)] ??= {})[ref.tag ?? 'latest'] = hexOf(diffIds[diffIds.length - 1] ?? (image.id as Digest));
    }
    if (refs.length === 0) index.push(desc);
    const item: Record<string, unknown> = {
      Config: `blobs/sha256/${hexOf(image.id as Digest)}`,
      RepoTags: refs.map((r) => familiarString(r)),
      Layers: diffIds.map((d) => `blobs/sha256/${hexOf(d)}`),
    };
    if (image.parent && saved.some((s) => s.image.id === image.parent)) item.Parent = image.parent;
    manifestJson.push(item);
  }
  yield header('blobs/', 'directory', 0);
  yield header('blobs/sha256/', 'directory', 0);
  for (const key of [...blobs.keys()].sort()) {
    const b = blobs.get(key)!;
    yield header(`blobs/sha256/${hexOf(key as Digest)}`, 'file', b.size);
    if (b.data) yield* withPadding(b.data);
    else yield* layerData(b.layer!);
  }
  yield* file('index.json', Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MediaType.ociIndex, manifests: index })));
  yield* file('manifest.json', Buffer.from(JSON.stringify(manifestJson) + '\n'));
  yield* file('oci-layout', Buffer.from('{"imageLayoutVersion": "1.0.0"}'));
  if (Object.keys(repositories).length > 0) yield* file('repositories', Buffer.from(JSON.stringify(repositories) + '\n'));
  yield END_OF_ARCHIVE;
}

function sha(b: Buffer): Digest {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

function header(name: string, type: 'file' | 'directory', size: number): Buffer {
  return encodeEntryHeader({ name, type, size, mode: type === 'directory' ? 0o755 : 0o644, uid: 0, gid: 0, mtime: 0 });
}

function* withPadding(data: Buffer): Generator<Buffer> {
  yield data;
  const pad = padding(data.length);
  if (pad) yield Buffer.alloc(pad);
}

function* file(name: string, data: Buffer): Generator<Buffer> {
  yield header(name, 'file', data.length);
  yield* withPadding(data);
}

/**
 * A layer tar, exactly `size` bytes. Its digest is not computed again: every stored blob was checked
 * when it came in (a pull's against the manifest, each layer's tar against its diff id).
 */
async function* layerData(src: LayerSource): AsyncGenerator<Buffer> {
  let n = 0;
  const input = src.open();
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      n += chunk.length;
      if (n > src.size) throw mismatch(src);
      yield chunk;
    }
  } finally {
    input.destroy();
  }
  if (n !== src.size) throw mismatch(src);
  const pad = padding(n);
  if (pad) yield Buffer.alloc(pad);
}

function mismatch(src: LayerSource): BerthError {
  return new BerthError('internal', `layer ${src.diffId}: its stored blob does not give the layer's tar`);
}
