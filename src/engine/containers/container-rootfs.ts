/**
 * The small files dockerd bind-mounts into every container: /etc/hostname, /etc/hosts and
 * /etc/resolv.conf, written into the container's dir once its network is prepared.
 */
import { writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';

/** /etc/hostname, /etc/hosts and /etc/resolv.conf as dockerd writes them for a container. */
export async function writeEtcFiles(opts: {
  hostnamePath: string;
  hostsPath: string;
  resolvConfPath: string;
  hostname: string;
  domainname?: string;
  ip?: string;
  extraHosts: string[];
  hostNetwork: boolean;
  dns?: string[];
  dnsSearch?: string[];
  dnsOptions?: string[];
  nameservers?: string[];
  /** Whole texts from the network service replace the generated ones. */
  resolvConf?: string;
  hosts?: string;
}): Promise<void> {
  const fqdn = opts.domainname ? `${opts.hostname}.${opts.domainname} ${opts.hostname}` : opts.hostname;
  let hosts: string;
  if (opts.hostNetwork) {
    hosts = readHostFile('/etc/hosts') ?? '127.0.0.1\tlocalhost\n';
  } else {
    hosts = '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::\tip6-localnet\nff00::\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n';
  }
  for (const h of opts.extraHosts) {
    const i = h.indexOf(':');
    if (i <= 0) continue;
    hosts += `${h.slice(i + 1)}\t${h.slice(0, i)}\n`;
  }
  if (!opts.hostNetwork && opts.ip) hosts += `${opts.ip}\t${fqdn}\n`;
  await Promise.all([
    writeFile(opts.hostnamePath, `${opts.hostname}\n`),
    writeFile(opts.hostsPath, opts.hosts ?? hosts),
    writeFile(opts.resolvConfPath, opts.resolvConf ?? resolvConf(opts)),
  ]);
}

function readHostFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The host's resolv.conf without loopback nameservers (unreachable from a container's namespace). */
function resolvConf(opts: { dns?: string[]; dnsSearch?: string[]; dnsOptions?: string[]; nameservers?: string[]; hostNetwork: boolean }): string {
  const host = readHostFile('/etc/resolv.conf') ?? '';
  let servers: string[] = [];
  let search: string[] = [];
  let options: string[] = [];
  for (const line of host.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[0] === 'nameserver' && f[1]) servers.push(f[1]);
    else if (f[0] === 'search') search = f.slice(1);
    else if (f[0] === 'options') options = f.slice(1);
  }
  if (!opts.hostNetwork) servers = servers.filter((s) => !s.startsWith('127.') && s !== '::1');
  if (opts.nameservers?.length) servers = opts.nameservers;
  if (opts.dns?.length) servers = opts.dns;
  if (!opts.hostNetwork && servers.length === 0) servers = ['8.8.8.8', '8.8.4.4'];
  if (opts.dnsSearch?.length) search = opts.dnsSearch;
  if (opts.dnsOptions?.length) options = opts.dnsOptions;
  let out = '';
  if (search.length) out += `search ${search.join(' ')}\n`;
  for (const s of servers) out += `nameserver ${s}\n`;
  if (options.length) out += `options ${options.join(' ')}\n`;
  return out;
}
