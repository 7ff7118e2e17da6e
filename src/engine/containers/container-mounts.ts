/**
 * The mounts a container sees, as `{source, destination, rw}`: the one list the file access of
 * `docker cp` resolves paths against (a path that crosses a mount's destination lands in its
 * source): the /etc files the runtime binds, then the container's resolved mount points (binds and
 * volumes; a tmpfs has no host source to reach, so a path under one is not served), or, for records
 * written before mount points were stored, HostConfig.Binds and Mounts of type bind. Order matters: a later mount at the same
 * destination hides an earlier one, as at mount time.
 */
import { join } from 'node:path';
import type { RootMount } from '../../lib/in-root-fs.js';
import type { ContainerRecord } from './container-model.js';

export function containerMountPoints(c: ContainerRecord): RootMount[] {
  const out: RootMount[] = [];
  const hc = c.hostConfig;
  // The files the runtime binds over /etc (they show the container's own hostname, hosts, DNS).
  const rwEtc = !hc.ReadonlyRootfs;
  if (c.hostnamePath) out.push({ source: c.hostnamePath, destination: '/etc/hostname', rw: rwEtc });
  if (c.hostsPath) out.push({ source: c.hostsPath, destination: '/etc/hosts', rw: rwEtc });
  if (c.resolvConfPath) out.push({ source: c.resolvConfPath, destination: '/etc/resolv.conf', rw: rwEtc });
  if (c.mountPoints) {
    for (const mp of c.mountPoints) {
      if (mp.Type === 'tmpfs') continue;
      out.push({ source: mp.Subpath ? join(mp.Source, mp.Subpath) : mp.Source, destination: mp.Destination, rw: mp.RW });
    }
    return out;
  }
  for (const b of hc.Binds ?? []) {
    const [source = '', destination = '', mode = ''] = b.split(':');
    if (!source.startsWith('/') || !destination.startsWith('/')) continue; // named volumes: not bind sources
    out.push({ source, destination, rw: !mode.split(',').includes('ro') });
  }
  for (const m of hc.Mounts ?? []) {
    if (m.Type === 'bind' && m.Source?.startsWith('/') && m.Target?.startsWith('/')) out.push({ source: m.Source, destination: m.Target, rw: !m.ReadOnly });
  }
  return out;
}
