/**
 * `docker load`: a Docker archive (`manifest.json`, any version of `docker save`) or an OCI image
 * layout (`index.json` + `blobs/`, as skopeo or buildx write it), plain or compressed. The archive's
 * files are staged under the content store's ingest dir by number, never by their names (so no
 * name can reach outside it); names with `..` or absolute ones, links leaving the archive, devices,
 * and blobs whose bytes do not match their digest refuse the whole archive. Every layer is unpacked
 * and checked against the config's diff ids before anything is recorded, then all images are
 * recorded in one transaction: a refused archive leaves nothing visible.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import { join, posix } from 'node:path';
import { PassThrough, Transform, type Readable, type TransformCallback, type Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { pipeline } from 'node:stream/promises';
import tarStream from 'tar-stream';
import { decompressLayer } from '../../images/decompress.js';
import { chainIds as computeChainIds, type LayerStore, type PendingLayer } from '../../images/layer-store.js';
import { invalidArgument } from '../../lib/errors.js';
import { hexOf, isDigest, type Digest } from '../../lib/digest.js';
import { MediaType, type Descriptor, type ImageConfig } from '../../lib/oci.js';
import { familiarString, tryParseReference, type Reference } from '../../registry/reference.js';
import type { LayerRecord } from '../../state/image-records.js';
import { refKey } from '../images/image-lookup.js';
import type { ImageService } from '../images/image-service.js';
import { ProgressThrottle, type ProgressSink } from '../images/progress.js';
import { hostPlatform } from '../../lib/platform.js';

const MAX_JSON = 32 * 1024 * 1024;

interface Staged {
  path: string;
  size: number;
  digest: Digest;
}

/** One image found in the archive, before anything is unpacked. */
interface Candidate {
  config: Buffer;
  layers: Staged[];
  /** The layer descriptors of an OCI manifest (media types), when the archive had one. */
  layerTypes: (string | undefined)[];
  refs: Reference[];
}

export async function loadImages(images: ImageService, body: Readable, progress: ProgressSink, opts: { quiet: boolean }): Promise<void> {
  const stage = await images.content.stagingDir();
  const early = new Map<string, Promise<PendingLayer>>();
  try {
    const files = await stageArchive(decompressLayer('archive', body), stage, images.layers, early, opts.quiet ? undefined : progress);
    const candidates = await readArchive(files);
    if (candidates.length === 0) throw invalidArgument('invalid archive: no images found');
    await install(images, candidates, early, progress, opts);
  } finally {
    // Layers unpacked on the way that no image took.
    for (const p of early.values()) await p.then((l) => images.layers.discardPending(l), () => undefined);
    await fs.rm(stage, { recursive: true, force: true });
  }
}

function refuse(name: string, why: string): Error {
  return invalidArgument(`invalid archive: refusing entry ${JSON.stringify(name)}: ${why}`);
}

/** An archive name as a clean relative path, or a refusal. */
function cleanName(name: string): string {
  if (name.startsWith('/')) throw refuse(name, 'absolute name');
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw refuse(name, 'name leaves the archive');
  return parts.join('/');
}

/**
 * Files of the archive by clean name, each staged as `<stage>/<n>` with its sha256. A file that looks
 * like a layer (a tar, or gzip or zstd data) is unpacked on the way as well (`early`, by staged path):
 * the archive's manifest, which says which files are layers, usually comes last.
 */
async function stageArchive(tar: Readable, stage: string, store: LayerStore, early: Map<string, Promise<PendingLayer>>, progress: ProgressSink | undefined): Promise<Map<string, Staged>> {
  const files = new Map<string, Staged>();
  const links: { name: string; target: string }[] = [];
  const extract = tarStream.extract();
  const fed = pipeline(tar, extract as unknown as NodeJS.WritableStream);
  fed.catch(() => {});
  let n = 0;
  try {
    for await (const entry of extract) {
      const h = entry.header;
      const name = cleanName(h.name);
      const e = entry as unknown as Readable;
      if (h.type === 'file' || h.type === 'contiguous-file') {
        const path = join(stage, String(n++));
        const bar = progress && new ProgressThrottle(progress, shortName(name), 'Loading layer', h.size ?? 0);
        // A plain tar's diff id is the digest staging computes anyway: it is handed over, not computed twice.
        let plainTar: { resolve: (d: Digest) => void; reject: (err: unknown) => void } | undefined;
        const staged = stageEntry(e, path, (head) => {
          const kind = layerKind(head);
          if (!kind) return undefined;
          const toLayer = new PassThrough({ highWaterMark: 1024 * 1024 });
          let p: Promise<PendingLayer>;
          if (kind === 'tar') {
            const hashedBy = new Promise<Digest>((resolve, reject) => (plainTar = { resolve, reject }));
            hashedBy.catch(() => {}); // the unpack may have failed before it asks
            p = store.unpackPending(toLayer, { hashedBy });
          } else {
            p = store.unpackPending(decompressLayer('layer', toLayer));
          }
          p.catch(() => toLayer.resume()); // a file that was no layer after all: the rest is dropped
          early.set(path, p);
          return toLayer;
        }, bar);
        let size: number;
        let digest: Digest;
        try {
          ({ size, digest } = await staged);
        } catch (err) {
          plainTar?.reject(err);
          throw err;
        }
        plainTar?.resolve(digest);
        files.set(name, { path, size, digest });
        continue;
      }
      if (h.type === 'symlink' || h.type === 'link') {
        const target = h.linkname ?? '';
        if (target.startsWith('/')) throw refuse(h.name, 'link to an absolute name');
        const resolved = h.type === 'symlink' ? posix.normalize(posix.join(posix.dirname(name), target)) : posix.normalize(target);
        if (resolved === '..' || resolved.startsWith('../')) throw refuse(h.name, 'link leaves the archive');
        links.push({ name, target: cleanName(resolved) });
      } else if (h.type !== 'directory') {
        throw refuse(h.name, `unsupported entry type ${h.type ?? 'unknown'}`);
      }
      e.resume();
    }
    await fed;
  } catch (err) {
    extract.destroy();
    await fed.catch(() => {});
    throw err;
  }
  // Links name files of the archive (old `docker save` links shared layers); chains are followed a few steps.
  for (let round = 0; round < 8 && links.length > 0; round++) {
    for (let i = links.length - 1; i >= 0; i--) {
      const f = files.get(links[i]!.target);
      if (f) {
        files.set(links[i]!.name, f);
        links.splice(i, 1);
      }
    }
  }
  return files;
}

/** `blobs/sha256/<hex>` or `<hex>/layer.tar` → 12 hex digits, for progress ids. */
function shortName(name: string): string {
  const hex = /[0-9a-f]{12,}/.exec(name)?.[0];
  return hex ? hex.slice(0, 12) : name;
}

/** Gzip or zstd data (`compressed`), a tar header (`ustar` at offset 257), or no layer. */
function layerKind(head: Buffer): 'compressed' | 'tar' | undefined {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'compressed';
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'compressed';
  return head.length >= 262 && head.toString('latin1', 257, 262) === 'ustar' ? 'tar' : undefined;
}

const HEAD_BYTES = 262;
const STAGE_WRITE_BUFFER = 4 * 1024 * 1024;

/**
 * Writes an entry to `path` while hashing it. `tee`, asked once with the entry's first bytes, may
 * return a stream that gets every byte too (with backpressure; it may give up early).
 */
async function stageEntry(entry: Readable, path: string, tee: (head: Buffer) => PassThrough | undefined, bar: ProgressThrottle | undefined): Promise<{ size: number; digest: Digest }> {
  const hash = createHash('sha256');
  // A deep buffer (bounded) so the disk write of one chunk overlaps reading and unpacking the next.
  const out = createWriteStream(path, { flags: 'wx', mode: 0o600, highWaterMark: STAGE_WRITE_BUFFER });
  const written = finished(out);
  written.catch(() => {});
  let size = 0;
  let held: Buffer[] = []; // the first bytes, until there are enough to tell a layer
  let heldBytes = 0;
  let side: PassThrough | undefined;
  const send = async (chunk: Buffer) => {
    hash.update(chunk);
    size += chunk.length;
    if (side) bar?.update(size);
    const waits: Promise<void>[] = [];
    if (!out.write(chunk)) waits.push(drained(out));
    if (side && !side.destroyed && !side.write(chunk)) waits.push(drained(side));
    await Promise.all(waits);
  };
  try {
    for await (const chunk of entry as AsyncIterable<Buffer>) {
      if (heldBytes < HEAD_BYTES) {
        held.push(chunk);
        heldBytes += chunk.length;
        if (heldBytes < HEAD_BYTES) continue;
        const head = Buffer.concat(held);
        held = [];
        side = tee(head);
        await send(head);
        continue;
      }
      await send(chunk);
    }
    if (heldBytes < HEAD_BYTES && held.length > 0) await send(Buffer.concat(held));
    side?.end();
    out.end();
    await written;
  } catch (err) {
    side?.destroy(err as Error);
    out.destroy();
    throw err;
  }
  return { size, digest: `sha256:${hash.digest('hex')}` };
}

/** Resolves once `s` drains, or when it closes or fails (a consumer that gave up never drains). */
function drained(s: Writable): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      s.off('drain', done);
      s.off('close', done);
      s.off('error', done);
      resolve();
    };
    s.on('drain', done);
    s.on('close', done);
    s.on('error', done);
  });
}

async function readJson<T>(f: Staged | undefined, what: string): Promise<T> {
  if (!f) throw invalidArgument(`invalid archive: ${what} is missing`);
  if (f.size > MAX_JSON) throw invalidArgument(`invalid archive: ${what} is too large`);
  try {
    return JSON.parse(await fs.readFile(f.path, 'utf8')) as T;
  } catch {
    throw invalidArgument(`invalid archive: ${what} is not valid JSON`);
  }
}

async function readArchive(files: Map<string, Staged>): Promise<Candidate[]> {
  if (files.has('manifest.json')) return readDockerArchive(files);
  if (files.has('index.json')) return readOciLayout(files);
  throw invalidArgument('invalid archive: neither manifest.json nor index.json found');
}

async function readDockerArchive(files: Map<string, Staged>): Promise<Candidate[]> {
  const items = await readJson<{ Config?: string; RepoTags?: string[] | null; Layers?: string[] }[]>(files.get('manifest.json'), 'manifest.json');
  if (!Array.isArray(items)) throw invalidArgument('invalid archive: manifest.json is not a list');
  const out: Candidate[] = [];
  for (const item of items) {
    const configFile = files.get(cleanName(String(item.Config ?? '')));
    if (!configFile || configFile.size > MAX_JSON) throw invalidArgument(`invalid archive: config ${JSON.stringify(item.Config)} is missing`);
    const layers = (item.Layers ?? []).map((l) => {
      const f = files.get(cleanName(String(l)));
      if (!f) throw invalidArgument(`invalid archive: layer ${JSON.stringify(l)} is missing`);
      return f;
    });
    const refs: Reference[] = [];
    for (const t of item.RepoTags ?? []) {
      const ref = tryParseReference(String(t));
      if (!ref || ref.digest) throw invalidArgument(`invalid archive: invalid tag ${JSON.stringify(t)}`);
      refs.push(ref);
    }
    out.push({ config: await fs.readFile(configFile.path), layers, layerTypes: layers.map(() => undefined), refs });
  }
  return out;
}

/** A blob of the layout, checked against its descriptor's digest and size. */
function blob(files: Map<string, Staged>, d: Descriptor): Staged {
  if (!d || typeof d.digest !== 'string' || !isDigest(d.digest)) throw invalidArgument('invalid archive: a descriptor has no valid sha256 digest');
  const f = files.get(`blobs/sha256/${hexOf(d.digest)}`);
  if (!f) throw invalidArgument(`invalid archive: blob ${d.digest} is missing`);
  if (f.digest !== d.digest || (typeof d.size === 'number' && f.size !== d.size)) throw invalidArgument(`invalid archive: blob ${d.digest} does not match its digest`);
  return f;
}

async function readOciLayout(files: Map<string, Staged>): Promise<Candidate[]> {
  const index = await readJson<{ manifests?: Descriptor[] }>(files.get('index.json'), 'index.json');
  const out: Candidate[] = [];
  const visit = async (d: Descriptor, names: Reference[], depth: number): Promise<void> => {
    if (depth > 4) throw invalidArgument('invalid archive: indexes nested too deep');
    const f = blob(files, d);
    const doc = await readJson<{ mediaType?: string; manifests?: Descriptor[]; config?: Descriptor; layers?: Descriptor[] }>(f, `blob ${d.digest}`);
    if (Array.isArray(doc.manifests)) {
      // An index inside: the host's platform, or its only entry.
      const pick = doc.manifests.find((m) => !m.platform || (m.platform.os === 'linux' && m.platform.architecture === hostPlatform().architecture)) ?? doc.manifests[0];
      if (pick) await visit(pick, names, depth + 1);
      return;
    }
    if (!doc.config) throw invalidArgument(`invalid archive: manifest ${d.digest} has no config`);
    const config = blob(files, doc.config);
    const layers = (doc.layers ?? []).map((l) => blob(files, l));
    out.push({ config: await fs.readFile(config.path), layers, layerTypes: (doc.layers ?? []).map((l) => l.mediaType), refs: names });
  };
  for (const m of index.manifests ?? []) {
    const a = m.annotations ?? {};
    const name = a['io.containerd.image.name'] ?? a['org.opencontainers.image.ref.name'];
    const ref = name ? tryParseReference(name) : undefined;
    // A bare tag ("latest") names no repository: the image loads by id.
    const named = ref && !ref.digest && (name!.includes(':') || name!.includes('/')) ? [ref] : [];
    await visit(m, named, 0);
  }
  return out;
}

async function install(images: ImageService, candidates: Candidate[], early: Map<string, Promise<PendingLayer>>, progress: ProgressSink, opts: { quiet: boolean }): Promise<void> {
  const plans: { id: Digest; config: ImageConfig; c: Candidate; chain: Digest[]; diffIds: Digest[] }[] = [];
  for (const c of candidates) {
    const id = `sha256:${createHash('sha256').update(c.config).digest('hex')}` as Digest;
    let config: ImageConfig;
    try {
      config = JSON.parse(c.config.toString('utf8')) as ImageConfig;
    } catch {
      throw invalidArgument('invalid archive: an image config is not valid JSON');
    }
    const diffIds = (config.rootfs?.diff_ids ?? []) as Digest[];
    if (!Array.isArray(diffIds) || diffIds.length !== c.layers.length || !diffIds.every((d) => isDigest(d))) {
      throw invalidArgument(`invalid archive: image ${id} lists ${Array.isArray(diffIds) ? diffIds.length : 0} layers in its config but ${c.layers.length} in the archive`);
    }
    plans.push({ id, config, c, chain: computeChainIds(diffIds), diffIds });
  }
  const allChains = [...new Set(plans.flatMap((p) => p.chain))];
  const release = await images.leaseLayers(allChains);
  try {
    const sizes = new Map<string, number>();
    for (const p of plans) {
      for (let i = 0; i < p.chain.length; i++) {
        const chainId = p.chain[i]!;
        if (sizes.has(chainId)) continue;
        const have = images.records.getLayer(chainId);
        if (have && (await images.layers.has(chainId))) {
          sizes.set(chainId, have.size);
          continue;
        }
        const f = p.c.layers[i]!;
        // Unpacked while the archive streamed: taken when its tar is this layer's.
        const pending = await early.get(f.path)?.catch(() => undefined);
        if (pending && pending.diffId === p.diffIds[i]) {
          early.delete(f.path);
          sizes.set(chainId, await images.layers.installPending(pending, chainId));
          continue;
        }
        const id = hexOf(p.diffIds[i]!).slice(0, 12);
        const bar = opts.quiet ? undefined : new ProgressThrottle(progress, id, 'Loading layer', f.size);
        let read = 0;
        const counter = new Transform({
          transform(chunk: Buffer, _enc, cb: TransformCallback) {
            read += chunk.length;
            bar?.update(read);
            cb(null, chunk);
          },
        });
        const src = createReadStream(f.path, { highWaterMark: 256 * 1024 }).pipe(counter);
        const { size } = await images.layers.unpack(chainId, p.diffIds[i]!, decompressLayer(p.c.layerTypes[i] ?? 'layer', src));
        bar?.update(f.size, true);
        sizes.set(chainId, size);
      }
    }
    // Keep each layer's blob as it came (a layer tar or its compressed form): save and push send it.
    const blobs = new Map<string, Descriptor>();
    for (const p of plans) {
      for (let i = 0; i < p.chain.length; i++) {
        const f = p.c.layers[i]!;
        if (blobs.has(f.digest)) continue;
        const type = f.digest === p.diffIds[i] ? MediaType.ociLayer : p.c.layerTypes[i] ?? MediaType.ociLayerGzip;
        blobs.set(f.digest, { mediaType: type, digest: f.digest, size: f.size });
        await images.content.adopt(f.path, f.digest).catch(() => undefined);
      }
    }
    for (const p of plans) await images.content.writeBuffer(p.c.config);
    for (const p of plans) {
      for (const r of p.c.refs) {
        const old = images.records.getRef(refKey(r));
        if (old && old.imageId !== p.id) progress({ stream: `The image ${familiarString(r)} already exists, renaming the old one with ID ${old.imageId} to empty string\n` });
      }
    }
    const loaded: { id: string; refs: Reference[] }[] = [];
    images.records.transaction(() => {
      for (const p of plans) {
        const layers: LayerRecord[] = p.chain.map((chainId, i) => ({ chainId, diffId: p.diffIds[i]!, parent: i === 0 ? null : p.chain[i - 1]!, size: sizes.get(chainId) ?? 0 }));
        images.records.saveImage(
          {
            id: p.id,
            config: p.c.config.toString('utf8'),
            chainIds: p.chain,
            layerBlobs: p.c.layers.map((f) => blobs.get(f.digest)!),
            parent: '',
            size: layers.reduce((n, l) => n + l.size, 0),
            created: p.config.created ?? new Date(0).toISOString(),
            addedAt: Date.now(),
          },
          layers,
          p.c.refs.map((r) => ({ ref: refKey(r), kind: 'tag' as const })),
        );
        loaded.push({ id: p.id, refs: p.c.refs });
      }
    });
    for (const l of loaded) {
      images.events.publish('image', 'load', l.id, { name: l.id });
      if (l.refs.length === 0) progress({ stream: `Loaded image ID: ${l.id}\n` });
      for (const r of l.refs) progress({ stream: `Loaded image: ${familiarString(r)}\n` });
    }
  } catch (err) {
    await images.discardUnrecordedLayers(allChains);
    await images.discardUnrecordedBlobs(plans.flatMap((p) => p.c.layers.map((f) => f.digest)));
    throw err;
  } finally {
    release();
  }
}
