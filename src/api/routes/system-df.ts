/** GET /system/df: the engine's disk usage report in dockerd's legacy (< 1.52) and per-type `*Usage` forms. */
import type { Router } from '../router.js';
import { queryBool, sendJson } from '../request.js';
import { versionBefore } from '../api-version.js';
import type { DiskUsageService, DiskUsageType, UsageTotals, ImageUsageItem } from '../../engine/disk-usage.js';
import type { ContainerService } from '../../engine/containers/container-service.js';
import type { VolumeService } from '../../engine/volumes/volume-service.js';
import { ContainerList } from '../container-list.js';
import { volumeJson } from './volumes.js';
import { invalidArgument } from '../../lib/errors.js';

const TYPES: readonly DiskUsageType[] = ['container', 'image', 'volume', 'build-cache'];

export function systemDfRoutes(r: Router, usage: DiskUsageService, containers: ContainerService, volumes: VolumeService): void {
  const list = new ContainerList(containers, () => undefined);
  r.on('GET', '/system/df', async (ctx) => {
    const asked = ctx.query.getAll('type');
    let types: Set<DiskUsageType>;
    if (versionBefore(ctx.version, '1.42') || asked.length === 0) types = new Set(TYPES);
    else {
      for (const t of asked) if (!TYPES.includes(t as DiskUsageType)) throw invalidArgument(`unknown object type: ${t}`);
      types = new Set(asked as DiskUsageType[]);
    }
    const current = !versionBefore(ctx.version, '1.52');
    const verbose = current && queryBool(ctx.query, 'verbose');
    const report = await usage.report(types);
    const old = versionBefore(ctx.version, '1.44');
    const now = Date.now();
    const images = report.images?.items.map((i) => imageJson(i, old));
    const ctrs = report.containers?.items.map((i) => ({ ...(JSON.parse(list.entry(i.record, now)) as Record<string, unknown>), SizeRw: i.sizeRw, SizeRootFs: i.sizeRootFs }));
    const vols = report.volumes?.items.map((i) => volumeJson(volumes, i.record, { size: i.size, refCount: i.refCount }));
    const out: Record<string, unknown> = {};
    // 1.52 keeps the legacy fields beside the new ones unless the client asked for `verbose` (dockerd).
    if (!verbose) {
      if (report.images?.totals.totalSize) out.LayersSize = report.images.totals.totalSize;
      if (images) out.Images = images;
      if (ctrs) out.Containers = ctrs;
      if (vols) out.Volumes = vols;
      if (report.buildCache) out.BuildCache = report.buildCache.items;
    }
    if (current) {
      if (report.images) out.ImageUsage = usageJson(report.images.totals, images!);
      if (report.containers) out.ContainerUsage = usageJson(report.containers.totals, ctrs!);
      if (report.volumes) out.VolumeUsage = usageJson(report.volumes.totals, vols!);
      if (report.buildCache) out.BuildCacheUsage = usageJson(report.buildCache.totals, report.buildCache.items);
    }
    sendJson(ctx, 200, out);
  });
}

/** POST /build/prune for a daemon without a build cache: nothing to delete (dockerd's answer shape). */
export function emptyBuildPruneRoute(r: Router): void {
  r.on('POST', '/build/prune', (ctx) => sendJson(ctx, 200, { CachesDeleted: [], SpaceReclaimed: 0 }));
}

function usageJson(t: UsageTotals, items: unknown[]): Record<string, unknown> {
  return { ActiveCount: t.activeCount, TotalCount: t.totalCount, Reclaimable: t.reclaimable, TotalSize: t.totalSize, ...(items.length ? { Items: items } : {}) };
}

function imageJson(i: ImageUsageItem, old: boolean): Record<string, unknown> {
  const v = i.view;
  return {
    Id: v.record.id,
    ParentId: v.record.parent,
    RepoTags: v.repoTags,
    RepoDigests: v.repoDigests,
    Created: Math.floor(Date.parse(v.record.created) / 1000) || 0,
    Size: i.size,
    SharedSize: i.sharedSize,
    ...(old ? { VirtualSize: i.size } : {}),
    Labels: v.config.config?.Labels ?? {},
    Containers: i.containers,
  };
}
