import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { httpRequest, httpStream, readAll, toResponse, type HttpResponse } from './http-client.js';

/**
 * A minimal distribution-API client for the harness itself (pushing fixtures, checking what a registry
 * holds). It answers 401 challenges: Basic, or Bearer through the realm named in WWW-Authenticate.
 */

export interface RegistryEndpoint {
  url: string;
  username?: string;
  password?: string;
}

export interface RegistryRequestOptions {
  headers?: OutgoingHttpHeaders;
  /** A factory for streamed bodies, so the request can be sent again after an auth challenge. */
  body?: Buffer | string | (() => Readable);
  /** Scope for a Bearer token; derived from the path when omitted. */
  scope?: string;
}

interface Challenge {
  scheme: 'basic' | 'bearer';
  params: Record<string, string>;
}

/** Parses one `WWW-Authenticate` value such as `Bearer realm="…",service="…",scope="…"`. */
export function parseChallenge(header: string | undefined): Challenge | undefined {
  if (!header) return undefined;
  const m = /^(\w+)\s*(.*)$/s.exec(header.trim());
  if (!m) return undefined;
  const scheme = m[1]!.toLowerCase();
  if (scheme !== 'basic' && scheme !== 'bearer') return undefined;
  const params: Record<string, string> = {};
  const re = /([a-zA-Z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g;
  for (let p = re.exec(m[2]!); p; p = re.exec(m[2]!)) params[p[1]!.toLowerCase()] = (p[2] ?? p[3] ?? '').replace(/\\(.)/g, '$1');
  return { scheme, params };
}

/** The scope a request path needs: pull for reads, pull,push for writes. */
export function scopeForPath(method: string, path: string): string | undefined {
  const pathname = path.split('?')[0]!;
  if (pathname === '/v2/_catalog') return 'registry:catalog:*';
  const m = /^\/v2\/(.+?)\/(manifests|blobs|tags)\//.exec(pathname);
  if (!m) return undefined;
  const read = method === 'GET' || method === 'HEAD';
  const actions = method === 'DELETE' ? 'delete' : read ? 'pull' : 'pull,push';
  return `repository:${m[1]}:${actions}`;
}

export class RegistryClient {
  readonly #endpoint: RegistryEndpoint;
  readonly #anonymous: boolean;
  #challenge: Challenge | undefined;
  readonly #tokens = new Map<string, string>();

  /** `anonymous` sends no credentials even when the endpoint has some. */
  constructor(endpoint: RegistryEndpoint, opts: { anonymous?: boolean } = {}) {
    this.#endpoint = endpoint;
    this.#anonymous = opts.anonymous ?? false;
  }

  /** Sends a request with whatever auth the registry asked for and reads the whole answer. */
  async request(method: string, path: string, opts: RegistryRequestOptions = {}): Promise<HttpResponse> {
    const res = await this.stream(method, path, opts);
    return toResponse(res.statusCode ?? 0, res.headers, await readAll(res));
  }

  /** Like request(), but the body is left unread. */
  async stream(method: string, path: string, opts: RegistryRequestOptions = {}): Promise<IncomingMessage> {
    const scope = opts.scope ?? scopeForPath(method, path);
    let auth = await this.#authorization(scope, false);
    let res = await this.#send(method, path, opts, auth);
    if (res.statusCode === 401 && !this.#anonymous) {
      const challenge = parseChallenge(header(res.headers['www-authenticate']));
      if (challenge) {
        res.resume();
        this.#challenge = challenge;
        auth = await this.#authorization(challenge.params.scope ?? scope, true);
        res = await this.#send(method, path, opts, auth);
      }
    }
    return res;
  }

  /** Resolves a Location header (absolute or relative) against the registry URL. */
  resolve(location: string): string {
    const u = new URL(location, this.#endpoint.url);
    return u.pathname + u.search;
  }

  #send(method: string, path: string, opts: RegistryRequestOptions, auth: string | undefined): Promise<IncomingMessage> {
    const headers: OutgoingHttpHeaders = { ...(opts.headers ?? {}) };
    if (auth) headers.Authorization = auth;
    const body = typeof opts.body === 'function' ? opts.body() : opts.body;
    return httpStream({ url: this.#endpoint.url + path }, { method, headers, body: body ?? (method === 'PUT' || method === 'POST' || method === 'PATCH' ? Buffer.alloc(0) : undefined) });
  }

  async #authorization(scope: string | undefined, fresh: boolean): Promise<string | undefined> {
    const c = this.#challenge;
    if (!c || this.#anonymous) return undefined;
    const { username, password } = this.#endpoint;
    if (c.scheme === 'basic') {
      return username !== undefined ? `Basic ${Buffer.from(`${username}:${password ?? ''}`).toString('base64')}` : undefined;
    }
    const key = scope ?? '';
    if (!fresh && this.#tokens.has(key)) return `Bearer ${this.#tokens.get(key)}`;
    const realm = c.params.realm;
    if (!realm) throw new Error('Bearer challenge without a realm');
    const u = new URL(realm);
    if (c.params.service) u.searchParams.set('service', c.params.service);
    if (scope) u.searchParams.append('scope', scope);
    const headers: OutgoingHttpHeaders = {};
    if (username !== undefined) {
      u.searchParams.set('account', username);
      headers.Authorization = `Basic ${Buffer.from(`${username}:${password ?? ''}`).toString('base64')}`;
    }
    const res = await httpRequest({ url: u.toString() }, { headers });
    if (res.status !== 200) throw new Error(`token server ${realm} answered ${res.status}: ${res.text()}`);
    const body = res.json<{ token?: string; access_token?: string }>();
    const token = body.token ?? body.access_token;
    if (!token) throw new Error(`token server ${realm} sent no token`);
    this.#tokens.set(key, token);
    return `Bearer ${token}`;
  }
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
