/**
 * `docker system df`: what images, containers, volumes and the build cache hold on disk, and how
 * much of it nothing uses (dockerd's counting: an image is active while a container uses it, a
 * container while it runs, a volume while a container refers to it).
 */
import type { ImageService, ImageView } from './images/image-service.js';
import type { ContainerService } from './containers/container-service.js';
import type { ContainerRecord } from './containers/container-model.js';
import { isRunningLike } from './containers/container-model.js';
import { containerSize } from './containers/container-inspect-fs.js';
import type { VolumeService } from './volumes/volume-service.js';
import type { VolumeRecord } from './volumes/volume-model.js';

export interface UsageTotals {
  activeCount: number;
  totalCount: number;
  reclaimable: number;
  totalSize: number;
}

export interface ImageUsageItem {
  view: ImageView;
  size: number;
  sharedSize: number;
  containers: number;
}

export interface ContainerUsageItem {
  record: ContainerRecord;
  sizeRw: number;
  sizeRootFs: number;
}

export interface VolumeUsageItem {
  record: VolumeRecord;
  size: number;
  refCount: number;
}

/** Build cache records and totals, as the builder reports them (absent: no build cache). */
export interface BuildCacheUsage {
  items: Record<string, unknown>[];
  totals: UsageTotals;
}

export interface DiskUsageReport {
  images?: { items: ImageUsageItem[]; totals: UsageTotals };
  containers?: { items: ContainerUsageItem[]; totals: UsageTotals };
  volumes?: { items: VolumeUsageItem[]; totals: UsageTotals };
  buildCache?: BuildCacheUsage;
}

export type DiskUsageType = 'image' | 'container' | 'volume' | 'build-cache';

export interface DiskUsageDeps {
  images: ImageService;
  containers: ContainerService;
  volumes: VolumeService;
  /** The builder's cache usage, once there is a builder. */
  buildCache?: () => Promise<BuildCacheUsage>;
}

const zero = (): UsageTotals => ({ activeCount: 0, totalCount: 0, reclaimable: 0, totalSize: 0 });

export class DiskUsageService {
  readonly #deps: DiskUsageDeps;

  constructor(deps: DiskUsageDeps) {
    this.#deps = deps;
  }

  async report(types: ReadonlySet<DiskUsageType>): Promise<DiskUsageReport> {
    const [images, containers, volumes, buildCache] = await Promise.all([
      types.has('image') ? this.#images() : undefined,
      types.has('container') ? this.#containers() : undefined,
      types.has('volume') ? this.#volumes() : undefined,
      types.has('build-cache') ? (this.#deps.buildCache?.() ?? Promise.resolve({ items: [], totals: zero() })) : undefined,
    ]);
    return { images, containers, volumes, buildCache };
  }

  #images(): { items: ImageUsageItem[]; totals: UsageTotals } {
    const { images } = this.#deps;
    const views = images.list();
    // A layer counts once however many images share it; SharedSize is what an image shares with others.
    const layerSize = new Map<string, number>();
    for (const v of views) for (const id of v.record.chainIds) if (!layerSize.has(id)) layerSize.set(id, images.records.getLayer(id)?.size ?? 0);
    const totals = zero();
    totals.totalCount = views.length;
    for (const s of layerSize.values()) totals.totalSize += s;
    const items = views.map((view) => {
      const shared = view.record.chainIds.reduce((sum, id) => sum + (images.records.layerUsers(id) > 1 ? (layerSize.get(id) ?? 0) : 0), 0);
      const usage = images.usage(view.record.id);
      const containers = usage.running.length + usage.stopped.length;
      if (containers > 0) totals.activeCount++;
      else totals.reclaimable += view.record.size - shared;
      return { view, size: view.record.size, sharedSize: shared, containers };
    });
    return { items, totals };
  }

  async #containers(): Promise<{ items: ContainerUsageItem[]; totals: UsageTotals }> {
    const all = this.#deps.containers.all();
    const totals = zero();
    totals.totalCount = all.length;
    const items = await Promise.all(
      all.map(async (record) => {
        const size = await containerSize(this.#deps.containers, record).catch(() => ({ rw: 0, rootFs: 0 }));
        totals.totalSize += size.rw;
        if (isRunningLike(record.state)) totals.activeCount++;
        else totals.reclaimable += size.rw;
        return { record, sizeRw: size.rw, sizeRootFs: size.rootFs };
      }),
    );
    return { items, totals };
  }

  async #volumes(): Promise<{ items: VolumeUsageItem[]; totals: UsageTotals }> {
    const { volumes } = this.#deps;
    const all = volumes.list();
    const totals = zero();
    totals.totalCount = all.length;
    const items = await Promise.all(
      all.map(async (record) => {
        const size = await volumes.size(record).catch(() => -1);
        const refCount = volumes.usedBy(record.name).length;
        if (size !== -1) {
          totals.totalSize += size;
          if (refCount === 0) totals.reclaimable += size;
        }
        if (refCount > 0) totals.activeCount++;
        return { record, size, refCount };
      }),
    );
    return { items, totals };
  }
}
