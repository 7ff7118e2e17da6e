/** Image, reference and layer rows. Writes that belong together happen in one transaction. */
import type { Db } from './db.js';
import type { Descriptor } from '../lib/oci.js';
import { chainIds as chainIdsOf, isDigest, type Digest } from '../lib/digest.js';

export interface ImageRecord {
  id: string;
  config: string;
  chainIds: string[];
  layerBlobs: Descriptor[];
  parent: string;
  size: number;
  created: string;
  addedAt: number;
  /** Set when a column of the row did not read (what, and how it was mended); see readImageRow. */
  damaged?: string;
}

export interface LayerRecord {
  chainId: string;
  diffId: string;
  parent: string | null;
  size: number;
}

export interface RefRecord {
  ref: string;
  imageId: string;
  kind: 'tag' | 'digest';
  createdAt: number;
}

interface ImageRow {
  id: string;
  config: string;
  chain_ids: string;
  layer_blobs: string;
  parent: string;
  size: number;
  created: string;
  added_at: number;
}

/**
 * A row as a record. One damaged row must neither stop the daemon nor break every listing: lost
 * chain ids are derived again from the config's diff ids (what every writer derived them from) and written back, lost
 * blob descriptors read as none (ImageService.layerBlobsOf recovers them); `damaged` says what was
 * wrong. The config stays as stored: the engine reads an unparsable one back from its blob.
 */
const toImage = (r: ImageRow, rewriteChains?: (id: string, chainIds: string[]) => void): ImageRecord => {
  const problems: string[] = [];
  let chainIds = parseArray(r.chain_ids, (v): v is string => typeof v === 'string' && isDigest(v));
  if (!chainIds) {
    chainIds = chainsFromConfig(r.config);
    problems.push(chainIds ? 'chain_ids unreadable, derived from the config and written back' : 'chain_ids unreadable');
    // Derived, they are exactly what was written: the row is mended, so layer counts (json_each) see it again.
    if (chainIds) rewriteChains?.(r.id, chainIds);
  }
  let layerBlobs = parseArray(r.layer_blobs, isDescriptor);
  if (!layerBlobs) {
    layerBlobs = [];
    problems.push('layer_blobs unreadable, recovered when needed');
  }
  return {
    id: r.id,
    config: r.config,
    chainIds: chainIds ?? [],
    layerBlobs,
    parent: r.parent,
    size: r.size,
    created: r.created,
    addedAt: r.added_at,
    ...(problems.length ? { damaged: problems.join('; ') } : {}),
  };
};

function parseArray<T>(text: string, ok: (v: unknown) => v is T): T[] | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return Array.isArray(v) && v.every(ok) ? v : undefined;
  } catch {
    return undefined;
  }
}

const isDescriptor = (v: unknown): v is Descriptor =>
  typeof v === 'object' && v !== null && typeof (v as Descriptor).digest === 'string' && typeof (v as Descriptor).mediaType === 'string' && typeof (v as Descriptor).size === 'number';

function chainsFromConfig(config: string): string[] | undefined {
  try {
    const diffIds = (JSON.parse(config) as { rootfs?: { diff_ids?: unknown } }).rootfs?.diff_ids;
    return Array.isArray(diffIds) && diffIds.every((d) => typeof d === 'string' && isDigest(d)) ? chainIdsOf(diffIds as Digest[]) : undefined;
  } catch {
    return undefined;
  }
}

export class ImageRecords {
  readonly #db: Db;
  readonly #getImage;
  readonly #allImages;
  readonly #idsByPrefix;
  readonly #getRef;
  readonly #refsOf;
  readonly #allRefs;
  readonly #putRef;
  readonly #delRef;
  readonly #putImage;
  readonly #delImage;
  readonly #getLayer;
  readonly #putLayer;
  readonly #delLayer;
  readonly #layerUsers;
  readonly #putChains;
  readonly #rewriteChains = (id: string, chainIds: string[]) => this.#putChains.run(JSON.stringify(chainIds), id);

  constructor(db: Db) {
    this.#db = db;
    this.#getImage = db.prepare<[string], ImageRow>('SELECT * FROM images WHERE id = ?');
    this.#allImages = db.prepare<[], ImageRow>('SELECT * FROM images ORDER BY added_at DESC');
    this.#idsByPrefix = db.prepare<[string, string], { id: string }>('SELECT id FROM images WHERE id >= ? AND id < ? LIMIT 2');
    this.#getRef = db.prepare<[string], { ref: string; image_id: string; kind: 'tag' | 'digest'; created_at: number }>('SELECT * FROM image_refs WHERE ref = ?');
    this.#refsOf = db.prepare<[string], { ref: string; image_id: string; kind: 'tag' | 'digest'; created_at: number }>('SELECT * FROM image_refs WHERE image_id = ? ORDER BY created_at, ref');
    this.#allRefs = db.prepare<[], { ref: string; image_id: string; kind: 'tag' | 'digest'; created_at: number }>('SELECT * FROM image_refs ORDER BY created_at, ref');
    this.#putRef = db.prepare('INSERT INTO image_refs(ref, image_id, kind, created_at) VALUES (?, ?, ?, ?) ON CONFLICT(ref) DO UPDATE SET image_id = excluded.image_id, created_at = excluded.created_at');
    this.#delRef = db.prepare('DELETE FROM image_refs WHERE ref = ?');
    this.#putImage = db.prepare('INSERT OR IGNORE INTO images(id, config, chain_ids, layer_blobs, parent, size, created, added_at) VALUES (@id, @config, @chainIds, @layerBlobs, @parent, @size, @created, @addedAt)');
    this.#delImage = db.prepare('DELETE FROM images WHERE id = ?');
    this.#putChains = db.prepare('UPDATE images SET chain_ids = ? WHERE id = ?');
    this.#getLayer = db.prepare<[string], { chain_id: string; diff_id: string; parent: string | null; size: number }>('SELECT * FROM layers WHERE chain_id = ?');
    this.#putLayer = db.prepare('INSERT OR IGNORE INTO layers(chain_id, diff_id, parent, size, created_at) VALUES (?, ?, ?, ?, ?)');
    this.#delLayer = db.prepare('DELETE FROM layers WHERE chain_id = ?');
    // A row whose chain_ids is not JSON counts as a user of every layer: json_each would fail on it, and
    // its layers must outlive the other images until it is removed itself.
    this.#layerUsers = db.prepare<[string], { n: number }>(
      "SELECT (SELECT count(*) FROM images, json_each(CASE WHEN json_valid(images.chain_ids) THEN images.chain_ids ELSE '[]' END) WHERE json_each.value = ?) + (SELECT count(*) FROM images WHERE NOT json_valid(chain_ids)) AS n",
    );
  }

  getImage(id: string): ImageRecord | undefined {
    const row = this.#getImage.get(id);
    return row && toImage(row, this.#rewriteChains);
  }

  listImages(): ImageRecord[] {
    return this.#allImages.all().map((r) => toImage(r, this.#rewriteChains));
  }

  /** Up to two image ids starting with `sha256:<prefix>`; two means the prefix is ambiguous. */
  imageIdsWithPrefix(hexPrefix: string): string[] {
    const lo = `sha256:${hexPrefix}`;
    const hi = `sha256:${hexPrefix}\uffff`;
    return this.#idsByPrefix.all(lo, hi).map((r) => r.id);
  }

  getRef(ref: string): RefRecord | undefined {
    const r = this.#getRef.get(ref);
    return r && { ref: r.ref, imageId: r.image_id, kind: r.kind, createdAt: r.created_at };
  }

  refsOf(imageId: string): RefRecord[] {
    return this.#refsOf.all(imageId).map((r) => ({ ref: r.ref, imageId: r.image_id, kind: r.kind, createdAt: r.created_at }));
  }

  allRefs(): RefRecord[] {
    return this.#allRefs.all().map((r) => ({ ref: r.ref, imageId: r.image_id, kind: r.kind, createdAt: r.created_at }));
  }

  getLayer(chainId: string): LayerRecord | undefined {
    const r = this.#getLayer.get(chainId);
    return r && { chainId: r.chain_id, diffId: r.diff_id, parent: r.parent, size: r.size };
  }

  /** Number of images whose layer chain includes this layer. */
  layerUsers(chainId: string): number {
    return this.#layerUsers.get(chainId)?.n ?? 0;
  }

  /** Records layers, the image and its references in one transaction (the pull's commit point). */
  saveImage(image: ImageRecord, layers: LayerRecord[], refs: { ref: string; kind: 'tag' | 'digest' }[]): void {
    const now = Date.now();
    this.#db.transaction(() => {
      for (const l of layers) this.#putLayer.run(l.chainId, l.diffId, l.parent, l.size, now);
      this.#putImage.run({
        id: image.id,
        config: image.config,
        chainIds: JSON.stringify(image.chainIds),
        layerBlobs: JSON.stringify(image.layerBlobs),
        parent: image.parent,
        size: image.size,
        created: image.created,
        addedAt: image.addedAt,
      });
      for (const r of refs) this.#putRef.run(r.ref, image.id, r.kind, now);
    })();
  }

  putRef(ref: string, imageId: string, kind: 'tag' | 'digest'): void {
    this.#putRef.run(ref, imageId, kind, Date.now());
  }

  deleteRef(ref: string): void {
    this.#delRef.run(ref);
  }

  /** Deletes an image row (its refs go with it) and returns the layers no other image uses. */
  deleteImage(id: string): string[] {
    return this.#db.transaction(() => {
      const img = this.getImage(id);
      if (!img) return [];
      this.#delImage.run(id);
      const orphans: string[] = [];
      for (const chainId of [...img.chainIds].reverse()) {
        if (this.layerUsers(chainId) === 0) {
          this.#delLayer.run(chainId);
          orphans.push(chainId);
        }
      }
      return orphans;
    })();
  }

  transaction<T>(fn: () => T): T {
    return this.#db.transaction(fn)();
  }
}
