/**
 * `docker import`: a root file system tar (plain or compressed, from the request body or a URL)
 * becomes a one-layer image. The tar streams once: into the layer store, which hashes and unpacks
 * it, and into the content store as the layer's blob (save sends it as it is, push compresses it
 * once). The config carries the `changes` (Dockerfile instructions) and the message as dockerd
 * writes them.
 */
import { PassThrough, Readable, Transform, type TransformCallback } from 'node:stream';
import { decompressLayer } from '../../images/decompress.js';
import { BerthError, invalidArgument } from '../../lib/errors.js';
import { sha256Of, type Digest } from '../../lib/digest.js';
import { MediaType, type ImageConfig, type Platform } from '../../lib/oci.js';
import { applyChanges } from '../images/dockerfile-changes.js';
import { parseReference } from '../../registry/reference.js';
import type { ImageService } from '../images/image-service.js';
import { ProgressThrottle, type ProgressSink } from '../images/progress.js';
import { hostPlatform } from '../../lib/platform.js';

export interface ImportRequest {
  /** `-` for the body, else an http(s) URL. */
  source: string;
  body: Readable;
  repo?: string | undefined;
  tag?: string | undefined;
  message?: string | undefined;
  platform?: Platform | undefined;
  changes: string[];
  signal?: AbortSignal | undefined;
}

export async function importImage(images: ImageService, req: ImportRequest, progress: ProgressSink): Promise<string> {
  // Everything the request can get wrong is checked before reading the tar.
  const config = applyChanges({}, req.changes);
  if (req.repo) {
    try {
      const ref = parseReference(req.tag ? `${req.repo}:${req.tag}` : req.repo);
      if (ref.digest) throw new Error('refusing to create a tag with a digest reference');
    } catch (err) {
      throw invalidArgument((err as Error).message);
    }
  }
  const src = req.source === '-' ? req.body : await download(req.source, progress, req.signal);
  const tar = decompressLayer('import', src);
  const toLayer = new PassThrough({ highWaterMark: 256 * 1024 });
  const toBlob = new PassThrough({ highWaterMark: 256 * 1024 });
  tar.on('error', (err) => {
    toLayer.destroy(err);
    toBlob.destroy(err);
  });
  tar.pipe(toLayer);
  tar.pipe(toBlob);
  const [layer, blob] = await Promise.allSettled([images.layers.unpackComputed(undefined, toLayer), images.content.ingestComputed(toBlob)]);
  if (layer.status === 'rejected') {
    if (blob.status === 'fulfilled') await images.content.delete(blob.value.digest);
    throw layer.reason;
  }
  if (blob.status === 'rejected') throw blob.reason;
  const { chainId, diffId, size } = layer.value;
  const platform = req.platform ?? hostPlatform();
  const created = new Date().toISOString();
  const message = req.message || `Imported from ${req.source}`;
  const image: ImageConfig = {
    architecture: platform.architecture,
    ...(platform.variant ? { variant: platform.variant } : {}),
    os: platform.os,
    comment: message,
    config,
    created,
    history: [{ created, comment: message }],
    rootfs: { type: 'layers', diff_ids: [diffId] },
  };
  const configBytes = Buffer.from(JSON.stringify(image));
  const id = sha256Of(configBytes);
  await images.content.writeBuffer(configBytes);
  const blobDesc = { mediaType: MediaType.ociLayer, digest: blob.value.digest as Digest, size: blob.value.size };
  images.records.saveImage(
    { id, config: configBytes.toString('utf8'), chainIds: [chainId], layerBlobs: [blobDesc], parent: '', size, created, addedAt: Date.now() },
    [{ chainId, diffId, parent: null, size }],
    [],
  );
  images.events.publish('image', 'import', id, { name: id });
  if (req.repo) images.tag(id, req.repo, req.tag || undefined);
  progress({ status: id });
  return id;
}

/** The body of an http(s) URL, with `Downloading` progress as dockerd shows it. */
async function download(url: string, progress: ProgressSink, signal?: AbortSignal): Promise<Readable> {
  let u: URL;
  try {
    u = new URL(/^[a-z]+:\/\//i.test(url) ? url : `http://${url}`);
  } catch {
    throw invalidArgument(`invalid URL ${JSON.stringify(url)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw invalidArgument(`unsupported URL scheme ${u.protocol}`);
  const res = await fetch(u, { signal: signal ?? null, redirect: 'follow' });
  if (!res.ok || !res.body) throw new BerthError('internal', `Get "${u.href}": ${res.status} ${res.statusText}`);
  const total = Number(res.headers.get('content-length') ?? 0);
  progress({ status: 'Downloading from', id: u.href });
  const body = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>);
  const bar = new ProgressThrottle(progress, '', 'Importing', total);
  let n = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      n += chunk.length;
      if (total) bar.update(n);
      cb(null, chunk);
    },
  });
  body.once('error', (err) => counter.destroy(err));
  return body.pipe(counter);
}
