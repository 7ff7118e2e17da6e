/**
 * Where to send requests for a registry domain: which base URLs, in which order, with or
 * without TLS verification, with which certs.d files. Every registry is HTTPS with verified
 * certificates unless it is insecure: then HTTPS without verification first, then plain HTTP.
 * Mirrors apply to Docker Hub pulls only.
 *
 * Insecure by default are loopback IP literals (127.0.0.0/8, ::1) and `localhost`, judged on
 * the name as written. dockerd also resolves other names and treats those that resolve to
 * loopback as insecure; Berth does not, so a registry reached by a DNS name always gets
 * verified TLS (and its tests can exercise verification on this host). Configured insecure
 * CIDR ranges are matched against resolved addresses as in dockerd, so
 * `--insecure-registry 127.0.0.0/8` restores dockerd's behaviour.
 */
import { BlockList, isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { invalidArgument } from '../lib/errors.js';
import { DEFAULT_CERTS_DIR, loadHostTls, type HostTls } from './certs-dir.js';
import { DOCKER_HUB_DOMAIN } from './reference.js';

export interface RegistryOptions {
  /** Docker Hub mirrors, tried in order (`https://` is assumed without a scheme). */
  mirrors?: string[];
  /** `host[:port]` entries or CIDR ranges (`10.0.0.0/8`) allowed without verified TLS. */
  insecureRegistries?: string[];
  /**
   * Root of the per-registry `<host[:port]>/{*.crt,*.cert,*.key}` directories. Default:
   * $BERTH_CERTS_D, else /etc/berth/certs.d.
   */
  certsDir?: string;
}

export interface Endpoint {
  /** Origin such as `https://registry-1.docker.io` or `http://127.0.0.1:5000`. */
  base: URL;
  tlsVerify: boolean;
  /** CAs and client certificate from certs.d (HTTPS endpoints only). */
  tls?: HostTls;
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
  #hasInsecureNets = false;
  readonly #loopback = new BlockList();
  readonly #certsDir: string;

  constructor(opts: RegistryOptions = {}) {
    this.#certsDir = opts.certsDir ?? (process.env.BERTH_CERTS_D || DEFAULT_CERTS_DIR);
    this.#mirrors = (opts.mirrors ?? []).map(parseMirror);
    for (const entry of opts.insecureRegistries ?? []) {
      const e = entry.replace(/^https?:\/\//, '').replace(/\/+$/, '');
      const cidr = /^(.+)\/(\d{1,3})$/.exec(e);
      if (cidr && isIP(cidr[1]!)) {
        const family = isIP(cidr[1]!) === 6 ? 'ipv6' : 'ipv4';
        this.#insecureNets.addSubnet(cidr[1]!, Number(cidr[2]), family);
        this.#hasInsecureNets = true;
      } else {
        this.#insecureNames.add(e.toLowerCase());
      }
    }
    this.#loopback.addSubnet('127.0.0.0', 8, 'ipv4');
    this.#loopback.addAddress('::1', 'ipv6');
    this.#loopback.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');
  }

  get certsDir(): string {
    return this.#certsDir;
  }

  /** The certs.d material for `hostPort`, if any (re-read each time). */
  tlsFor(hostPort: string): Promise<HostTls | undefined> {
    return loadHostTls(this.#certsDir, hostPort);
  }

  /** Hosts for a pull from `domain`: mirrors first for Docker Hub. */
  async pullHosts(domain: string): Promise<RegistryHost[]> {
    if (!isDockerHub(domain)) return [await this.host(domain)];
    const mirrors: RegistryHost[] = [];
    for (const m of this.#mirrors) {
      const insecure = await this.isInsecure(m.host);
      const tls = m.protocol === 'https:' ? await this.tlsFor(m.host) : undefined;
      mirrors.push({ name: m.host, mirror: true, endpoints: [{ base: m, tlsVerify: !insecure, ...(tls ? { tls } : {}) }] });
    }
    return [...mirrors, await this.host(domain)];
  }

  /** The registry itself (no mirrors): what logins and pushes use. */
  async host(domain: string): Promise<RegistryHost> {
    if (isDockerHub(domain)) {
      return { name: DOCKER_HUB_API_HOST, mirror: false, endpoints: [{ base: new URL(`https://${DOCKER_HUB_API_HOST}`), tlsVerify: true }] };
    }
    const https = new URL(`https://${domain}`);
    const tls = await this.tlsFor(domain);
    const withTls = tls ? { tls } : {};
    if (!(await this.isInsecure(domain))) return { name: domain, mirror: false, endpoints: [{ base: https, tlsVerify: true, ...withTls }] };
    return {
      name: domain,
      mirror: false,
      endpoints: [{ base: https, tlsVerify: false, ...withTls }, { base: new URL(`http://${domain}`), tlsVerify: false }],
    };
  }

  /**
   * True for loopback IP literals, `localhost`, and configured insecure registries (names, or
   * CIDR ranges matched against the resolved addresses).
   */
  async isInsecure(hostPort: string): Promise<boolean> {
    const lower = hostPort.toLowerCase();
    if (isDockerHub(lower)) return false;
    if (this.#insecureNames.has(lower)) return true;
    const host = hostOnly(lower);
    if (host === 'localhost' || this.#insecureNames.has(host)) return true;
    if (isIP(host)) return this.#matches(host, isIP(host), true);
    if (!this.#hasInsecureNets) return false;
    let addresses: Array<{ address: string; family: number }>;
    try {
      addresses = await lookup(host, { all: true });
    } catch {
      return false;
    }
    return addresses.some(({ address, family }) => this.#matches(address, family, false));
  }

  #matches(address: string, family: number, orLoopback: boolean): boolean {
    const type = family === 6 ? 'ipv6' : 'ipv4';
    return (orLoopback && this.#loopback.check(address, type)) || this.#insecureNets.check(address, type);
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
