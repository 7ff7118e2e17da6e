/**
 * The compressed blob of each layer of an image, as push and save need it: the blob a pull kept
 * (the registry's own bytes), else the one kept for the layer's diff id, else the layer compressed
 * now, once, and kept (images/layer-blob.ts). Commit and build may call keepLayerBlob right after
 * they make a layer, so a push later finds it ready.
 */
import { compressLayer } from '../../images/layer-blob.js';
import type { Digest } from '../../lib/digest.js';
import { MediaType, type Descriptor } from '../../lib/oci.js';
import type { ImageRecord } from '../../state/image-records.js';
import type { ImageService } from '../images/image-service.js';

const COMPRESSED = new Set<string>([MediaType.dockerLayerGzip, MediaType.ociLayerGzip, MediaType.ociLayerZstd, 'application/vnd.docker.image.rootfs.diff.tar.zstd']);

/** A layer blob ready to send: its descriptor (as stored) and where its bytes are. */
export interface LayerBlob {
  desc: Descriptor;
  diffId: Digest;
  chainId: Digest;
  path: string;
}

/**
 * Compresses layer `chainId` once and records the blob under its diff id; returns the blob. The
 * layer's tar is its stored uncompressed blob when there is one (a loaded layer), else its files.
 */
export async function keepLayerBlob(images: ImageService, chainId: Digest, diffId: Digest): Promise<Descriptor> {
  const kept = images.layerBlobs?.get(diffId);
  if (kept && (await images.content.has(kept.digest))) return kept;
  const tar = (await images.content.has(diffId)) ? images.content.path(diffId) : undefined;
  const desc = await compressLayer(images.layers, images.content, chainId, diffId, { tarFile: tar });
  images.layerBlobs?.put(diffId, desc);
  return desc;
}

/**
 * The blobs of every layer of `image`, bottom first; compresses those never compressed here.
 * `compressed: false` (save) also takes a stored uncompressed layer tar as it is.
 */
export async function layerBlobsOf(images: ImageService, image: ImageRecord, opts: { compressed: boolean }): Promise<LayerBlob[]> {
  const diffIds = (images.config(image).rootfs?.diff_ids ?? []) as Digest[];
  const out: LayerBlob[] = [];
  const blobs = images.layerBlobsOf(image);
  for (let i = 0; i < image.chainIds.length; i++) {
    const chainId = image.chainIds[i] as Digest;
    const diffId = diffIds[i]!;
    const pulled = blobs[i];
    let desc: Descriptor | undefined;
    const usable = pulled && (COMPRESSED.has(pulled.mediaType) || (!opts.compressed && pulled.digest === diffId));
    if (usable && (await images.content.size(pulled.digest)) === pulled.size) desc = { mediaType: pulled.mediaType, digest: pulled.digest, size: pulled.size };
    desc ??= await keepLayerBlob(images, chainId, diffId);
    out.push({ desc, diffId, chainId, path: images.content.path(desc.digest) });
  }
  return out;
}
