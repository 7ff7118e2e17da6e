/**
 * Where to send requests for a registry domain: which base URLs, in which order, with or
 * without TLS verification. Loopback hosts and configured insecure registries get HTTPS without
 * verification first, then plain HTTP. Mirrors apply to Docker Hub pulls only.
 */
import { BlockList, isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { invalidArgument } from '../lib/errors.js';
import { DOCKER_HUB_DOMAIN } from './reference.js';

export interface RegistryOptions {
  /** Docker Hub mirrors, tried in order (`https://` is assumed without a scheme). */
  mirrors?: string[];
  /** `host[:port]` entries or CIDR ranges (`10.0.0.0/8`) allowed without verified TLS. */
  insecureRegistries?: string[];
}

export interface Endpoint {
  /** Origin such as `https://registry-1.docker.io` or `http://127.0.0.1:5000`. */
  base: URL;
  tlsVerify: boolean;
}

/** One registry (or mirror) and the endpoints to try for it, best first. */
export interface RegistryHost {
  name: string;
  endpoints: Endpoint[];
  mirror: boolean;
}

export const DOCKER_HUB_API_HOST = 'registry-1.docker.io';
const HUB_ALIASES = new Set([DOCKER_HUB_DOMAIN, 'index.docker.io', DOCKER_HUB_API_HOST, 'registry.hub.docker.com']);

export class RegistryHosts {
  readonly #mirrors: URL[];
  readonly #insecureNames = new Set<string>();
  readonly #insecureNets = new BlockList();
  readonly #loopback = new BlockList();

  constructor(opts: RegistryOptions = {}) {
    this.#mirrors = (opts.mirrors ?? []).map(parseMirror);
    for (const entry of opts.insecureRegistries ?? []) {
      const e = entry.replace(/^https?:\/\//, '').replace(/\/+$/, '');
      const cidr = /^(.+)\/(\d{1,3})$/.exec(e);
      if (cidr && isIP(cidr[1]!)) {
        const family = isIP(cidr[1]!) === 6 ? 'ipv6' : 'ipv4';
        this.#insecureNets.addSubnet(cidr[1]!, Number(cidr[2]), family);
      } else {
        this.#insecureNames.add(e.toLowerCase());
      }
    }
    this.#loopback.addSubnet('127.0.0.0', 8, 'ipv4');
    this.#loopback.addAddress('::1', 'ipv6');
  }

  /** Hosts for a pull from `domain`: mirrors first for Docker Hub. */
  async pullHosts(domain: string): Promise<RegistryHost[]> {
    if (!isDockerHub(domain)) return [await this.host(domain)];
    const mirrors: RegistryHost[] = [];
    for (const m of this.#mirrors) {
      const insecure = await this.isInsecure(m.host);
      mirrors.push({ name: m.host, mirror: true, endpoints: [{ base: m, tlsVerify: !insecure }] });
    }
    return [...mirrors, await this.host(domain)];
  }

  /** The registry itself (no mirrors): what logins and pushes use. */
  async host(domain: string): Promise<RegistryHost> {
    if (isDockerHub(domain)) {
      return { name: DOCKER_HUB_API_HOST, mirror: false, endpoints: [{ base: new URL(`https://${DOCKER_HUB_API_HOST}`), tlsVerify: true }] };
    }
    const https = new URL(`https://${domain}`);
    if (!(await this.isInsecure(domain))) return { name: domain, mirror: false, endpoints: [{ base: https, tlsVerify: true }] };
    return {
      name: domain,
      mirror: false,
      endpoints: [{ base: https, tlsVerify: false }, { base: new URL(`http://${domain}`), tlsVerify: false }],
    };
  }

  /** True for loopback addresses, `localhost`, and configured insecure registries. */
  async isInsecure(hostPort: string): Promise<boolean> {
    const lower = hostPort.toLowerCase();
    if (isDockerHub(lower)) return false;
    if (this.#insecureNames.has(lower)) return true;
    const host = hostOnly(lower);
    if (host === 'localhost' || this.#insecureNames.has(host)) return true;
    let addresses: Array<{ address: string; family: number }>;
    if (isIP(host)) {
      addresses = [{ address: host, family: isIP(host) }];
    } else {
      try {
        addresses = await lookup(host, { all: true });
      } catch {
        return false;
      }
    }
    return addresses.some(({ address, family }) => {
      const type = family === 6 ? 'ipv6' : 'ipv4';
      return this.#loopback.check(address, type) || this.#insecureNets.check(address, type);
    });
  }
}

export function isDockerHub(domain: string): boolean {
  return HUB_ALIASES.has(domain.toLowerCase());
}

/** `host:port` → `host`; `[::1]:5000` → `::1`. */
function hostOnly(hostPort: string): string {
  if (hostPort.startsWith('[')) return hostPort.slice(1, hostPort.indexOf(']'));
  if (isIP(hostPort) === 6) return hostPort;
  const colon = hostPort.lastIndexOf(':');
  return colon >= 0 ? hostPort.slice(0, colon) : hostPort;
}

function parseMirror(entry: string): URL {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(entry) ? entry : `https://${entry}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw invalidArgument(`invalid mirror: ${JSON.stringify(entry)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalidArgument(`invalid mirror: unsupported scheme in ${JSON.stringify(entry)}`);
  // The distribution API lives at the root; a path on a mirror entry is not used.
  return new URL(url.origin);
}
