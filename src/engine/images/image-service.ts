/**
 * The images aggregate's facade: list, inspect, history, tag, remove, prune on the local store,
 * and pulls (pull-image.ts does the work; names, auth headers and platforms are parsed here, not
 * in routes). Records are in state/, files in images/.
 */
import { conflict, internal, invalidArgument } from '../../lib/errors.js';
import type { ImageConfig } from '../../lib/oci.js';
import type { ImageRecord, ImageRecords, RefRecord } from '../../state/image-records.js';
import type { LayerStore } from '../../images/layer-store.js';
import type { ContentStore } from '../../images/content-store.js';
import { familiarString, fullName, parseReference, tryParseReference, type Reference } from '../../registry/reference.js';
import { lookupImage, tryLookupImage, refKey, displayName } from './image-lookup.js';
import type { RegistryClient } from '../../registry/registry-client.js';
import { decodeRegistryAuth, type AuthConfig } from '../../registry/auth-config.js';
import { parsePlatform } from '../../lib/platform.js';
import type { Descriptor, Platform } from '../../lib/oci.js';
import { isDigest } from '../../lib/digest.js';
import { pullImage, type PullResult } from './pull-image.js';
import type { ProgressSink } from './progress.js';
import type { EventBus } from '../events.js';
import type { LayerBlobRecords } from '../../state/layer-blob-records.js';
import { log } from '../../lib/log.js';
import { placeholderConfig, readImageConfig, recoverLayerBlobs, type ConfigRead } from './image-record-repair.js';
import { open } from 'node:fs/promises';
import type { DeleteResponseItem } from '../../lib/docker-api-types.js';

export interface ImageUsage {
  running: string[];
  stopped: string[];
}

/** Who uses an image (the container service answers). */
export type ImageUsageProbe = (imageId: string) => ImageUsage;

export interface ImageServiceDeps {
  records: ImageRecords;
  layers: LayerStore;
  content: ContentStore;
  events: EventBus;
  registry: RegistryClient;
  usage: ImageUsageProbe;
  /** Compressed blobs kept for layers Berth made (push, save). */
  layerBlobs?: LayerBlobRecords;
}

export interface PullOptions {
  auth?: AuthConfig;
  platform?: Platform;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

/** POST /images/create?fromImage=: the name as given, a tag or digest overriding its own, the auth header as sent. */
export interface NamedPull {
  fromImage: string;
  tag?: string;
  /** `os[/arch[/variant]]` as sent. */
  platform?: string;
  registryAuth?: string;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

export interface ImageView {
  record: ImageRecord;
  config: ImageConfig;
  repoTags: string[];
  repoDigests: string[];
}

export type { DeleteResponseItem };

export class ImageService {
  readonly records: ImageRecords;
  readonly layers: LayerStore;
  readonly content: ContentStore;
  readonly events: EventBus;
  readonly registry: RegistryClient;
  readonly usage: ImageUsageProbe;
  readonly layerBlobs?: LayerBlobRecords;
  readonly #configCache = new Map<string, ImageConfig>();
  /** Damaged records already reported in the log (once per image and daemon). */
  readonly #reported = new Set<string>();
  /** Layers an unfinished pull relies on (chainID → number of pulls): never removed under it. */
  readonly #leases = new Map<string, number>();
  /** Layer removals in flight; a new lease waits for them so it never sees a half-removed layer. */
  readonly #removing = new Map<string, Promise<void>>();

  constructor(deps: ImageServiceDeps) {
    this.records = deps.records;
    this.layers = deps.layers;
    this.content = deps.content;
    this.events = deps.events;
    this.registry = deps.registry;
    this.usage = deps.usage;
    this.layerBlobs = deps.layerBlobs;
  }

  get(nameOrId: string): ImageView {
    return this.view(lookupImage(this.records, nameOrId).image);
  }

  /** The id of the image a name or id refers to, if any. */
  idOf(nameOrId: string): string | undefined {
    return tryLookupImage(this.records, nameOrId)?.image.id;
  }

  count(): number {
    return this.records.listImages().length;
  }

  /** The unpacked layers' dirs of an image (its record, or its id), base layer first; [] for an image that is gone. */
  layerDirs(image: ImageRecord | string): string[] {
    const record = typeof image === 'string' ? this.records.getImage(image) : image;
    return record ? record.chainIds.map((id) => this.layers.diffDir(id as `sha256:${string}`)) : [];
  }

  pull(ref: Reference, opts: PullOptions, progress: ProgressSink): Promise<PullResult> {
    return pullImage(this.registry, this, { ref, ...opts }, progress);
  }

  /** A pull by the name a client sent: reference, tag and auth header parsed here. */
  pullNamed(req: NamedPull, progress: ProgressSink): Promise<PullResult> {
    let fromImage = req.fromImage;
    if (fromImage.endsWith(':')) fromImage = fromImage.slice(0, -1);
    let name = fromImage;
    if (req.tag) {
      // `tag` overrides any tag in fromImage, and may be a digest.
      const base = parseReference(fromImage, { defaultTag: false });
      const bare = familiarString({ domain: base.domain, path: base.path });
      name = isDigest(req.tag) ? `${bare}@${req.tag}` : `${bare}:${req.tag}`;
    }
    const ref = parseReference(name);
    const platform = parsePlatform(req.platform);
    const auth = decodeRegistryAuth(req.registryAuth);
    return this.pull(ref, { auth, platform, signal: req.signal, headers: req.headers }, progress);
  }

  view(record: ImageRecord): ImageView {
    const repoTags: string[] = [];
    const repoDigests: string[] = [];
    for (const r of this.records.refsOf(record.id)) {
      const ref = tryParseReference(r.ref, { defaultTag: false });
      if (!ref) continue;
      (r.kind === 'tag' ? repoTags : repoDigests).push(familiarString(ref));
    }
    return { record, config: this.config(record), repoTags, repoDigests };
  }

  /** The image's config; an image whose config is lost throws a 500 naming it (image-record-repair.ts). */
  config(record: ImageRecord): ImageConfig {
    const read = this.#readConfig(record);
    if (!read.config) throw internal(read.error);
    return read.config;
  }

  /**
   * The image's layer blobs, bottom first. A record whose list was lost (shorter than its layers) gets
   * it recovered (image-record-repair.ts), so push and save send the blobs a registry knows.
   */
  layerBlobsOf(record: ImageRecord): Descriptor[] {
    if (record.layerBlobs.length >= record.chainIds.length) return record.layerBlobs;
    const config = this.tryConfig(record);
    if (!config) return record.layerBlobs;
    const known = new Map<string, Descriptor>();
    for (const other of this.records.listImages()) {
      const diffIds = other.layerBlobs.length === other.chainIds.length ? this.tryConfig(other)?.rootfs?.diff_ids : undefined;
      diffIds?.forEach((d, i) => known.set(d, other.layerBlobs[i]!));
    }
    const manifests = this.records.refsOf(record.id).filter((r) => r.kind === 'digest').map((r) => r.ref.slice(r.ref.lastIndexOf('@') + 1));
    return recoverLayerBlobs(this.content, record, config, manifests, known);
  }

  /** The config, or undefined when it is lost: for code that goes over every image. */
  tryConfig(record: ImageRecord): ImageConfig | undefined {
    return this.#readConfig(record).config;
  }

  #readConfig(record: ImageRecord): ConfigRead {
    const cached = this.#configCache.get(record.id);
    if (cached) return { config: cached };
    const read = readImageConfig(this.content, record);
    const problem = [record.damaged, read.config ? read.repaired : read.error].filter(Boolean).join('; ');
    if (problem && !this.#reported.has(record.id)) {
      this.#reported.add(record.id);
      log.warn(read.config ? 'stored image record was damaged; repaired' : 'stored image record is damaged beyond repair', { id: record.id, problem });
    }
    if (read.config) this.#configCache.set(record.id, read.config);
    return read;
  }

  list(): ImageView[] {
    const refs = new Map<string, { tags: string[]; digests: string[] }>();
    for (const r of this.records.allRefs()) {
      const ref = tryParseReference(r.ref, { defaultTag: false });
      if (!ref) continue;
      let e = refs.get(r.imageId);
      if (!e) refs.set(r.imageId, (e = { tags: [], digests: [] }));
      (r.kind === 'tag' ? e.tags : e.digests).push(familiarString(ref));
    }
    return this.records.listImages().map((record) => {
      const e = refs.get(record.id);
      // An image whose config is lost still lists (so it can be seen and removed); inspect names the damage.
      return { record, config: this.tryConfig(record) ?? placeholderConfig(record), repoTags: e?.tags ?? [], repoDigests: e?.digests ?? [] };
    });
  }

  /** Image ids that are the local parent of another image (hidden from `docker images` unless all). */
  parentIds(): Set<string> {
    return new Set(this.records.listImages().map((i) => i.parent).filter(Boolean));
  }

  tag(source: string, repo: string, tag: string | undefined): string {
    const image = lookupImage(this.records, source).image;
    let ref: Reference;
    try {
      ref = parseReference(tag ? `${repo}:${tag}` : repo);
    } catch (err) {
      throw invalidArgument((err as Error).message);
    }
    if (ref.digest) throw invalidArgument('refusing to create a tag with a digest reference');
    this.records.putRef(refKey(ref), image.id, 'tag');
    const name = familiarString(ref);
    this.events.publish('image', 'tag', image.id, { name });
    return name;
  }

  /** DELETE /images/{name}: untag, or delete when nothing else names the image (dockerd's rules). */
  async remove(nameOrId: string, opts: { force: boolean; noprune: boolean }): Promise<DeleteResponseItem[]> {
    const { image, ref } = lookupImage(this.records, nameOrId);
    const short = image.id.slice(7, 19);
    const usage = this.usage(image.id);
    const users = [...usage.running, ...usage.stopped];
    const out: DeleteResponseItem[] = [];
    const untag = (key: string) => {
      const rr = tryParseReference(key, { defaultTag: false });
      const name = rr ? familiarString(rr) : key;
      this.records.deleteRef(key);
      out.push({ Untagged: name });
      // dockerd names the image by its id in untag events, not by the name removed.
      this.events.publish('image', 'untag', image.id, { name: image.id });
    };
    let refs = this.records.refsOf(image.id);
    // A local parent (commit, build) cannot go while images are built on it, forced or not.
    const hasChildren = this.parentIds().has(image.id);

    if (ref) {
      // Untagging the only name of an image a container uses would leave it dangling: dockerd wants force.
      if (!opts.force && isSingleReference(refs) && users.length > 0) {
        throw conflict(`conflict: unable to remove repository reference "${nameOrId}" (must force) - container ${users[0]!.slice(0, 12)} is using its referenced image ${short}`);
      }
      untag(refKey(ref));
      refs = this.records.refsOf(image.id);
      if (!ref.digest) {
        // With its last tag gone, a repository's digest references go too.
        const repo = fullName(ref);
        const nameOf = (key: string) => tryParseReference(key, { defaultTag: false });
        if (!refs.some((r) => r.kind === 'tag' && nameOf(r.ref) && fullName(nameOf(r.ref)!) === repo)) {
          for (const r of refs) if (r.kind === 'digest' && nameOf(r.ref) && fullName(nameOf(r.ref)!) === repo) untag(r.ref);
          refs = this.records.refsOf(image.id);
        }
      }
      if (refs.length > 0 || users.length > 0 || hasChildren) return out;
    } else {
      if (hasChildren) {
        throw conflict(`conflict: unable to delete ${short} (cannot be forced) - image has dependent child images`);
      }
      if (usage.running.length > 0) {
        throw conflict(`conflict: unable to delete ${short} (cannot be forced) - image is being used by running container ${usage.running[0]!.slice(0, 12)}`);
      }
      if (!opts.force && refs.length > 0 && !isSingleReference(refs)) {
        throw conflict(`conflict: unable to delete ${short} (must be forced) - image is referenced in multiple repositories`);
      }
      if (usage.stopped.length > 0 && !opts.force) {
        throw conflict(`conflict: unable to delete ${short} (must be forced) - image is being used by stopped container ${usage.stopped[0]!.slice(0, 12)}`);
      }
      for (const r of refs) untag(r.ref);
      // Forced while stopped containers use it: the names go, the layers stay for those containers.
      if (users.length > 0) return out;
    }
    out.push(...(await this.#deleteImage(image, opts.noprune)));
    return out;
  }

  async #deleteImage(image: ImageRecord, noprune: boolean): Promise<DeleteResponseItem[]> {
    const out: DeleteResponseItem[] = [];
    const orphans = this.records.deleteImage(image.id);
    this.#configCache.delete(image.id);
    out.push({ Deleted: image.id });
    this.events.publish('image', 'delete', image.id, { name: image.id });
    for (const chainId of orphans) {
      // A pull in flight may be about to record this layer again: its cleanup decides then.
      if (!this.#leases.has(chainId)) await this.#removeLayer(chainId);
      out.push({ Deleted: chainId });
    }
    await this.content.delete(image.id as `sha256:${string}`).catch(() => undefined);
    await this.#deleteLayerBlobs(image, orphans);
    // A local parent left without a name or child is removed too, unless noprune.
    if (!noprune && image.parent) {
      const parent = this.records.getImage(image.parent);
      if (parent && this.records.refsOf(parent.id).length === 0 && !this.parentIds().has(parent.id) && this.#unused(parent.id)) {
        out.push(...(await this.#deleteImage(parent, false)));
      }
    }
    return out;
  }

  /** The compressed blobs of layers no image uses any more, unless another image names them too. */
  async #deleteLayerBlobs(image: ImageRecord, orphans: string[]): Promise<void> {
    if (orphans.length === 0) return;
    const inUse = new Set<string>();
    const diffIdsInUse = new Set<string>();
    for (const other of this.records.listImages()) {
      for (const b of other.layerBlobs) inUse.add(b.digest);
      for (const d of this.tryConfig(other)?.rootfs?.diff_ids ?? []) diffIdsInUse.add(d);
    }
    const diffIds = this.tryConfig(image)?.rootfs?.diff_ids ?? [];
    for (const chainId of orphans) {
      const i = image.chainIds.indexOf(chainId);
      const blob = image.layerBlobs[i];
      if (blob && !inUse.has(blob.digest)) await this.content.delete(blob.digest).catch(() => undefined);
      const diffId = diffIds[i];
      const kept = diffId !== undefined && !diffIdsInUse.has(diffId) ? this.layerBlobs?.get(diffId) : undefined;
      if (kept && diffId !== undefined) {
        this.layerBlobs!.delete(diffId);
        if (!inUse.has(kept.digest)) await this.content.delete(kept.digest).catch(() => undefined);
      }
    }
  }

  /**
   * Marks layers as in use by a pull until the returned release is called. Call before checking
   * whether the layers exist, so a concurrent delete or failed pull cannot remove them meanwhile.
   */
  async leaseLayers(chainIds: string[]): Promise<() => void> {
    for (;;) {
      const pending = chainIds.map((c) => this.#removing.get(c)).filter((p) => p !== undefined);
      if (pending.length === 0) break;
      await Promise.all(pending);
    }
    for (const c of chainIds) this.#leases.set(c, (this.#leases.get(c) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const c of chainIds) {
        const n = (this.#leases.get(c) ?? 1) - 1;
        if (n <= 0) this.#leases.delete(c);
        else this.#leases.set(c, n);
      }
    };
  }

  /**
   * After a failed pull (the caller still holding its one lease): removes the layer directories of
   * `chainIds` that no image records and no other pull relies on, so a failure leaves nothing behind.
   */
  async discardUnrecordedLayers(chainIds: string[]): Promise<void> {
    for (const chainId of chainIds) {
      if ((this.#leases.get(chainId) ?? 0) > 1 || this.records.getLayer(chainId)) continue;
      await this.#removeLayer(chainId);
    }
  }

  /** After a failed pull: the compressed blobs it kept that no image names. */
  async discardUnrecordedBlobs(digests: string[]): Promise<void> {
    const inUse = new Set<string>();
    for (const image of this.records.listImages()) for (const b of image.layerBlobs) inUse.add(b.digest);
    for (const d of digests) if (!inUse.has(d)) await this.content.delete(d as `sha256:${string}`).catch(() => undefined);
  }

  /**
   * Removes layer directories nothing records (left by a pull that was killed before it finished),
   * and first the layer blobs nothing names (sweepUnrecordedBlobs). Meant for startup, before the
   * API serves requests.
   */
  async sweepUnrecordedLayers(): Promise<string[]> {
    await this.sweepUnrecordedBlobs();
    const removed: string[] = [];
    for (const chainId of await this.layers.list()) {
      if (this.#leases.has(chainId) || this.records.getLayer(chainId)) continue;
      await this.#removeLayer(chainId);
      removed.push(chainId);
    }
    return removed;
  }

  /**
   * Removes layer blobs nothing names (kept by a pull or load killed before it recorded its image):
   * blobs no image, kept-layer row or digest reference names and that are not JSON documents
   * (configs and manifests stay: an index's child manifests are named only inside the index).
   * Meant for startup, like sweepUnrecordedLayers.
   */
  async sweepUnrecordedBlobs(): Promise<string[]> {
    const named = new Set<string>();
    const images = this.records.listImages();
    // A damaged record may have named blobs it no longer lists: keep every blob until it is removed.
    const damaged = images.filter((i) => i.damaged !== undefined || !this.tryConfig(i)).map((i) => i.id);
    if (damaged.length) {
      log.warn('unnamed layer blobs kept: damaged image records', { images: damaged });
      return [];
    }
    for (const image of images) {
      named.add(image.id);
      for (const b of image.layerBlobs) named.add(b.digest);
      for (const d of this.config(image).rootfs?.diff_ids ?? []) {
        const kept = this.layerBlobs?.get(d);
        if (kept) named.add(kept.digest);
      }
    }
    for (const r of this.records.allRefs()) if (r.kind === 'digest') named.add(r.ref.slice(r.ref.lastIndexOf('@') + 1));
    const removed: string[] = [];
    for (const d of await this.content.list()) {
      if (named.has(d) || (await this.#isJsonBlob(d))) continue;
      await this.content.delete(d);
      removed.push(d);
    }
    return removed;
  }

  async #isJsonBlob(d: `sha256:${string}`): Promise<boolean> {
    const fh = await open(this.content.path(d), 'r').catch(() => undefined);
    if (!fh) return true;
    try {
      const buf = Buffer.alloc(1);
      const { bytesRead } = await fh.read(buf, 0, 1, 0);
      return bytesRead === 1 && buf[0] === 0x7b; // '{'
    } finally {
      await fh.close();
    }
  }

  #removeLayer(chainId: string): Promise<void> {
    const running = this.#removing.get(chainId);
    if (running) return running;
    const p = this.layers
      .remove(chainId as `sha256:${string}`)
      .catch((err) => log.warn('layer removal failed', { chainId, err }))
      .finally(() => this.#removing.delete(chainId));
    this.#removing.set(chainId, p);
    return p;
  }

  #unused(id: string): boolean {
    const u = this.usage(id);
    return u.running.length + u.stopped.length === 0;
  }

  /** POST /images/prune: dangling images by default, all unused with dangling=false. */
  async prune(opts: { danglingOnly: boolean; match: (v: ImageView) => boolean }): Promise<{ deleted: DeleteResponseItem[]; reclaimed: number }> {
    const deleted: DeleteResponseItem[] = [];
    let reclaimed = 0;
    for (const v of this.list()) {
      if (!this.#unused(v.record.id)) continue;
      // Images with children stay (dockerd's delete would refuse them); this changes as children go.
      if (this.parentIds().has(v.record.id)) continue;
      if (opts.danglingOnly && v.repoTags.length > 0) continue;
      if (!opts.match(v)) continue;
      if (!this.records.getImage(v.record.id)) continue; // removed as someone's parent already
      for (const r of this.records.refsOf(v.record.id)) {
        const rr = tryParseReference(r.ref, { defaultTag: false });
        deleted.push({ Untagged: rr ? familiarString(rr) : r.ref });
      }
      const items = await this.#deleteImage(v.record, false);
      deleted.push(...items);
      reclaimed += v.record.size;
    }
    return { deleted, reclaimed };
  }

  history(nameOrId: string): { Id: string; Created: number; CreatedBy: string; Tags: string[] | null; Size: number; Comment: string }[] {
    const v = this.get(nameOrId);
    const hist = v.config.history ?? [];
    const out: { Id: string; Created: number; CreatedBy: string; Tags: string[] | null; Size: number; Comment: string }[] = [];
    let layerIdx = 0;
    for (const h of hist) {
      let size = 0;
      if (!h.empty_layer) {
        const chainId = v.record.chainIds[layerIdx++];
        size = chainId ? (this.records.getLayer(chainId)?.size ?? 0) : 0;
      }
      out.push({
        Id: '<missing>',
        Created: h.created ? Math.floor(Date.parse(h.created) / 1000) : 0,
        CreatedBy: h.created_by ?? '',
        Tags: null,
        Size: size,
        Comment: h.comment ?? '',
      });
    }
    out.reverse();
    if (out.length === 0) out.push({ Id: v.record.id, Created: Math.floor(Date.parse(v.record.created) / 1000) || 0, CreatedBy: '', Tags: v.repoTags, Size: v.record.size, Comment: '' });
    out[0]!.Id = v.record.id;
    out[0]!.Tags = v.repoTags.length ? v.repoTags : null;
    return out;
  }

  /** Used by messages: the name as the client gave it, with :latest added. */
  displayName(nameOrId: string): string {
    return displayName(nameOrId);
  }

}

/** A reference's repository (`docker.io/library/busybox`), or the key itself when it does not parse. */
function repositoryOf(key: string): string {
  const ref = tryParseReference(key, { defaultTag: false });
  return ref ? fullName(ref) : key;
}

/**
 * dockerd's test for "one name": at most one tag, and every digest reference in that tag's
 * repository (or, with no tag, all digest references in one repository).
 */
function isSingleReference(refs: RefRecord[]): boolean {
  if (refs.length <= 1) return refs.length === 1;
  let single: string | undefined;
  const digestRepos = new Set<string>();
  for (const r of refs) {
    if (r.kind === 'digest') digestRepos.add(repositoryOf(r.ref));
    else if (single === undefined) single = repositoryOf(r.ref);
    else return false;
  }
  single ??= repositoryOf(refs[0]!.ref);
  return digestRepos.size === 1 && digestRepos.has(single);
}
