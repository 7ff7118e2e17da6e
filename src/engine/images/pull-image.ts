/**
 * A pull: resolve the reference to one platform's manifest, then fetch every missing layer (three at
 * a time), unpacking each while it downloads, and record the image in one transaction at the end.
 * Layer directories appear atomically and are keyed by chainID, so a pull killed at any point leaves
 * either nothing visible or reusable layers, and pulling again finishes the job.
 */
import { invalidArgument } from '../../lib/errors.js';
import { sha256Of, hexOf, type Digest } from '../../lib/digest.js';
import { MediaType, type Descriptor, type ImageConfig, type Platform } from '../../lib/oci.js';
import type { RegistryClient, ResolvedImage } from '../../registry/registry-client.js';
import type { AuthConfig } from '../../registry/auth-config.js';
import { familiarString, fullName, type Reference } from '../../registry/reference.js';
import { chainIds as computeChainIds } from '../../images/layer-store.js';
import type { ImageService } from './image-service.js';
import type { LayerRecord } from '../../state/image-records.js';
import { ProgressThrottle, type ProgressSink } from './progress.js';
import { refKey } from './image-lookup.js';
import { LayerPullPool } from '../../images/pull/layer-pull-pool.js';
import { transferLayer } from '../../images/pull/layer-transfer.js';

const MAX_CONCURRENT_DOWNLOADS = 3;

/** Layers are fetched and unpacked in worker threads, one layer per thread while they suffice. */
const workers = new LayerPullPool(MAX_CONCURRENT_DOWNLOADS);

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
    await images.discardUnrecordedBlobs(layerDescs.map((l) => l.digest));
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
  const downloading = new ProgressThrottle(progress, id, 'Downloading', desc.size);
  const onBytes = (received: number) => downloading.update(received);
  const onDownloaded = () => {
    downloading.update(desc.size, true);
    progress({ status: 'Verifying Checksum', progressDetail: {}, id });
    progress({ status: 'Download complete', progressDetail: {}, id });
  };
  let size: number | undefined;
  const request = await registry.planBlob(resolved, desc, signal);
  if (request) {
    const done = await workers.run({ request, desc, chainId, diffId, store: images.layers.location, content: images.content.root }, { onBytes, onDownloaded }, signal);
    if (done !== 'fallback') size = done.size;
  }
  if (size === undefined) {
    // Foreign layers, and blobs the registry did not simply serve (an expired token, an error
    // to report): the registry client's own request, and the same transfer on this thread.
    const blob = await registry.openBlob(resolved, desc, signal);
    const keep = desc.mediaType === MediaType.dockerForeignLayerGzip ? undefined : images.content.writer(desc.digest, desc.size, { verifiedUpstream: true });
    size = await transferLayer(blob, { mediaType: desc.mediaType, unpack: (tar) => images.layers.unpack(chainId, diffId, tar), onBytes, onDownloaded, signal, keep });
  }
  progress({ status: 'Extracting', progressDetail: { current: desc.size, total: desc.size }, id });
  progress({ status: 'Pull complete', progressDetail: {}, id });
  return size;
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
