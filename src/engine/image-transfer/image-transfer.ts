/**
 * Images in and out of this host: push, save, load, import, the registry's view of an image
 * (`/distribution`) and search. The one facade the image-transfer routes call; reference and
 * registry-auth parsing happen here.
 */
import { invalidArgument } from '../../lib/errors.js';
import { decodeRegistryAuth } from '../../registry/auth-config.js';
import { parseReference, type Reference } from '../../registry/reference.js';
import type { RegistryClient } from '../../registry/registry-client.js';
import type { ImageService } from '../images.js';
import type { ProgressSink } from '../progress.js';
import { pushImage } from './push.js';
import { saveImages } from './save.js';
import { loadImages } from './load.js';
import { importImage, type ImportRequest } from './import.js';
import type { Readable } from 'node:stream';

export class ImageTransfer {
  constructor(
    readonly images: ImageService,
    readonly registry: RegistryClient,
  ) {}

  /**
   * POST /images/{name}/push: `tag` names the one tag to push; without it (and without a tag in
   * `name`) every tag of the repository goes, as with dockerd.
   */
  push(name: string, opts: { tag?: string | undefined; registryAuth?: string | undefined; signal?: AbortSignal }, progress: ProgressSink): Promise<void> {
    const ref = parsePushTarget(name, opts.tag);
    return pushImage(this.registry, this.images, { ref: ref.ref, allTags: ref.allTags, auth: decodeRegistryAuth(opts.registryAuth), signal: opts.signal }, progress);
  }

  /** GET /images/{name}/get and /images/get?names=: one archive of all the images named. */
  save(names: string[]): Promise<Readable> {
    return saveImages(this.images, names);
  }

  /** POST /images/create?fromSrc=: a root file system tar as a one-layer image; returns its id. */
  import(req: ImportRequest, progress: ProgressSink): Promise<string> {
    return importImage(this.images, req, progress);
  }

  /** POST /images/load: a Docker archive or OCI layout, plain or compressed. */
  load(body: Readable, opts: { quiet: boolean }, progress: ProgressSink): Promise<void> {
    return loadImages(this.images, body, progress, opts);
  }
}

function parsePushTarget(name: string, tag: string | undefined): { ref: Reference; allTags: boolean } {
  let base: Reference;
  try {
    base = parseReference(name, { defaultTag: false });
  } catch (err) {
    throw invalidArgument((err as Error).message);
  }
  if (base.digest) throw invalidArgument('cannot push a digest reference');
  const t = tag || base.tag;
  if (t !== undefined && !/^[\w][\w.-]{0,127}$/.test(t)) throw invalidArgument(`invalid tag format`);
  return { ref: { ...base, tag: t }, allTags: t === undefined };
}
