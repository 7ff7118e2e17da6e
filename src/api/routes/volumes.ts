/** /volumes/...: Docker's volume objects over the engine's volume service. */
import type { Router } from '../router.js';
import { readJsonObject, sendJson, sendNoContent, queryBool, type RequestContext } from '../request.js';
import { parseFilters, matchLabels, filterBool } from '../filters.js';
import { versionBefore } from '../api-version.js';
import type { VolumeService } from '../../engine/volumes/volume-service.js';
import { isAnonymous, type VolumeRecord } from '../../engine/volumes/volume-model.js';
import { invalidArgument } from '../../lib/errors.js';

export function volumeRoutes(r: Router, volumes: VolumeService): void {
  r.on('POST', '/volumes/create', async (ctx) => {
    const body = await readJsonObject(ctx);
    const v = volumes.create({
      name: str(body.Name, 'Name'),
      driver: str(body.Driver, 'Driver'),
      driverOpts: strMap(body.DriverOpts, 'DriverOpts'),
      labels: strMap(body.Labels, 'Labels'),
    });
    sendJson(ctx, 201, volumeJson(volumes, v));
  });
  r.on('GET', '/volumes', (ctx) => listVolumes(ctx, volumes));
  r.on('GET', '/volumes/:name', (ctx) => sendJson(ctx, 200, volumeJson(volumes, volumes.get(ctx.params.name!))));
  r.on('DELETE', '/volumes/:name', async (ctx) => {
    await volumes.remove(ctx.params.name!, { force: queryBool(ctx.query, 'force') });
    sendNoContent(ctx);
  });
  r.on('POST', '/volumes/prune', async (ctx) => {
    const f = parseFilters(ctx.query.get('filters'), ['label', 'label!', 'all']);
    // From API 1.42 only anonymous volumes go, unless all=true (dockerd).
    const all = versionBefore(ctx.version, '1.42') || filterBool(f.get('all'), 'all') === true;
    const { deleted, reclaimed } = await volumes.prune(
      (v) => (all || isAnonymous(v)) && matchLabels(f.get('label'), v.labels) && !(f.get('label!') ?? []).some((l) => matchLabels([l], v.labels)),
    );
    sendJson(ctx, 200, { VolumesDeleted: deleted, SpaceReclaimed: reclaimed });
  });
}

function listVolumes(ctx: RequestContext, volumes: VolumeService): void {
  const f = parseFilters(ctx.query.get('filters'), ['dangling', 'driver', 'label', 'label!', 'name']);
  const dangling = filterBool(f.get('dangling'), 'dangling');
  const names = (f.get('name') ?? []).map((n) => {
    try {
      return new RegExp(n);
    } catch {
      throw invalidArgument(`invalid filter 'name=${n}'`);
    }
  });
  const drivers = f.get('driver') ?? [];
  const out = volumes.list().filter((v) => {
    if (dangling !== undefined && (volumes.usedBy(v.name).length === 0) !== dangling) return false;
    if (drivers.length && !drivers.includes(v.driver)) return false;
    if (names.length && !names.some((re) => re.test(v.name))) return false;
    if (!matchLabels(f.get('label'), v.labels)) return false;
    if ((f.get('label!') ?? []).some((l) => matchLabels([l], v.labels))) return false;
    return true;
  });
  sendJson(ctx, 200, { Volumes: out.map((v) => volumeJson(volumes, v)), Warnings: [] });
}

/** The Volume object; `usage` (system df) adds UsageData. */
export function volumeJson(volumes: VolumeService, v: VolumeRecord, usage?: { size: number; refCount: number }): Record<string, unknown> {
  return {
    CreatedAt: v.createdAt,
    Driver: v.driver,
    Labels: v.labels,
    Mountpoint: volumes.mountpoint(v),
    Name: v.name,
    Options: v.options,
    Scope: 'local',
    ...(usage ? { UsageData: { Size: usage.size, RefCount: usage.refCount } } : {}),
  };
}

/** Container create: what of the volume fields an API version may not use (dockerd's router checks). */
export function checkMountsForVersion(version: string, mounts: unknown): void {
  if (!versionBefore(version, '1.45') || !Array.isArray(mounts)) return;
  for (const m of mounts as { VolumeOptions?: { Subpath?: string } | null }[]) {
    if (m?.VolumeOptions?.Subpath) throw invalidArgument('VolumeOptions.Subpath needs API v1.45 or newer');
  }
}

function str(v: unknown, what: string): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw invalidArgument(`invalid JSON: ${what} must be a string`);
  return v;
}

function strMap(v: unknown, what: string): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string')) throw invalidArgument(`invalid JSON: ${what} must be a map of strings`);
  return v as Record<string, string>;
}
