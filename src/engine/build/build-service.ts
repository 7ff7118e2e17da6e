/**
 * The build aggregate's facade: `docker build` (classic builder), the build cache's prune and
 * usage. Routes hand it the request as received (context stream, query values, the
 * X-Registry-Config header); reference and auth parsing happen here.
 */
import { mkdir, readFile, rm } from 'node:fs/promises';
import { unmount } from '../../runtime/mount-syscall.js';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { errorMessage, invalidArgument } from '../../lib/errors.js';
import type { Platform } from '../../lib/oci.js';
import { normalizeAuthConfig, type AuthConfig } from '../../registry/auth-config.js';
import { parseReference, type Reference } from '../../registry/reference.js';
import type { BuildCacheRecords } from '../../state/build-cache-records.js';
import type { ContainerService } from '../containers/container-service.js';
import type { ImageService } from '../images/image-service.js';
import type { ProgressSink } from '../images/progress.js';
import type { PullResult } from '../images/pull-image.js';
import { receiveContext, receiveRemoteContext } from './build-context.js';
import { ContextCache } from './context-cache.js';
import { Builder, BuildError, type BuildSettings, type Emit } from './builder.js';

export type Puller = (ref: Reference, opts: { auth?: AuthConfig; platform?: Platform; signal?: AbortSignal }, progress: ProgressSink) => Promise<PullResult>;

export interface BuildRequest extends BuildSettings {
  context: Readable;
  /** a URL to fetch the context from instead of the body */
  remote?: string;
  dockerfile?: string;
  tags: string[];
  /** the X-Registry-Config header, as sent */
  registryConfig?: string;
  /** the image id as an aux record (API 1.30 and later) */
  aux: boolean;
}

export interface CacheUsage {
  /** one entry per cached step, in /system/df's BuildCache shape */
  records: { ID: string; Parent: string; Parents: string[] | null; Type: string; Description: string; InUse: boolean; Shared: boolean; Size: number; CreatedAt: string; LastUsedAt: string; UsageCount: number }[];
  size: number;
}

export class BuildService {
  readonly #work: string;
  /** Unpacked contexts by the digest of their body: an unchanged context is not unpacked again. */
  readonly #contexts: ContextCache;
  /** the work dir exists (made once, not on every build) */
  #workMade = false;

  constructor(
    private readonly containers: ContainerService,
    private readonly images: ImageService,
    private readonly cache: BuildCacheRecords,
    private readonly pull: Puller,
    dataRoot: string,
  ) {
    this.#work = join(dataRoot, 'build');
    this.#contexts = new ContextCache(join(this.#work, 'contexts'));
  }

  /** Removes what a killed daemon's builds left in the work dir. */
  async cleanWork(): Promise<void> {
    // Overlays a killed build left mounted go first (deepest first), then the files.
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8').catch(() => ''))
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .filter((m) => m.startsWith(this.#work + '/'))
      .sort((a, b) => b.length - a.length);
    for (const m of mounts) await unmount(m, { lazy: true }).catch(() => undefined);
    await this.#contexts.clear();
    await rm(this.#work, { recursive: true, force: true });
    await mkdir(this.#work, { recursive: true, mode: 0o700 });
    this.#workMade = true;
  }

  /**
   * Runs a build, writing dockerd's stream records to `emit`. Request errors (tags, context) throw
   * before anything is emitted; a failing step is emitted as the stream's error record.
   */
  async build(req: BuildRequest, emit: Emit): Promise<string | undefined> {
    const tags = req.tags.map((t) => {
      const ref = parseReference(t);
      if (ref.digest) throw invalidArgument(`invalid reference format: ${t}`);
      return splitTag(t);
    });
    const auths = parseRegistryConfig(req.registryConfig);
    if (!this.#workMade) {
      await mkdir(this.#work, { recursive: true, mode: 0o700 });
      this.#workMade = true;
    }
    const ctx = req.remote ? await receiveRemoteContext(this.#work, req.remote, req.dockerfile, req.signal, this.#contexts) : await receiveContext(this.#work, req.context, req.dockerfile, this.#contexts);
    try {
      const builder = new Builder(
        this.containers,
        this.images,
        this.cache,
        {
          ...req,
          dockerfile: ctx.dockerfile,
          contextDir: ctx.dir,
          contextDigests: ctx.digests,
          pull_: async (name, platform, out) => {
            const ref = parseReference(name);
            const { imageId } = await this.pull(ref, { auth: authFor(auths, ref.domain), platform, signal: req.signal }, out);
            return imageId;
          },
        },
        emit,
        this.#work,
      );
      let id: string;
      try {
        id = await builder.run();
      } catch (err) {
        if (req.signal.aborted) return undefined;
        const message = err instanceof BuildError ? err.message : errorMessage(err);
        const code = err instanceof BuildError ? err.code : undefined;
        emit({ errorDetail: code === undefined ? { message } : { code, message }, error: message });
        return undefined;
      }
      if (req.aux) emit({ aux: { ID: id } });
      if (req.quiet) emit({ stream: `${id}\n` });
      else emit({ stream: `Successfully built ${id.slice(7, 19)}\n` });
      for (const t of tags) {
        this.images.tag(id, t.repo, t.tag);
        if (!req.quiet) emit({ stream: `Successfully tagged ${t.repo}:${t.tag ?? 'latest'}\n` });
      }
      return id;
    } finally {
      // Freeing the context's blocks (milliseconds for tens of MiB) is not the client's wait: the
      // answer ends first. A daemon killed meanwhile leaves it to cleanWork().
      ctx.dispose().catch(() => undefined);
    }
  }

  /**
   * POST /build/prune: cached steps, least recently used first, until `keepStorage` bytes (if
   * given) are left; `until` and the filters narrow the choice. Steps of named images stay unless
   * `all`. A step's image goes with it when nothing else needs it (children, containers, names).
   */
  async prune(opts: { all: boolean; keepStorage: number; until?: number; filters: Map<string, string[]> }): Promise<{ CachesDeleted: string[]; SpaceReclaimed: number }> {
    // Unpacked contexts are kept to spare an unchanged rebuild's unpacking: no cache a user sees, but a prune empties it.
    await this.#contexts.clear();
    const entries = this.cache.all();
    let kept = entries.reduce((n, e) => n + this.#sizeOf(e.imageId), 0);
    const chosen: typeof entries = [];
    const parents = this.images.parentIds();
    for (const e of [...entries].sort((a, b) => a.lastUsed - b.lastUsed)) {
      if (opts.keepStorage > 0 && kept <= opts.keepStorage) break;
      if (opts.until !== undefined && e.createdAt >= opts.until) continue;
      const rec = this.images.records.getImage(e.imageId);
      if (!matchesFilters(opts.filters, cacheId(e.key), rec?.parent ?? '', rec ? describe(rec.config) : '')) continue;
      // Without `all`, steps that named images (or their children) still stand on are kept.
      if (rec && !opts.all && (this.images.records.refsOf(rec.id).length > 0 || parents.has(rec.id))) continue;
      chosen.push(e);
      kept -= this.#sizeOf(e.imageId);
    }
    for (const e of chosen) this.cache.delete(e.key);
    // Deepest images first, so that each parent has lost its children when its turn comes.
    const still = new Set(this.cache.all().map((e) => e.imageId));
    const images = [...new Set(chosen.map((e) => e.imageId))].filter((id) => !still.has(id)).map((id) => ({ id, depth: this.#depth(id), size: this.#sizeOf(id) }));
    let reclaimed = 0;
    for (const img of images.sort((a, b) => b.depth - a.depth)) {
      const rec = this.images.records.getImage(img.id);
      if (!rec || this.images.records.refsOf(rec.id).length > 0) continue;
      const gone = await this.images.remove(rec.id, { force: false, noprune: true }).then(() => true, () => false);
      if (gone) reclaimed += img.size;
    }
    return { CachesDeleted: chosen.map((e) => cacheId(e.key)), SpaceReclaimed: reclaimed };
  }

  #depth(imageId: string): number {
    let n = 0;
    for (let rec = this.images.records.getImage(imageId); rec?.parent && n < 10_000; rec = this.images.records.getImage(rec.parent)) n++;
    return n;
  }

  /** The build cache as /system/df reports it (BuildCache): one record per cached step. */
  cacheUsage(): CacheUsage {
    const records = this.cache.all().map((e) => {
      const rec = this.images.records.getImage(e.imageId);
      const size = this.#sizeOf(e.imageId);
      return {
        ID: cacheId(e.key),
        Parent: rec?.parent ?? '',
        Parents: rec?.parent ? [rec.parent] : null,
        Type: 'regular',
        Description: rec ? describe(rec.config) : '',
        InUse: false,
        Shared: false,
        Size: size,
        CreatedAt: new Date(e.createdAt).toISOString(),
        LastUsedAt: new Date(e.lastUsed).toISOString(),
        UsageCount: 1,
      };
    });
    return { records, size: records.reduce((n, r) => n + r.Size, 0) };
  }

  /** Bytes the step's own layer takes (its image's size minus its parent's). */
  #sizeOf(imageId: string): number {
    const rec = this.images.records.getImage(imageId);
    if (!rec) return 0;
    const parent = rec.parent ? this.images.records.getImage(rec.parent) : undefined;
    return Math.max(0, rec.size - (parent?.size ?? 0));
  }
}

/** A cache record's id as /system/df and prune show it (25 characters, like BuildKit's). */
const cacheId = (key: string): string => key.slice(0, 25);

/** /build/prune's filters on one cached step: all of them are regular, private and not in use. */
function matchesFilters(f: Map<string, string[]>, id: string, parent: string, description: string): boolean {
  const any = (k: string, test: (v: string) => boolean) => !f.has(k) || f.get(k)!.some(test);
  const bool = (k: string, value: boolean) => !f.has(k) || f.get(k)!.some((v) => (v === '' || v === 'true' || v === '1') === value);
  return any('id', (v) => id.startsWith(v)) && any('parent', (v) => parent === v || parent.replace(/^sha256:/, '').startsWith(v.replace(/^sha256:/, ''))) && any('type', (v) => v === 'regular') && any('description', (v) => description.includes(v)) && bool('inuse', false) && bool('shared', false) && bool('private', true);
}

function describe(config: string): string {
  try {
    const c = JSON.parse(config) as { history?: { created_by?: string }[] };
    return c.history?.[c.history.length - 1]?.created_by ?? '';
  } catch {
    return '';
  }
}

function splitTag(t: string): { repo: string; tag: string | undefined } {
  const slash = t.lastIndexOf('/');
  const colon = t.lastIndexOf(':');
  return colon > slash ? { repo: t.slice(0, colon), tag: t.slice(colon + 1) } : { repo: t, tag: undefined };
}

/** X-Registry-Config: base64url JSON, registry host → credentials. */
function parseRegistryConfig(header: string | undefined): Map<string, AuthConfig> {
  const out = new Map<string, AuthConfig>();
  if (!header) return out;
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(header, 'base64url').toString('utf8'));
  } catch {
    return out; // dockerd ignores an unreadable header
  }
  if (!json || typeof json !== 'object') return out;
  for (const [host, value] of Object.entries(json)) {
    const auth = normalizeAuthConfig(value);
    if (auth) out.set(host.replace(/^https?:\/\//, '').replace(/\/.*$/, ''), auth);
  }
  return out;
}

function authFor(auths: Map<string, AuthConfig>, domain: string): AuthConfig | undefined {
  if (domain === 'docker.io') return auths.get('index.docker.io') ?? auths.get('docker.io') ?? auths.get('registry-1.docker.io');
  return auths.get(domain);
}
