/**
 * `cachefrom` as dockerd's classic builder reads it. A step's image may come from a named image
 * (pulled, or built elsewhere) when that image's history continues the parent's with the same
 * instruction: the parent's history entries and layers are a prefix of the source's, and the
 * source's next entry was made by the same instruction text (`created_by`). The step's image is
 * then the parent plus that entry and its layer (the source itself at its last entry), made
 * without running anything. Local step-cache hits are taken only from the named images' chains.
 */
import type { Digest } from '../../lib/digest.js';
import type { ContainerConfig, HistoryEntry, ImageConfig } from '../../lib/oci.js';
import { tryLookupImage } from '../images/image-lookup.js';
import type { ImageService } from '../images/image-service.js';
import { writeStepImage, type StepImage } from './image-writer.js';

const sameEntry = (a: HistoryEntry, b: HistoryEntry) =>
  a.created === b.created && a.created_by === b.created_by && (a.author ?? '') === (b.author ?? '') && (a.comment ?? '') === (b.comment ?? '') && !!a.empty_layer === !!b.empty_layer;

/** dockerd's isValidParent: the parent's history and layers are where the source starts. */
function continues(source: ImageConfig, parent: ImageConfig | undefined): boolean {
  const sh = source.history ?? [];
  if (sh.length === 0) return false;
  const ph = parent?.history ?? [];
  const pd = parent?.rootfs?.diff_ids ?? [];
  if (!parent || (ph.length === 0 && pd.length === 0)) return true;
  const sd = source.rootfs?.diff_ids ?? [];
  if (ph.length >= sh.length || pd.length > sd.length) return false;
  return ph.every((h, i) => sameEntry(h, sh[i]!)) && pd.every((d, i) => d === sd[i]);
}

export class CacheSources {
  #sources: StepImage[] = [];
  /** Every image in the named images' parent chains. */
  readonly chain = new Set<string>();

  constructor(private readonly images: ImageService, names: string[]) {
    for (const name of names) {
      // as dockerd: a cache-from image that is not there is skipped
      const top = tryLookupImage(images.records, name)?.image;
      if (top) this.#sources.push({ record: top, config: images.config(top) });
      for (let rec = top; rec && !this.chain.has(rec.id); rec = rec.parent ? images.records.getImage(rec.parent) : undefined) this.chain.add(rec.id);
    }
  }

  /** The step's image from a source whose next history entry is `createdBy`, or undefined. */
  async match(parent: StepImage, createdBy: string, config: ContainerConfig, author?: string): Promise<StepImage | undefined> {
    const at = parent.record ? (parent.config.history ?? []).length : 0;
    const parentConfig = parent.record ? parent.config : undefined;
    for (const source of this.#sources) {
      const history = source.config.history ?? [];
      if (!continues(source.config, parentConfig) || history[at]?.created_by !== createdBy) continue;
      // as dockerd: once a source matched, later steps follow only that one
      this.#sources = [source];
      if (history.length - 1 === at) return source;
      return this.#restore(parent, source, at, config, author);
    }
    return undefined;
  }

  /** dockerd's restoreCachedImage: the parent plus the source's entry at `at` and its layer, if any. */
  async #restore(parent: StepImage, source: StepImage, at: number, config: ContainerConfig, author?: string): Promise<StepImage> {
    const history = source.config.history!;
    const entry = history[at]!;
    let layer;
    let layerBlob;
    if (!entry.empty_layer) {
      const index = history.slice(0, at).filter((h) => !h.empty_layer).length;
      const chainId = source.record!.chainIds[index] as Digest;
      const diffId = source.config.rootfs?.diff_ids[index] as Digest;
      const blob = source.record!.layerBlobs[index];
      layer = { chainId, diffId, tarSize: blob?.size ?? 0, size: this.images.records.getLayer(chainId)?.size ?? 0 };
      layerBlob = blob;
    }
    return writeStepImage(this.images, { parent, config, createdBy: entry.created_by ?? '', layer, layerBlob, history: entry, author: author ?? source.config.author });
  }
}
