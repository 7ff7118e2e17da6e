/**
 * The mounts a container sees, as `{source, destination, rw}`: the one list the file access of
 * `docker cp` resolves paths against (a path that crosses a mount's destination lands in its
 * source). Today: the /etc files the runtime binds, HostConfig.Binds with a host path and HostConfig.Mounts of type bind; named
 * volumes add their resolved mount points here. Order matters: a later mount at the same
 * destination hides an earlier one, as at mount time.
 */
import type { RootMount } from '../../lib/in-root-fs.js';
import type { ContainerRecord } from '../container-model.js';

export function containerMountPoints(c: ContainerRecord): RootMount[] {
  const out: RootMount[] = [];
  const hc = c.hostConfig;
  // The files the runtime binds over /etc (they show the container's own hostname, hosts, DNS).
  const rwEtc = !hc.ReadonlyRootfs;
  if (c.hostnamePath) out.push({ source: c.hostnamePath, destination: '/etc/hostname', rw: rwEtc });
  if (c.hostsPath) out.push({ source: c.hostsPath, destination: '/etc/hosts', rw: rwEtc });
  if (c.resolvConfPath) out.push({ source: c.resolvConfPath, destination: '/etc/resolv.conf', rw: rwEtc });
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
