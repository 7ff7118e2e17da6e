/** A container's resolved mount points as the runtime spec's mounts. */
import { lstat, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { invalidArgument } from '../../lib/errors.js';
import type { ContainerMount } from '../../runtime/build-spec.js';
import type { MountPointRecord } from './volume-model.js';

export async function specMounts(points: MountPointRecord[]): Promise<ContainerMount[]> {
  const out: ContainerMount[] = [];
  for (const mp of points) {
    const rw = mp.RW ? 'rw' : 'ro';
    if (mp.Type === 'tmpfs') {
      out.push({ destination: mp.Destination, type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'noexec', ...(mp.TmpfsOptions ?? []), ...(mp.RW ? [] : ['ro'])] });
      continue;
    }
    const source = mp.Subpath ? await subpathSource(mp.Source, mp.Subpath) : mp.Source;
    if (mp.CreateSource) await lstat(source).catch(() => mkdir(source, { recursive: true, mode: 0o755 }));
    out.push({ destination: mp.Destination, type: 'bind', source, options: [mp.NonRecursive ? 'bind' : 'rbind', mp.Propagation || 'rprivate', rw] });
  }
  return out;
}

/** `Subpath` inside a volume, walked with lstat so a symlink in the volume cannot lead outside it. */
async function subpathSource(root: string, subpath: string): Promise<string> {
  let cur = root;
  for (const part of subpath.split('/').filter((p) => p && p !== '.')) {
    if (part === '..') throw invalidArgument('subpath must be a relative path within the volume');
    cur = join(cur, part);
    const st = await lstat(cur).catch(() => undefined);
    if (!st) throw invalidArgument(`cannot access path ${cur}: no such file or directory`);
    if (st.isSymbolicLink()) throw invalidArgument(`cannot access path ${cur}: subpath crosses a symlink`);
  }
  return cur;
}
