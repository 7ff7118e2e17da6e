/**
 * A conversation with one registry about one repository: the endpoint chosen by pinging
 * `/v2/`, the auth challenge it answered with, and requests that carry the right Authorization
 * (Basic, or a cached Bearer token) and retry once on 401 with a fresh token.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { log } from '../lib/log.js';
import type { AuthConfig } from './auth-config.js';
import { withExtraCas, type HostTls } from './certs-dir.js';
import { TransportError, type HttpTransport } from './http-transport.js';
import type { Endpoint, RegistryHost, RegistryHosts } from './registry-hosts.js';
import { basicAuthorization, fetchToken, TokenCache, type TokenGrant, type TokenRequest } from './token-auth.js';
import { parseChallenges, type Challenge } from './www-authenticate.js';

export interface SessionContext {
  transport: HttpTransport;
  hosts: RegistryHosts;
  tokens: TokenCache;
}

/** A registry request as plain data (it can be posted to a worker thread): see RegistrySession.plan. */
export interface PlannedRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  tlsVerify: boolean;
  tls: HostTls | undefined;
  maxRedirects: number;
  headersTimeoutMs: number;
}

export interface SessionOptions {
  /** Repository path; token scope is `repository:<path>:pull`. Undefined for a login check. */
  repository?: string | undefined;
  /** The actions asked of the repository (default `pull`; a push asks `pull,push`). */
  actions?: string | undefined;
  /** More scopes for the token, e.g. `repository:<other>:pull` to mount a blob from there. */
  extraScopes?: string[] | undefined;
  auth?: AuthConfig | undefined;
  /** Extra headers for every registry request (`X-Meta-*` passthrough). */
  headers?: Record<string, string> | undefined;
  /** Ask token services for a refresh token (login). */
  offline?: boolean;
  signal?: AbortSignal | undefined;
}

const PING_TIMEOUT_MS = 30_000;
const REQUEST_HEADERS_TIMEOUT_MS = 60_000;

export class RegistrySession {
  readonly host: RegistryHost;
  readonly endpoint: Endpoint;
  readonly repository: string | undefined;
  readonly #ctx: SessionContext;
  readonly #auth: AuthConfig | undefined;
  readonly #headers: Record<string, string>;
  readonly #offline: boolean;
  readonly #actions: string;
  readonly #extraScopes: string[];
  #challenge: Challenge | undefined;
  #lastGrant: TokenGrant | undefined;
  readonly #realmTls = new Map<string, { tlsVerify: boolean; tls: HostTls | undefined }>();

  private constructor(ctx: SessionContext, host: RegistryHost, endpoint: Endpoint, challenge: Challenge | undefined, opts: SessionOptions) {
    this.#ctx = ctx;
    this.host = host;
    this.endpoint = endpoint;
    this.repository = opts.repository;
    this.#auth = opts.auth;
    this.#headers = { ...opts.headers };
    this.#offline = opts.offline ?? false;
    this.#actions = opts.actions ?? 'pull';
    this.#extraScopes = opts.extraScopes ?? [];
    this.#challenge = challenge;
  }

  /**
   * Pings `/v2/` on each endpoint of `host` in turn and keeps the first that answers with any
   * HTTP status (an insecure registry's HTTPS attempt fails at TLS and falls through to HTTP).
   */
  static async open(ctx: SessionContext, host: RegistryHost, opts: SessionOptions): Promise<RegistrySession> {
    let lastError: unknown;
    for (const endpoint of host.endpoints) {
      const url = new URL('/v2/', endpoint.base);
      let res: IncomingMessage;
      try {
        res = await ctx.transport.request({
          method: 'GET', url, headers: { ...opts.headers }, signal: opts.signal, tlsVerify: endpoint.tlsVerify, tls: endpoint.tls,
          headersTimeoutMs: PING_TIMEOUT_MS,
        });
      } catch (err) {
        if (!(err instanceof TransportError)) throw err;
        log.debug('registry ping failed', { url: url.href, error: err });
        lastError = err;
        continue;
      }
      res.resume();
      const challenge = res.statusCode === 401 ? pickChallenge(parseChallenges(res.headers['www-authenticate'])) : undefined;
      return new RegistrySession(ctx, host, endpoint, challenge, opts);
    }
    throw lastError;
  }

  /** `bearer`, `basic`, or undefined when the registry asked for no auth (yet). */
  get authScheme(): string | undefined {
    return this.#challenge?.scheme;
  }

  get hasCredentials(): boolean {
    const a = this.#auth;
    return a !== undefined && (a.username !== undefined || a.identitytoken !== undefined || a.registrytoken !== undefined);
  }

  /** The refresh token from the last token response, if the service gave one. */
  get refreshToken(): string | undefined {
    return this.#lastGrant?.refreshToken;
  }

  url(path: string): URL {
    return new URL(path, this.endpoint.base);
  }

  /**
   * Sends a request to this registry with auth. Returns the response whatever its status;
   * a 401 is retried once after taking the challenge it carries into account.
   */
  async request(
    method: string,
    target: string | URL,
    opts: { headers?: OutgoingHttpHeaders; signal?: AbortSignal | undefined; maxRedirects?: number; headersTimeoutMs?: number; body?: () => Readable | Buffer | string } = {},
  ): Promise<IncomingMessage> {
    const url = typeof target === 'string' ? this.url(target) : target;
    for (let attempt = 0; ; attempt++) {
      const headers: OutgoingHttpHeaders = { ...this.#headers, ...opts.headers };
      const authorization = await this.#authorization(opts.signal);
      if (authorization !== undefined) headers.authorization = authorization;
      const res = await this.#ctx.transport.request({
        method, url, headers, signal: opts.signal, tlsVerify: this.endpoint.tlsVerify, tls: this.endpoint.tls,
        maxRedirects: opts.maxRedirects ?? 5, headersTimeoutMs: opts.headersTimeoutMs ?? REQUEST_HEADERS_TIMEOUT_MS,
        // A fresh body per attempt: a stream cannot be sent twice.
        ...(opts.body ? { body: opts.body() } : {}),
      });
      if (res.statusCode !== 401 || attempt > 0) return res;
      const challenge = pickChallenge(parseChallenges(res.headers['www-authenticate']));
      if (!challenge || !this.#worthRetrying(challenge)) return res;
      res.resume();
      if (this.#challenge?.scheme === 'bearer') this.#ctx.tokens.invalidate(this.#tokenKey(this.#challenge));
      this.#challenge = challenge;
    }
  }

  /**
   * The request request() would send first (its headers with the Authorization it would carry),
   * for a caller that sends it from another thread. A 401 there means: retry through request().
   */
  async plan(method: string, url: URL, opts: { signal?: AbortSignal | undefined } = {}): Promise<PlannedRequest> {
    const headers: Record<string, string> = { ...this.#headers };
    const authorization = await this.#authorization(opts.signal);
    if (authorization !== undefined) headers.authorization = authorization;
    return {
      method, url: url.href, headers, tlsVerify: this.endpoint.tlsVerify, tls: this.endpoint.tls,
      maxRedirects: 5, headersTimeoutMs: REQUEST_HEADERS_TIMEOUT_MS,
    };
  }

  #worthRetrying(challenge: Challenge): boolean {
    if (challenge.scheme === 'bearer') return this.#auth?.registrytoken === undefined;
    // A Basic challenge is worth a retry only if we have credentials we did not send yet.
    return this.#auth?.username !== undefined && this.#challenge?.scheme !== 'basic';
  }

  async #authorization(signal: AbortSignal | undefined): Promise<string | undefined> {
    const ch = this.#challenge;
    const auth = this.#auth;
    if (!ch) return undefined;
    if (ch.scheme === 'basic') return auth?.username !== undefined ? basicAuthorization(auth.username, auth.password ?? '') : undefined;
    if (auth?.registrytoken !== undefined) return `Bearer ${auth.registrytoken}`;
    const req = this.#tokenRequest(ch, signal);
    const tls = await this.#realmTlsFor(req.realm);
    const grant = await this.#ctx.tokens.get(TokenCache.key(req), () => fetchToken(this.#ctx.transport, { ...req, ...tls }));
    this.#lastGrant = grant;
    return `Bearer ${grant.token}`;
  }

  /**
   * Token services on loopback or insecure hosts may use self-signed certificates too. A token
   * service has its own certs.d directory, and is trusted when the registry's CAs sign it.
   */
  async #realmTlsFor(realm: string): Promise<{ tlsVerify: boolean; tls: HostTls | undefined }> {
    let host: string;
    try {
      host = new URL(realm).host;
    } catch {
      return { tlsVerify: true, tls: undefined }; // fetchToken reports the bad realm
    }
    let settings = this.#realmTls.get(host);
    if (settings === undefined) {
      const own = host === this.endpoint.base.host ? this.endpoint.tls : await this.#ctx.hosts.tlsFor(host);
      settings = { tlsVerify: !(await this.#ctx.hosts.isInsecure(host)), tls: withExtraCas(own, this.endpoint.tls) };
      this.#realmTls.set(host, settings);
    }
    return settings;
  }

  #tokenRequest(ch: Challenge, signal: AbortSignal | undefined): Omit<TokenRequest, 'tlsVerify' | 'tls'> {
    return {
      realm: ch.params.realm ?? '',
      service: ch.params.service,
      scopes: this.repository !== undefined ? [`repository:${this.repository}:${this.#actions}`, ...this.#extraScopes] : [],
      auth: this.#auth,
      offline: this.#offline,
      signal,
    };
  }

  #tokenKey(ch: Challenge): string {
    return TokenCache.key(this.#tokenRequest(ch, undefined));
  }
}

/** Bearer (with a realm) is preferred over Basic; other schemes are not supported. */
function pickChallenge(challenges: Challenge[]): Challenge | undefined {
  return challenges.find((c) => c.scheme === 'bearer' && c.params.realm) ?? challenges.find((c) => c.scheme === 'basic');
}
