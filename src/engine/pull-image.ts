/**
 * A pull: resolve the reference to one platform's manifest, then fetch every missing layer (three at
 * a time), unpacking each while it downloads, and record the image in one transaction at the end.
 * Layer directories appear atomically and are keyed by chainID, so a pull killed at any point leaves
 * either nothing visible or reusable layers, and pulling again finishes the job.
 */
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { invalidArgument } from '../lib/errors.js';
import { sha256Of, hexOf, type Digest } from '../lib/digest.js';
import type { Descriptor, ImageConfig, Platform } from '../lib/oci.js';
import type { RegistryClient, ResolvedImage } from '../registry/registry-client.js';
import type { AuthConfig } from '../registry/auth-config.js';
import { familiarString, fullName, type Reference } from '../registry/reference.js';
import { chainIds as computeChainIds } from '../images/layer-store.js';
import { decompressLayer } from '../images/decompress.js';
import type { ImageService } from './images.js';
import type { LayerRecord } from '../state/image-records.js';
import { ProgressThrottle, type ProgressSink } from './progress.js';
import { refKey } from './image-lookup.js';

const MAX_CONCURRENT_DOWNLOADS = 3;

export interface PullRequest {
  ref: Reference;
  auth?: AuthConfig;
  platform?: Platform;
  signal?: AbortSignal;
  /** The client's `X-Meta-*` headers, passed on to the registry. */
  headers?: Record<string, string>;
}

export interface PullResult {
  imageId: string;
  upToDate: boolean;
}

export async function pullImage(registry: RegistryClient, images: ImageService, req: PullRequest, progress: ProgressSink): Promise<PullResult> {
  const { ref, signal } = req;
  const resolved = await registry.resolve(ref, { auth: req.auth, platform: req.platform, signal, headers: req.headers });
  progress({ status: `Pulling from ${ref.path}`, id: ref.digest ?? ref.tag ?? 'latest' });

  const configBytes = resolved.config;
  const imageId = sha256Of(configBytes);
  const config = JSON.parse(configBytes.toString('utf8')) as ImageConfig;
  const diffIds = config.rootfs?.diff_ids ?? [];
  const layerDescs = resolved.manifest.layers;
  if (diffIds.length !== layerDescs.length) {
    throw invalidArgument(`image config for ${familiarString(ref)} lists ${diffIds.length} layers but the manifest has ${layerDescs.length}`);
  }
  const chain = computeChainIds(diffIds);
  const release = await images.leaseLayers(chain);
  try {
    return await pullLayersAndRecord(registry, images, req, resolved, { imageId, config, configBytes, diffIds, chain }, progress);
  } catch (err) {
    // Nothing of a failed pull stays: the layers it unpacked go unless something else uses them.
    await images.discardUnrecordedLayers(chain);
    throw err;
  } finally {
    release();
  }
}

interface ImageParts {
  imageId: Digest;
  config: ImageConfig;
  configBytes: Buffer;
  diffIds: Digest[];
  chain: Digest[];
}

async function pullLayersAndRecord(
  registry: RegistryClient,
  images: ImageService,
  req: PullRequest,
  resolved: ResolvedImage,
  parts: ImageParts,
  progress: ProgressSink,
): Promise<PullResult> {
  const { ref, signal } = req;
  const { imageId, config, configBytes, diffIds, chain } = parts;
  const layerDescs = resolved.manifest.layers;
  const key = refKey(ref);
  const existing = images.records.getImage(imageId);
  const upToDate = existing !== undefined && images.records.getRef(key)?.imageId === imageId;

  const sizes = new Map<string, number>();
  if (!existing) {
    const todo: number[] = [];
    for (let i = 0; i < layerDescs.length; i++) {
      const have = images.records.getLayer(chain[i]!);
      if (have && (await images.layers.has(chain[i]!))) {
        sizes.set(chain[i]!, have.size);
        progress({ status: 'Already exists', progressDetail: {}, id: shortId(layerDescs[i]!.digest) });
      } else {
        todo.push(i);
      }
    }
    for (const i of todo) progress({ status: 'Pulling fs layer', progressDetail: {}, id: shortId(layerDescs[i]!.digest) });
    for (const i of todo.slice(MAX_CONCURRENT_DOWNLOADS)) progress({ status: 'Waiting', progressDetail: {}, id: shortId(layerDescs[i]!.digest) });

    const abort = new AbortController();
    const onOuterAbort = () => abort.abort(signal?.reason);
    signal?.addEventListener('abort', onOuterAbort, { once: true });
    try {
      await runLimited(
        todo,
        MAX_CONCURRENT_DOWNLOADS,
        async (i) => {
          const size = await fetchLayer(registry, images, resolved, layerDescs[i]!, chain[i]!, diffIds[i]!, progress, abort.signal);
          sizes.set(chain[i]!, size);
        },
        (err) => abort.abort(err),
      );
    } finally {
      signal?.removeEventListener('abort', onOuterAbort);
    }
  }

  // Files first (content-addressed, safe to write twice), then the rows that refer to them.
  await images.content.writeBuffer(configBytes);
  await images.content.writeBuffer(resolved.manifestBytes);
  if (resolved.index) await images.content.writeBuffer(resolved.index.bytes);

  const layers: LayerRecord[] = chain.map((chainId, i) => ({
    chainId,
    diffId: diffIds[i]!,
    parent: i === 0 ? null : chain[i - 1]!,
    size: sizes.get(chainId) ?? images.records.getLayer(chainId)?.size ?? 0,
  }));
  const refs: { ref: string; kind: 'tag' | 'digest' }[] = [{ ref: `${fullName(ref)}@${resolved.rootDigest}`, kind: 'digest' }];
  if (!ref.digest) refs.push({ ref: key, kind: 'tag' });
  images.records.saveImage(
    {
      id: imageId,
      config: configBytes.toString('utf8'),
      chainIds: chain,
      layerBlobs: layerDescs,
      parent: '',
      size: layers.reduce((n, l) => n + l.size, 0),
      created: config.created ?? new Date(0).toISOString(),
      addedAt: Date.now(),
    },
    existing ? [] : layers,
    refs,
  );

  progress({ status: `Digest: ${resolved.rootDigest}` });
  progress({ status: `Status: ${upToDate ? 'Image is up to date' : 'Downloaded newer image'} for ${familiarString(ref)}` });
  images.events.publish('image', 'pull', familiarString(ref), { name: familiarString(ref) });
  return { imageId, upToDate };
}

async function fetchLayer(
  registry: RegistryClient,
  images: ImageService,
  resolved: ResolvedImage,
  desc: Descriptor,
  chainId: Digest,
  diffId: Digest,
  progress: ProgressSink,
  signal: AbortSignal,
): Promise<number> {
  const id = shortId(desc.digest);
  const blob = (await registry.openBlob(resolved, desc, signal)) as Readable;
  const downloading = new ProgressThrottle(progress, id, 'Downloading', desc.size);
  let received = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      received += chunk.length;
      downloading.update(received);
      cb(null, chunk);
    },
    flush(cb) {
      downloading.update(received, true);
      progress({ status: 'Verifying Checksum', progressDetail: {}, id });
      progress({ status: 'Download complete', progressDetail: {}, id });
      cb();
    },
  });
  // Download, decompression and unpacking run as one stream: extraction overlaps the download.
  blob.once('error', (err) => counter.destroy(err));
  const downloaded = new Promise<void>((resolve, reject) => {
    counter.once('error', reject);
    counter.once('end', resolve);
    // Torn down from downstream (the unpack gave up): no 'end' will come.
    counter.once('close', () => reject(new Error('layer download interrupted')));
    blob.once('error', reject);
  });
  blob.pipe(counter);
  const tar = decompressLayer(desc.mediaType, counter);
  // The unpacker starts listening only after some async set-up; a failure before that (a short
  // layer failing its digest) must reach it through the stream's state, not crash the daemon.
  tar.on('error', () => {});
  const onAbort = () => blob.destroy(signal.reason instanceof Error ? signal.reason : new Error('pull cancelled'));
  signal.addEventListener('abort', onAbort, { once: true });
  let result: { size: number };
  try {
    // Both must settle: the unpack removes its temp dir before it reports, and the caller cleans
    // up after this returns. The download's error (a digest mismatch) says more than the unpack's.
    const [dl, unpacked] = await Promise.allSettled([downloaded, images.layers.unpack(chainId, diffId, tar)]);
    if (dl.status === 'rejected' && unpacked.status === 'rejected') throw preferred(dl.reason, unpacked.reason);
    if (unpacked.status === 'rejected') throw unpacked.reason;
    if (dl.status === 'rejected') throw dl.reason;
    result = unpacked.value;
  } catch (err) {
    blob.destroy();
    throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  progress({ status: 'Extracting', progressDetail: { current: desc.size, total: desc.size }, id });
  progress({ status: 'Pull complete', progressDetail: {}, id });
  return result.size;
}

function shortId(d: string): string {
  return hexOf(d as Digest).slice(0, 12);
}

/**
 * Runs fn over items with at most `limit` in flight. After the first failure `onFailure` runs (to
 * cancel the others) and no new item starts; it rejects with that failure once every item in flight
 * has settled, so nothing is still writing when the caller cleans up.
 */
async function runLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>, onFailure: (err: unknown) => void): Promise<void> {
  let next = 0;
  let failed: { err: unknown } | undefined;
  const worker = async () => {
    while (next < items.length && failed === undefined) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        if (failed === undefined) {
          failed = { err };
          onFailure(err);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failed) throw failed.err;
}

/** Of two failures, the one that names the cause: not a cancellation or an interruption. */
function preferred(download: unknown, unpack: unknown): unknown {
  const msg = (e: unknown) => (e instanceof Error ? e.message : String(e));
  return /interrupted|cancel|abort|premature/i.test(msg(download)) && !/interrupted|cancel|abort|premature/i.test(msg(unpack)) ? unpack : download;
}
