/**
 * The compressed blob of a stored layer, made once from its unpacked tree: the layer's tar
 * (layer-diff.ts, the same deterministic bytes commit hashed into the diff id; or the layer's tar
 * as a file, when one was kept) gzipped into the
 * content store. The tar is checked against the layer's diff id on the way, so a blob whose tar
 * would not match the image config never gets used. Streamed end to end.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { BerthError } from '../lib/errors.js';
import { MediaType, type Descriptor } from '../lib/oci.js';
import type { Digest } from '../lib/digest.js';
import type { ContentStore } from './content-store.js';
import { diffTar } from './layer-diff.js';
import type { LayerStore } from './layer-store.js';

/**
 * Gzips the tar of layer `chainId` into the content store and returns its descriptor
 * (`application/vnd.oci.image.layer.v1.tar+gzip`, or the Docker type when `docker`). Fails, keeping
 * nothing, when the tree no longer gives the tar `diffId` names.
 */
export async function compressLayer(
  layers: LayerStore,
  content: ContentStore,
  chainId: Digest,
  diffId: Digest,
  opts: { docker?: boolean; tarFile?: string | undefined } = {},
): Promise<Descriptor> {
  const hash = createHash('sha256');
  const hasher = new Transform({
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  // Level 1: most layers are binaries that compress little more at higher levels, and push waits.
  const gzip = zlib.createGzip({ level: 1, chunkSize: 256 * 1024 });
  const tar = opts.tarFile !== undefined ? createReadStream(opts.tarFile, { highWaterMark: 256 * 1024 }) : diffTar(layers.diffDir(chainId));
  const stored = content.ingestComputed(gzip);
  await Promise.all([pipeline(tar, hasher, gzip), stored]);
  const { digest, size } = await stored;
  const actual = `sha256:${hash.digest('hex')}`;
  if (actual !== diffId) {
    await content.delete(digest);
    throw new BerthError('internal', `layer ${diffId} cannot be rebuilt from its stored files (their tar is ${actual})`);
  }
  return { mediaType: opts.docker ? MediaType.dockerLayerGzip : MediaType.ociLayerGzip, digest, size };
}
