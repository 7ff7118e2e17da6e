/**
 * Legacy links (`--link name:alias`) as dockerd keeps them. On the default bridge they live in
 * HostConfig.Links, stored as `/<child>:/<parent>/<alias>` (inspect's form), and become /etc/hosts
 * entries (alias, the child's hostname and name) at start. On a user-defined network they are the
 * endpoint's Links (what the docker CLI sends), and the alias resolves to the linked container's
 * address on that network.
 */
import { internal, invalidArgument, notFound } from '../../lib/errors.js';
import type { ContainerRecord, HostConfig } from './container-model.js';
import type { ContainerLookup } from './container-namespaces.js';

/** dockerd's ParseLink: `name`, `name:alias`, or the stored `/name:/parent/alias`. */
export function parseLink(val: string): { name: string; alias: string } {
  if (val === '') throw invalidArgument('empty string specified for links');
  const parts = val.split(':');
  if (parts.length > 2) throw invalidArgument(`bad format for links: ${val}`);
  if (parts.length === 1) return { name: val, alias: val };
  const [name, alias] = parts as [string, string];
  if (name.startsWith('/')) return { name: name.slice(1), alias: alias.slice(alias.lastIndexOf('/') + 1) };
  return { name, alias };
}

const isDefaultBridge = (mode: string | undefined) => !mode || mode === 'bridge' || mode === 'default';

/** Create-time checks and the stored form of HostConfig.Links. */
export function normalizeLinks(hc: HostConfig, parentName: string, lookup: ContainerLookup): HostConfig {
  const links = (hc.Links as unknown[] | null | undefined) ?? [];
  if (links.length === 0) return hc;
  for (const l of links) if (typeof l !== 'string') throw invalidArgument(`bad format for links: ${JSON.stringify(l)}`);
  const mode = hc.NetworkMode;
  if (mode === 'host') throw invalidArgument("conflicting options: host type networking can't be used with links. This would result in undefined behavior");
  if (mode?.startsWith('container:')) throw invalidArgument("conflicting options: container type network can't be used with links. This would result in undefined behavior");
  // dockerd registers HostConfig.Links only on the default bridge (inspect shows none elsewhere);
  // on other networks the endpoint's Links count.
  if (!isDefaultBridge(mode)) return { ...hc, Links: null };
  const stored = (links as string[]).map((l) => {
    const { name, alias } = parseLink(l);
    let child = lookup(name);
    if (!child) throw invalidArgument(`could not get container for ${name}: No such container: ${name}`);
    for (let hops = 0; child.hostConfig.NetworkMode?.startsWith('container:') && hops < 16; hops++) {
      const next: string = child.hostConfig.NetworkMode.slice('container:'.length);
      const found = lookup(next);
      if (!found) throw invalidArgument(`could not get container for ${next}: No such container: ${next}`);
      child = found;
    }
    if (child.hostConfig.NetworkMode === 'host') throw invalidArgument("conflicting options: host type networking can't be used with links. This would result in undefined behavior");
    return `/${child.name}:/${parentName}/${alias}`;
  });
  return { ...hc, Links: stored };
}

/** `names:ip` entries for /etc/hosts that make a container's links resolve; dockerd's errors for dead links. */
export function linkHostEntries(c: ContainerRecord, lookup: ContainerLookup): string[] {
  const out: string[] = [];
  const add = (names: string[], ip: unknown) => {
    // One line per link, its names space-separated (as dockerd writes /etc/hosts).
    if (typeof ip === 'string' && ip) out.push(`${[...new Set(names.filter(Boolean))].join(' ')}:${ip}`);
  };
  if (isDefaultBridge(c.hostConfig.NetworkMode)) {
    for (const l of (c.hostConfig.Links as string[] | null | undefined) ?? []) {
      const { name, alias } = parseLink(l);
      const child = lookup(name);
      // A 500 as with dockerd: its start reports every failure to build the spec as a system error.
      if (!child || child.state.status !== 'running') throw internal(`Cannot link to a non running container: /${name} AS /${c.name}/${alias}`);
      add([alias, child.config.Hostname ?? '', child.name], child.network.endpoints.bridge?.IPAddress);
    }
  }
  // Links of user-defined networks' endpoints: the alias answers with the container's address there.
  for (const [net, ep] of Object.entries(c.networkingConfig ?? {})) {
    for (const l of ((ep as { Links?: unknown } | null)?.Links as unknown[] | null | undefined) ?? []) {
      if (typeof l !== 'string' || isDefaultBridge(net)) continue;
      const { name, alias } = parseLink(l);
      const child = lookup(name);
      if (!child || child.state.status !== 'running') continue;
      add([alias], child.network.endpoints[net]?.IPAddress);
    }
  }
  return out;
}

/** Whether `parent` links to the container named `childName` (default bridge or an endpoint's Links). */
export function linksTo(parent: ContainerRecord, childName: string): boolean {
  const names = (links: unknown) => ((links as unknown[] | null | undefined) ?? []).some((l) => typeof l === 'string' && parseLink(l).name === childName);
  if (isDefaultBridge(parent.hostConfig.NetworkMode) && names(parent.hostConfig.Links)) return true;
  return Object.values(parent.networkingConfig ?? {}).some((ep) => names((ep as { Links?: unknown } | null)?.Links));
}

/**
 * `docker rm --link /parent/alias`: the parent's HostConfig without that link. dockerd's errors: a
 * name without a parent is the container's own name, a link not there is no such container.
 */
export function withoutLink(linkName: string, lookup: ContainerLookup): { parent: ContainerRecord; hostConfig: HostConfig } {
  const name = linkName.startsWith('/') ? linkName : `/${linkName}`;
  const cut = name.lastIndexOf('/');
  if (cut === 0) throw internal('Conflict, cannot remove the default link name of the container');
  const parent = lookup(name.slice(1, cut));
  const alias = name.slice(cut + 1);
  const links = ((parent?.hostConfig.Links as string[] | null | undefined) ?? []).filter((l) => parseLink(l).alias !== alias);
  if (!parent || links.length === ((parent.hostConfig.Links as string[] | null | undefined) ?? []).length) throw notFound(`No such container: ${linkName}`);
  return { parent, hostConfig: { ...parent.hostConfig, Links: links.length ? links : null } };
}

/** Stored links after a container was renamed (as parent or as child): undefined when none changes. */
export function renamedLinks(hc: HostConfig, oldName: string, newName: string): string[] | undefined {
  const links = (hc.Links as string[] | null | undefined) ?? [];
  const out = links.map((l) => {
    if (!l.startsWith('/')) return l;
    const [child = '', alias = ''] = l.split(':');
    const cut = alias.lastIndexOf('/');
    const parent = alias.slice(1, cut);
    return `/${child.slice(1) === oldName ? newName : child.slice(1)}:/${parent === oldName ? newName : parent}/${alias.slice(cut + 1)}`;
  });
  return out.some((l, i) => l !== links[i]) ? out : undefined;
}
