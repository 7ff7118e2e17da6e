/** The compressed blob kept for a layer, by diff id (table layer_blobs): what push sends for it. */
import type { Db } from './db.js';
import type { Descriptor } from '../lib/oci.js';

export class LayerBlobRecords {
  readonly #get;
  readonly #put;
  readonly #del;

  constructor(db: Db) {
    this.#get = db.prepare<[string], { digest: string; media_type: string; size: number }>('SELECT digest, media_type, size FROM layer_blobs WHERE diff_id = ?');
    this.#put = db.prepare('INSERT OR REPLACE INTO layer_blobs(diff_id, digest, media_type, size) VALUES (?, ?, ?, ?)');
    this.#del = db.prepare('DELETE FROM layer_blobs WHERE diff_id = ?');
  }

  get(diffId: string): Descriptor | undefined {
    const r = this.#get.get(diffId);
    return r && { mediaType: r.media_type, digest: r.digest as Descriptor['digest'], size: r.size };
  }

  put(diffId: string, blob: Descriptor): void {
    this.#put.run(diffId, blob.digest, blob.mediaType, blob.size);
  }

  delete(diffId: string): void {
    this.#del.run(diffId);
  }
}
