/**
 * Resolves a container's mount points from its create request the way dockerd does: first the
 * volumes of `VolumesFrom` containers, then `Binds` (`-v`), then `Mounts`, each replacing an earlier
 * one at the same destination; last an anonymous volume for each image VOLUME nothing else covers.
 * The volume service creates the volumes the result names; only a `Mounts` bind's source is looked at here.
 */
import { existsSync } from 'node:fs';
import { posix } from 'node:path';
import { invalidArgument } from '../../lib/errors.js';
import type { MountPointRecord } from './volume-model.js';

export interface MountSpecInput {
  Type?: string;
  Source?: string;
  Target?: string;
  ReadOnly?: boolean;
  BindOptions?: { Propagation?: string; NonRecursive?: boolean } | null;
  VolumeOptions?: { NoCopy?: boolean; Labels?: Record<string, string> | null; DriverConfig?: { Name?: string; Options?: Record<string, string> | null } | null; Subpath?: string } | null;
  TmpfsOptions?: { SizeBytes?: number; Mode?: number } | null;
}

export interface MountRequest {
  binds: string[];
  mounts: MountSpecInput[];
  volumesFrom: string[];
  /** The merged config's Volumes (image VOLUMEs and the request's own). */
  imageVolumes: string[];
  /** HostConfig.Tmpfs destinations: they cover an image VOLUME too. */
  tmpfs: string[];
  /** The mount points of another container, by id or name (throws for an unknown one). */
  mountPointsOf: (idOrName: string) => MountPointRecord[];
}

export type ResolvedMountPoint = MountPointRecord & { volumeOptions?: { driverOpts?: Record<string, string>; labels?: Record<string, string> } };

const PROPAGATIONS = new Set(['private', 'rprivate', 'shared', 'rshared', 'slave', 'rslave']);
const LABEL_MODES = new Set(['z', 'Z']);
const CONSISTENCY = new Set(['consistent', 'cached', 'delegated']);

/** dockerd's check of a `-v` mode string: each kind of option at most once. */
function validMode(mode: string): boolean {
  if (mode === '') return true;
  const counts = { rw: 0, label: 0, prop: 0, copy: 0, consistency: 0 };
  for (const o of mode.split(',')) {
    if (o === 'ro' || o === 'rw') counts.rw++;
    else if (LABEL_MODES.has(o)) counts.label++;
    else if (PROPAGATIONS.has(o)) counts.prop++;
    else if (o === 'nocopy' || o === 'copy') counts.copy++;
    else if (CONSISTENCY.has(o)) counts.consistency++;
    else return false;
  }
  return Object.values(counts).every((n) => n <= 1);
}

const hasOpt = (mode: string, o: string) => mode.split(',').includes(o);

function cleanTarget(t: string, spec: string): string {
  if (!t.startsWith('/')) throw invalidArgument(`invalid mount config for type "volume": invalid mount path: '${t}' mount path must be absolute`.replace('volume', spec));
  const c = posix.normalize(t).replace(/(.)\/$/, '$1');
  if (c === '/') throw invalidArgument("invalid specification: destination can't be '/'");
  return c;
}

function parseBind(raw: string): ResolvedMountPoint {
  const arr = raw.split(':');
  if (!arr[0] || arr.length > 3) throw invalidArgument(`invalid spec: ${raw}`);
  let source = '';
  let target: string;
  let mode = '';
  if (arr.length === 1) target = arr[0];
  else if (arr.length === 2) {
    if (validMode(arr[1]!)) throw invalidArgument(`invalid spec: ${raw}`);
    [source, target] = arr as [string, string];
  } else [source, target, mode] = arr as [string, string, string];
  if (!validMode(mode)) throw invalidArgument(`invalid mode: ${mode}`);
  if (!target.startsWith('/')) throw invalidArgument(`invalid spec: ${raw}: invalid mount config for type "${source.startsWith('/') ? 'bind' : 'volume'}": invalid mount path: '${target}' mount path must be absolute`);
  const destination = cleanTarget(target, 'volume');
  const rw = !hasOpt(mode, 'ro');
  const propagation = mode.split(',').find((o) => PROPAGATIONS.has(o));
  if (source.startsWith('/')) {
    return { Type: 'bind', Name: '', Source: posix.normalize(source), Destination: destination, Driver: '', Mode: mode, RW: rw, Propagation: propagation ?? 'rprivate', CreateSource: true };
  }
  if (propagation) throw invalidArgument(`invalid spec: ${raw}: invalid mount config for type "volume": field BindOptions must not be specified`);
  return { Type: 'volume', Name: source, Source: '', Destination: destination, Driver: 'local', Mode: mode || 'z', RW: rw, Propagation: '', CopyData: !hasOpt(mode, 'nocopy') };
}

function parseMount(m: MountSpecInput): ResolvedMountPoint {
  const type = m.Type ?? '';
  if (!m.Target) throw invalidArgument(`invalid mount config for type "${type}": field Target must not be empty`);
  const destination = cleanTarget(m.Target, type);
  const rw = !m.ReadOnly;
  switch (type) {
    case 'bind': {
      if (!m.Source) throw invalidArgument('invalid mount config for type "bind": field Source must not be empty');
      if (!m.Source.startsWith('/')) throw invalidArgument(`invalid mount config for type "bind": invalid mount path: '${m.Source}' mount path must be absolute`);
      if (!existsSync(m.Source)) throw invalidArgument(`invalid mount config for type "bind": bind source path does not exist: ${m.Source}`);
      const prop = m.BindOptions?.Propagation || 'rprivate';
      if (!PROPAGATIONS.has(prop)) throw invalidArgument(`invalid mount config for type "bind": invalid propagation mode: ${prop}`);
      return { Type: 'bind', Name: '', Source: posix.normalize(m.Source), Destination: destination, Driver: '', Mode: '', RW: rw, Propagation: prop, NonRecursive: !!m.BindOptions?.NonRecursive };
    }
    case 'volume': {
      if (m.BindOptions) throw invalidArgument('invalid mount config for type "volume": field BindOptions must not be specified');
      if (m.TmpfsOptions) throw invalidArgument('invalid mount config for type "volume": field TmpfsOptions must not be specified');
      const vo = m.VolumeOptions ?? {};
      const subpath = vo.Subpath ?? '';
      if (subpath) {
        if (!m.Source) throw invalidArgument('invalid mount config for type "volume": must not set Subpath when using anonymous volumes');
        const clean = posix.normalize(subpath);
        if (posix.isAbsolute(subpath) || clean === '..' || clean.startsWith('../')) throw invalidArgument('invalid mount config for type "volume": subpath must be a relative path within the volume');
      }
      const driver = vo.DriverConfig?.Name || 'local';
      return {
        Type: 'volume', Name: m.Source ?? '', Source: '', Destination: destination, Driver: driver, Mode: 'z', RW: rw, Propagation: '',
        CopyData: !vo.NoCopy, ...(subpath ? { Subpath: posix.normalize(subpath) } : {}),
        volumeOptions: { driverOpts: vo.DriverConfig?.Options ?? undefined, labels: vo.Labels ?? undefined },
      };
    }
    case 'tmpfs': {
      if (m.Source) throw invalidArgument('invalid mount config for type "tmpfs": field Source must not be specified');
      const opts: string[] = [];
      if (m.TmpfsOptions?.SizeBytes) opts.push(`size=${m.TmpfsOptions.SizeBytes}`);
      if (m.TmpfsOptions?.Mode) opts.push(`mode=${m.TmpfsOptions.Mode.toString(8)}`);
      return { Type: 'tmpfs', Name: '', Source: '', Destination: destination, Driver: '', Mode: '', RW: rw, Propagation: '', TmpfsOptions: opts };
    }
    default:
      throw invalidArgument(`invalid mount config for type "${type}": mount type unknown`);
  }
}

export function resolveMountPoints(req: MountRequest): ResolvedMountPoint[] {
  const byDest = new Map<string, ResolvedMountPoint>();
  for (const spec of req.volumesFrom) {
    if (!spec) throw invalidArgument('volumes-from specification cannot be an empty string');
    const [id = '', mode = ''] = spec.split(/:(.*)/s);
    if (mode && (!validMode(mode) || mode.split(',').some((o) => PROPAGATIONS.has(o) || o === 'nocopy' || o === 'copy'))) throw invalidArgument(`invalid mode: ${mode}`);
    for (const m of req.mountPointsOf(id)) {
      byDest.set(m.Destination, { ...m, RW: m.RW && !hasOpt(mode, 'ro'), CopyData: false });
    }
  }
  const explicit = new Set<string>();
  for (const b of req.binds) {
    const mp = parseBind(b);
    if (explicit.has(mp.Destination) || req.tmpfs.includes(mp.Destination)) throw invalidArgument(`Duplicate mount point: ${mp.Destination}`);
    explicit.add(mp.Destination);
    byDest.set(mp.Destination, mp);
  }
  for (const m of req.mounts) {
    const mp = parseMount(m);
    if (explicit.has(mp.Destination)) throw invalidArgument(`Duplicate mount point: ${m.Target}`);
    explicit.add(mp.Destination);
    byDest.set(mp.Destination, mp);
  }
  const tmpfs = new Set(req.tmpfs.map((t) => posix.normalize(t)));
  for (const v of req.imageVolumes) {
    const dest = cleanTarget(v, 'volume');
    if (byDest.has(dest) || tmpfs.has(dest)) continue;
    byDest.set(dest, { Type: 'volume', Name: '', Source: '', Destination: dest, Driver: 'local', Mode: '', RW: true, Propagation: '', CopyData: true });
  }
  // Parents before children, as dockerd sorts them: a mount inside another must come after it.
  return [...byDest.values()].sort((a, b) => depth(a.Destination) - depth(b.Destination));
}

const depth = (p: string) => p.split('/').filter(Boolean).length;
