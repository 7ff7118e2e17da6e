/**
 * Bearer tokens from a registry's token service: the plain GET flow (Basic credentials +
 * `account=`), the OAuth2 POST flow for identity (refresh) tokens, and a cache shared by all
 * pulls so that layers and repeated pulls reuse a token until shortly before it expires.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { BerthError, invalidArgument } from '../lib/errors.js';
import type { AuthConfig } from './auth-config.js';
import type { HostTls } from './certs-dir.js';
import type { HttpTransport } from './http-transport.js';
import { errorFromResponse, readLimited, RegistryStatusError } from './registry-errors.js';

export interface TokenRequest {
  realm: string;
  service?: string | undefined;
  /** e.g. `repository:library/busybox:pull`; empty for a login check. */
  scopes: string[];
  auth?: AuthConfig | undefined;
  /** Ask for a refresh token (docker login does, to hand back an IdentityToken). */
  offline?: boolean;
  tlsVerify: boolean;
  /** The token service's certs.d material (plus the registry's CAs). */
  tls?: HostTls | undefined;
  signal?: AbortSignal | undefined;
}

export interface TokenGrant {
  token: string;
  /** ms since epoch after which the token is not reused. */
  expiresAt: number;
  refreshToken?: string;
}

/** A token service refused or failed; `status` 401 means the credentials were wrong. */
export class TokenError extends RegistryStatusError {}

const CLIENT_ID = 'docker';
const MIN_EXPIRES_S = 60;
const EXPIRY_MARGIN_MS = 10_000;
const MAX_TOKEN_BODY = 1024 * 1024;

export async function fetchToken(transport: HttpTransport, req: TokenRequest): Promise<TokenGrant> {
  let realm: URL;
  try {
    realm = new URL(req.realm);
  } catch {
    throw invalidArgument(`invalid token realm ${JSON.stringify(req.realm)}`);
  }
  if (realm.protocol !== 'https:' && realm.protocol !== 'http:') throw invalidArgument(`invalid token realm ${JSON.stringify(req.realm)}`);
  const started = Date.now();
  const auth = req.auth;
  if (auth?.identitytoken !== undefined) {
    const res = await postOAuth(transport, realm, req, auth.identitytoken);
    if (res.statusCode !== 404) return grantFrom(res, 'POST', realm, started);
    res.resume();
  }
  const url = new URL(realm);
  if (req.service) url.searchParams.set('service', req.service);
  for (const s of req.scopes) url.searchParams.append('scope', s);
  const headers: Record<string, string> = {};
  if (auth?.username !== undefined) {
    url.searchParams.set('account', auth.username);
    headers.authorization = basicAuthorization(auth.username, auth.password ?? '');
  }
  if (req.offline) {
    url.searchParams.set('offline_token', 'true');
    url.searchParams.set('client_id', CLIENT_ID);
  }
  const res = await transport.request({ method: 'GET', url, headers, signal: req.signal, tlsVerify: req.tlsVerify, tls: req.tls, maxRedirects: 5, headersTimeoutMs: 60_000 });
  return grantFrom(res, 'GET', url, started);
}

function postOAuth(transport: HttpTransport, realm: URL, req: TokenRequest, refreshToken: string): Promise<IncomingMessage> {
  const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: CLIENT_ID });
  if (req.service) form.set('service', req.service);
  if (req.scopes.length > 0) form.set('scope', req.scopes.join(' '));
  if (req.offline) form.set('access_type', 'offline');
  return transport.request({
    method: 'POST', url: realm, body: form.toString(), signal: req.signal, tlsVerify: req.tlsVerify, tls: req.tls, headersTimeoutMs: 60_000,
    headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' },
  });
}

async function grantFrom(res: IncomingMessage, method: string, url: URL, started: number): Promise<TokenGrant> {
  if (res.statusCode !== 200) {
    const e = await errorFromResponse(res, method, url);
    throw new TokenError(e.kind, e.request, e.status, e.errors, e.detail);
  }
  const body = await readLimited(res, MAX_TOKEN_BODY);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new BerthError('internal', `token service ${url.origin} returned invalid JSON`, { cause: err });
  }
  const token = typeof json.token === 'string' && json.token !== '' ? json.token : json.access_token;
  if (typeof token !== 'string' || token === '') throw new BerthError('internal', `token service ${url.origin} returned no token`);
  const expiresIn = typeof json.expires_in === 'number' && json.expires_in > MIN_EXPIRES_S ? json.expires_in : MIN_EXPIRES_S;
  // Local clock from the request start: immune to skew with the token server's issued_at.
  const grant: TokenGrant = { token, expiresAt: started + expiresIn * 1000 - EXPIRY_MARGIN_MS };
  if (typeof json.refresh_token === 'string' && json.refresh_token !== '') grant.refreshToken = json.refresh_token;
  return grant;
}

export function basicAuthorization(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
}

/** Tokens by (realm, service, scopes, credentials); concurrent requests for one key share a fetch. */
export class TokenCache {
  readonly #entries = new Map<string, { promise: Promise<TokenGrant>; grant?: TokenGrant }>();

  static key(req: Pick<TokenRequest, 'realm' | 'service' | 'scopes' | 'auth'>): string {
    const a = req.auth;
    const who = a === undefined ? 'anonymous'
      : createHash('sha256').update(JSON.stringify([a.username ?? null, a.password ?? null, a.identitytoken ?? null])).digest('hex');
    return JSON.stringify([req.realm, req.service ?? '', [...req.scopes].sort(), who]);
  }

  get(key: string, fetch: () => Promise<TokenGrant>): Promise<TokenGrant> {
    const now = Date.now();
    const hit = this.#entries.get(key);
    if (hit && (hit.grant === undefined || hit.grant.expiresAt > now)) return hit.promise;
    this.#prune(now);
    const entry: { promise: Promise<TokenGrant>; grant?: TokenGrant } = {
      promise: fetch().then(
        (grant) => {
          entry.grant = grant;
          return grant;
        },
        (err: unknown) => {
          if (this.#entries.get(key) === entry) this.#entries.delete(key);
          throw err;
        },
      ),
    };
    this.#entries.set(key, entry);
    return entry.promise;
  }

  invalidate(key: string): void {
    this.#entries.delete(key);
  }

  get size(): number {
    return this.#entries.size;
  }

  #prune(now: number): void {
    for (const [k, e] of this.#entries) if (e.grant !== undefined && e.grant.expiresAt <= now) this.#entries.delete(k);
  }
}
