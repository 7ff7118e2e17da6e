/**
 * Images in and out of this host: push, save, load, import, the registry's view of an image
 * (`/distribution`) and search. The one facade the image-transfer routes call; reference and
 * registry-auth parsing happen here.
 */
import { invalidArgument } from '../../lib/errors.js';
import { decodeRegistryAuth } from '../../registry/auth-config.js';
import { parseReference, type Reference } from '../../registry/reference.js';
import type { SearchResult } from '../../registry/registry-search.js';
import type { Descriptor, ImageConfig, Platform } from '../../lib/oci.js';
import type { RegistryClient } from '../../registry/registry-client.js';
import type { ImageService } from '../images/image-service.js';
import type { ProgressSink } from '../images/progress.js';
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

  /** GET /distribution/{name}/json: the registry's descriptor of the name and its platforms. */
  async distribution(name: string, registryAuth: string | undefined, signal?: AbortSignal): Promise<{ Descriptor: Descriptor; Platforms: Platform[] }> {
    let ref: Reference;
    try {
      ref = parseReference(name);
    } catch (err) {
      throw invalidArgument((err as Error).message);
    }
    const resolved = await this.registry.resolve(ref, { auth: decodeRegistryAuth(registryAuth), signal });
    if (resolved.index) {
      const index = JSON.parse(resolved.index.bytes.toString('utf8')) as { manifests?: Descriptor[] };
      const platforms = (index.manifests ?? []).map((m) => m.platform).filter((p): p is Platform => p !== undefined);
      return { Descriptor: { mediaType: resolved.index.mediaType, digest: resolved.rootDigest, size: resolved.index.bytes.length }, Platforms: platforms };
    }
    const config = JSON.parse(resolved.config.toString('utf8')) as ImageConfig;
    const platform: Platform = { architecture: config.architecture, os: config.os };
    if (config.variant) platform.variant = config.variant;
    if (typeof config['os.version'] === 'string') platform['os.version'] = config['os.version'];
    return { Descriptor: { mediaType: resolved.manifestMediaType, digest: resolved.rootDigest, size: resolved.manifestBytes.length }, Platforms: [platform] };
  }

  /** GET /images/search: the index's answer, filtered as dockerd filters it. */
  async search(q: SearchQuery): Promise<SearchResult[]> {
    const limit = q.limit === 0 ? 25 : q.limit;
    if (limit < 1 || limit > 100) throw invalidArgument(`limit ${limit} is outside the range of [1, 100]`);
    if (q.isAutomated) return [];
    // For a search, credentials that do not decode are ignored, as dockerd does.
    let auth;
    try {
      auth = decodeRegistryAuth(q.registryAuth);
    } catch {
      auth = undefined;
    }
    const results = await this.registry.search(q.term, limit, auth, q.headers);
    return results
      .filter((r) => (q.isOfficial === undefined || r.is_official === q.isOfficial) && r.star_count >= q.stars)
      .map((r) => ({ ...r, is_automated: false }));
  }

  /** POST /images/load: a Docker archive or OCI layout, plain or compressed. */
  load(body: Readable, opts: { quiet: boolean }, progress: ProgressSink): Promise<void> {
    return loadImages(this.images, body, progress, opts);
  }
}

export interface SearchQuery {
  term: string;
  limit: number;
  isOfficial?: boolean | undefined;
  isAutomated?: boolean | undefined;
  stars: number;
  registryAuth?: string | undefined;
  headers: Record<string, string>;
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
