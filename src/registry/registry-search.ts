/**
 * The v1 search API (`GET /v1/search?q=&n=`) as dockerd calls it: Docker Hub's index directly,
 * another registry after a `/v1/_ping` over HTTPS (HTTP too when the registry is insecure). Its
 * failures carry dockerd's texts: a search nobody can reach is an error, never an empty list.
 */
import type { AuthConfig } from './auth-config.js';
import type { HttpTransport } from './http-transport.js';
import { readLimited } from './registry-errors.js';
import type { RegistryHosts } from './registry-hosts.js';
import { basicAuthorization } from './token-auth.js';
import { BerthError, invalidArgument, errorMessage } from '../lib/errors.js';

export interface SearchResult {
  name: string;
  description: string;
  star_count: number;
  is_official: boolean;
  is_automated: boolean;
}

const INDEX = 'https://index.docker.io/v1/';
const TIMEOUT_MS = 15_000;

/** `registry/name` → [index, remote name] as dockerd splits a search term. */
function splitTerm(term: string): [string, string] {
  const slash = term.indexOf('/');
  if (slash < 0) return ['docker.io', term];
  const first = term.slice(0, slash);
  if (!first.includes('.') && !first.includes(':') && first !== 'localhost') return ['docker.io', term];
  return [first, term.slice(slash + 1)];
}

export async function searchRegistry(transport: HttpTransport, hosts: RegistryHosts, term: string, limit: number, auth: AuthConfig | undefined, headers: Record<string, string>): Promise<SearchResult[]> {
  if (term.includes('://')) throw invalidArgument(`invalid repository name: repository name (${term}) should not have a scheme`);
  let [index, remote] = splitTerm(term);
  const hub = index === 'docker.io' || index === 'index.docker.io' || index === 'registry-1.docker.io';
  let base: URL;
  let tls = { tlsVerify: true, tls: undefined as Awaited<ReturnType<RegistryHosts['tlsFor']>> };
  if (hub) {
    remote = remote.replace(/^library\//, '');
    base = new URL(INDEX);
  } else {
    const insecure = await hosts.isInsecure(index);
    tls = { tlsVerify: !insecure, tls: await hosts.tlsFor(index) };
    base = new URL(`https://${index}/v1/`);
    const httpsErr = await ping(transport, base, tls, headers);
    if (httpsErr !== undefined) {
      if (!insecure) {
        throw invalidArgument(
          `invalid registry endpoint ${base.href}: ${httpsErr}. If this private registry supports only HTTP or HTTPS with an unknown CA certificate, add \`--insecure-registry ${index}\` to the daemon's arguments. In the case of HTTPS, if you have access to the registry's CA certificate, no need for the flag; place the CA certificate at /etc/docker/certs.d/${index}/ca.crt`,
        );
      }
      base = new URL(`http://${index}/v1/`);
      const httpErr = await ping(transport, base, tls, headers);
      if (httpErr !== undefined) throw invalidArgument(`invalid registry endpoint "${base.href}". HTTPS attempt: ${httpsErr}. HTTP attempt: ${httpErr}`);
    }
  }
  const url = new URL(`search?q=${encodeURIComponent(remote)}&n=${limit}`, base);
  const h: Record<string, string> = { ...headers, 'x-docker-token': 'true' };
  if (auth?.username !== undefined && auth.password !== undefined) h.authorization = basicAuthorization(auth.username, auth.password);
  // Any failure to reach the index is the daemon's (500), with Go's `Get "<url>": <cause>` text.
  const res = await transport.request({ method: 'GET', url, headers: h, ...tls, headersTimeoutMs: TIMEOUT_MS, maxRedirects: 5 });
  if (res.statusCode !== 200) {
    res.resume();
    throw new BerthError('internal', `unexpected status code ${res.statusCode}`);
  }
  let body: { results?: SearchResult[] };
  try {
    body = JSON.parse((await readLimited(res, 8 * 1024 * 1024)).toString('utf8')) as { results?: SearchResult[] };
  } catch (err) {
    throw new BerthError('internal', `error decoding registry search results: ${errorMessage(err)}`);
  }
  return Array.isArray(body.results) ? body.results : [];
}

/** undefined when `<base>_ping` answered at all; else why not. */
async function ping(transport: HttpTransport, base: URL, tls: { tlsVerify: boolean; tls: Awaited<ReturnType<RegistryHosts['tlsFor']>> }, headers: Record<string, string>): Promise<string | undefined> {
  try {
    const res = await transport.request({ method: 'GET', url: new URL('_ping', base), headers, ...tls, headersTimeoutMs: TIMEOUT_MS });
    res.resume();
    return undefined;
  } catch (err) {
    return errorMessage(err);
  }
}
