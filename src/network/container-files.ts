/**
 * The contents of a container's /etc/resolv.conf and /etc/hosts, following dockerd (the one place
 * that writes them; engine/networks/container-networking.ts asks for them at each start):
 *  - on a network with DNS (user-defined bridge) resolv.conf points at the embedded DNS, 127.0.0.11,
 *    which Berth forwards to aardvark-dns on the network's gateway;
 *  - otherwise it is the host's file without loopback nameservers (they mean nothing inside the
 *    container), falling back to Google's public servers when none remain;
 *  - with the host network it is the host's file unchanged.
 */
import { EMBEDDED_DNS_IP } from './endpoint-plumbing.js';
import type { ResolvConf } from './host-routes.js';

export interface ResolvConfOptions {
  /** The host's parsed resolv.conf. */
  host: ResolvConf;
  /** True when the container is on at least one network with DNS. */
  embeddedDns: boolean;
  hostNetwork?: boolean;
  dns?: string[];
  dnsSearch?: string[];
  dnsOptions?: string[];
  ipv6?: boolean;
}

const FALLBACK_V4 = ['8.8.8.8', '8.8.4.4'];
const FALLBACK_V6 = ['2001:4860:4860::8888', '2001:4860:4860::8844'];

const isLoopback = (ip: string) => ip.startsWith('127.') || ip === '::1';

export function resolvConfText(o: ResolvConfOptions): string {
  const search = o.dnsSearch?.length ? o.dnsSearch : o.host.search;
  let options = o.dnsOptions?.length ? o.dnsOptions : o.host.options;
  let servers: string[];
  if (o.embeddedDns && !o.hostNetwork) {
    servers = [EMBEDDED_DNS_IP];
    if (!options.some((x) => x.startsWith('ndots:'))) options = [...options, 'ndots:0'];
  } else if (o.dns?.length) {
    servers = o.dns;
  } else if (o.hostNetwork) {
    servers = o.host.nameservers;
  } else {
    servers = o.host.nameservers.filter((s) => !isLoopback(s));
    if (servers.length === 0) servers = o.ipv6 ? [...FALLBACK_V4, ...FALLBACK_V6] : FALLBACK_V4;
  }
  const lines = servers.map((s) => `nameserver ${s}`);
  if (search.length) lines.push(`search ${search.join(' ')}`);
  if (options.length) lines.push(`options ${options.join(' ')}`);
  return lines.join('\n') + '\n';
}

export interface HostsOptions {
  /** The host's /etc/hosts, for a container on the host network: its entries replace the localhost ones. */
  base?: string;
  hostname: string;
  domainname?: string;
  /** The container's own addresses (first network first); empty with the host network. */
  addresses: string[];
  /** `name:ip` entries (--add-host) and link entries, appended in order. */
  extraHosts?: string[];
  ipv6: boolean;
}

export function hostsText(o: HostsOptions): string {
  const lines = o.base !== undefined ? o.base.replace(/\n$/, '').split('\n') : ['127.0.0.1\tlocalhost'];
  if (o.ipv6 && o.base === undefined) {
    lines.push('::1\tlocalhost ip6-localhost ip6-loopback', 'fe00::\tip6-localnet', 'ff00::\tip6-mcastprefix', 'ff02::1\tip6-allnodes', 'ff02::2\tip6-allrouters');
  }
  for (const entry of o.extraHosts ?? []) {
    const i = entry.indexOf(':');
    if (i > 0) lines.push(`${entry.slice(i + 1)}\t${entry.slice(0, i)}`);
  }
  const names = o.domainname ? `${o.hostname}.${o.domainname} ${o.hostname}` : o.hostname;
  for (const ip of o.addresses) lines.push(`${ip}\t${names}`);
  return lines.join('\n') + '\n';
}
