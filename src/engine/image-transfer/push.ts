/**
 * `docker push`: each tag of the repository (or the one asked for) goes up as its layer blobs,
 * its config and a manifest. Blobs the registry has are skipped (HEAD), blobs of a repository the
 * image came from on the same registry are mounted, the rest uploaded from disk. A pulled image
 * goes up with the manifest it came with, so its digest does not change.
 */
import { createReadStream } from 'node:fs';
import { notFound } from '../../lib/errors.js';
import { hexOf, type Digest } from '../../lib/digest.js';
import { MediaType, type Descriptor } from '../../lib/oci.js';
import type { AuthConfig } from '../../registry/auth-config.js';
import { fullName, tryParseReference, type Reference } from '../../registry/reference.js';
import type { RegistryClient } from '../../registry/registry-client.js';
import type { PushSession } from '../../registry/registry-push.js';
import type { ImageRecord } from '../../state/image-records.js';
import { refKey } from '../images/image-lookup.js';
import type { ImageService } from '../images/image-service.js';
import { ProgressThrottle, type ProgressSink } from '../images/progress.js';
import { layerBlobsOf, type LayerBlob } from './layer-blobs.js';

// dockerd's default max-concurrent-uploads: the same layers show `Waiting`.
const MAX_CONCURRENT_UPLOADS = 5;

export interface PushRequest {
  ref: Reference;
  /** Push every tag of the repository. */
  allTags: boolean;
  auth?: AuthConfig | undefined;
  signal?: AbortSignal | undefined;
}

export async function pushImage(registry: RegistryClient, images: ImageService, req: PushRequest, progress: ProgressSink): Promise<void> {
  const repo = fullName(req.ref);
  // As dockerd: the repository line first, then what is missing (in the stream).
  progress({ status: `The push refers to repository [${repo}]` });
  const tags = tagsToPush(images, { ...req, allTags: true });
  if (tags.length === 0) throw notFound(`An image does not exist locally with the tag: ${familiarRepo(req.ref)}`);
  if (!req.allTags) {
    const wanted = req.ref.tag ?? 'latest';
    tags.splice(0, tags.length, ...tags.filter((t) => t.tag === wanted));
    if (tags.length === 0) throw notFound(`tag does not exist: ${familiarRepo(req.ref)}:${wanted}`);
  }
  const mountFrom = mountSources(images, tags.map((t) => t.image), req.ref);
  const session = await registry.openPush(req.ref, { auth: req.auth, mountFrom, signal: req.signal });
  const pushed = new Map<string, Promise<void>>();
  for (const { tag, image } of tags) {
    const blobs = await layerBlobsOf(images, image, { compressed: true });
    await pushLayers(session, blobs, mountFrom, pushed, progress, req.signal);
    const config = { mediaType: MediaType.dockerConfig, digest: image.id as Digest, size: Buffer.byteLength(image.config) };
    if (!(await images.content.has(config.digest))) await images.content.writeBuffer(image.config);
    if (!(await session.exists(config, req.signal))) await session.upload(config, (o) => createReadStream(images.content.path(config.digest), { start: o }), () => {}, req.signal);
    const manifest = await manifestFor(images, image, blobs, config);
    const digest = await session.putManifest(tag, manifest.bytes, manifest.mediaType, req.signal);
    await images.content.writeBuffer(manifest.bytes);
    images.records.putRef(`${repo}@${digest}`, image.id, 'digest');
    progress({ status: `${tag}: digest: ${digest} size: ${manifest.bytes.length}` });
    progress({ progressDetail: {}, aux: { Tag: tag, Digest: digest, Size: manifest.bytes.length } });
    images.events.publish('image', 'push', `${familiarRepo(req.ref)}:${tag}`, { name: `${familiarRepo(req.ref)}:${tag}` });
  }
}

function familiarRepo(ref: Reference): string {
  const k = refKey({ ...ref, tag: undefined, digest: undefined });
  const r = tryParseReference(k, { defaultTag: false });
  return r ? fullName(r).replace(/^docker\.io\/(library\/)?/, '') : k;
}

function tagsToPush(images: ImageService, req: PushRequest): { tag: string; image: ImageRecord }[] {
  const repo = fullName(req.ref);
  const out: { tag: string; image: ImageRecord }[] = [];
  for (const r of images.records.allRefs()) {
    if (r.kind !== 'tag') continue;
    const ref = tryParseReference(r.ref, { defaultTag: false });
    if (!ref || fullName(ref) !== repo || !ref.tag) continue;
    if (!req.allTags && ref.tag !== (req.ref.tag ?? 'latest')) continue;
    const image = images.records.getImage(r.imageId);
    if (image) out.push({ tag: ref.tag, image });
  }
  return out.sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
}

/** Other repositories of the same registry the images were pulled from or pushed to. */
function mountSources(images: ImageService, list: ImageRecord[], target: Reference): string[] {
  const out = new Set<string>();
  for (const image of list) {
    for (const r of images.records.refsOf(image.id)) {
      const ref = tryParseReference(r.ref, { defaultTag: false });
      if (ref && ref.domain === target.domain && ref.path !== target.path) out.add(ref.path);
    }
  }
  return [...out];
}

async function pushLayers(session: PushSession, blobs: LayerBlob[], mountFrom: string[], pushed: Map<string, Promise<void>>, progress: ProgressSink, signal?: AbortSignal): Promise<void> {
  // dockerd lists the top layer first.
  const todo = [...blobs].reverse();
  const ids = todo.map((b) => hexOf(b.diffId).slice(0, 12));
  for (const id of ids) progress({ status: 'Preparing', progressDetail: {}, id });
  for (const id of ids.slice(MAX_CONCURRENT_UPLOADS)) progress({ status: 'Waiting', progressDetail: {}, id });
  let next = 0;
  let failed: unknown;
  const worker = async () => {
    while (next < todo.length && failed === undefined) {
      const i = next++;
      const b = todo[i]!;
      const id = ids[i]!;
      let p = pushed.get(b.desc.digest);
      if (!p) {
        p = pushBlob(session, b, id, mountFrom, progress, signal);
        pushed.set(b.desc.digest, p);
      } else {
        p = p.then(() => progress({ status: 'Layer already exists', progressDetail: {}, id }));
      }
      try {
        await p;
      } catch (err) {
        failed ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(MAX_CONCURRENT_UPLOADS, todo.length) }, worker));
  if (failed !== undefined) throw failed;
}

async function pushBlob(session: PushSession, b: LayerBlob, id: string, mountFrom: string[], progress: ProgressSink, signal?: AbortSignal): Promise<void> {
  if (await session.exists(b.desc, signal)) {
    progress({ status: 'Layer already exists', progressDetail: {}, id });
    return;
  }
  for (const from of mountFrom) {
    if (await session.mount(b.desc, from, signal)) {
      progress({ status: `Mounted from ${from}`, progressDetail: {}, id });
      return;
    }
  }
  const bar = new ProgressThrottle(progress, id, 'Pushing', b.desc.size);
  await session.upload(b.desc, (offset) => createReadStream(b.path, { start: offset, highWaterMark: 256 * 1024 }), (sent) => bar.update(sent), signal);
  bar.update(b.desc.size, true);
  progress({ status: 'Pushed', progressDetail: {}, id });
}

const GZIP = new Set<string>([MediaType.dockerLayerGzip, MediaType.ociLayerGzip]);

/**
 * The manifest a pull stored for this image when its layers are the ones being pushed (the same
 * bytes, so the same digest), else a new one: Docker schema 2 when every layer is gzip, OCI otherwise.
 */
async function manifestFor(images: ImageService, image: ImageRecord, blobs: LayerBlob[], config: Descriptor): Promise<{ bytes: Buffer; mediaType: string }> {
  const want = blobs.map((b) => b.desc.digest).join(',');
  const matches = (doc: ManifestDoc) => doc.config?.digest === image.id && (doc.layers ?? []).map((l) => l.digest).join(',') === want;
  for (const r of images.records.refsOf(image.id)) {
    if (r.kind !== 'digest') continue;
    const d = r.ref.slice(r.ref.lastIndexOf('@') + 1) as Digest;
    const top = await readDoc(images, d);
    if (!top) continue;
    if (top.doc.layers && matches(top.doc)) return { bytes: top.bytes, mediaType: top.doc.mediaType ?? MediaType.ociManifest };
    for (const entry of top.doc.manifests ?? []) {
      const child = await readDoc(images, entry.digest);
      if (child && matches(child.doc)) return { bytes: child.bytes, mediaType: child.doc.mediaType ?? entry.mediaType };
    }
  }
  const docker = blobs.every((b) => GZIP.has(b.desc.mediaType));
  const layerType = (t: string) => (docker ? MediaType.dockerLayerGzip : t === MediaType.dockerLayerGzip ? MediaType.ociLayerGzip : t);
  const manifest = {
    schemaVersion: 2,
    mediaType: docker ? MediaType.dockerManifest : MediaType.ociManifest,
    config: { mediaType: docker ? MediaType.dockerConfig : MediaType.ociConfig, size: config.size, digest: config.digest },
    layers: blobs.map((b) => ({ mediaType: layerType(b.desc.mediaType), size: b.desc.size, digest: b.desc.digest })),
  };
  return { bytes: Buffer.from(JSON.stringify(manifest, null, 3)), mediaType: manifest.mediaType };
}

interface ManifestDoc {
  mediaType?: string;
  config?: Descriptor;
  layers?: Descriptor[];
  manifests?: Descriptor[];
}

async function readDoc(images: ImageService, d: Digest): Promise<{ bytes: Buffer; doc: ManifestDoc } | undefined> {
  if (!(await images.content.has(d))) return undefined;
  const bytes = await images.content.readBuffer(d);
  try {
    return { bytes, doc: JSON.parse(bytes.toString('utf8')) as ManifestDoc };
  } catch {
    return undefined;
  }
}
