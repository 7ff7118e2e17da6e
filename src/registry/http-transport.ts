/**
 * Plain node:http/https requests for registry traffic: keep-alive agents (one per TLS setting:
 * verified against the system CAs plus a registry's certs.d files, or unverified for insecure
 * registries), redirects that never carry credentials to another origin, and abort signals
 * that close the socket.
 */
import http, { type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { createSecureContext } from 'node:tls';
import { BerthError, errorMessage } from '../lib/errors.js';
import type { HostTls } from './certs-dir.js';
import { describeRequest } from './registry-errors.js';
import { systemCas } from './system-cas.js';
import { transportErrorText } from './tls-error-text.js';

export interface HttpRequest {
  method: string;
  url: URL;
  headers?: OutgoingHttpHeaders;
  /** A stream body is sent once (never across a redirect); the caller sets content-length. */
  body?: string | Buffer | Readable;
  signal?: AbortSignal | undefined;
  /** Verify TLS certificates (default true). */
  tlsVerify?: boolean;
  /** Extra CAs and a client certificate for this host (certs.d); kept across redirects. */
  tls?: HostTls | undefined;
  /** How many redirects to follow (default 0: return the 3xx response). */
  maxRedirects?: number;
  /** Fail when no response headers arrive within this time (ms). Never applies to bodies. */
  headersTimeoutMs?: number;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const USER_AGENT = 'berth/0.1 (docker-compatible)';

/** A request that failed before any HTTP status was received (DNS, connect, TLS, reset). */
export class TransportError extends BerthError {
  readonly code: string | undefined;
  constructor(request: string, cause: unknown) {
    super('internal', `${request}: ${transportErrorText(cause)}`, { cause });
    this.code = (cause as { code?: string } | null)?.code;
  }
}

export class HttpTransport {
  readonly #http = new http.Agent({ keepAlive: true });
  /** By verification mode and certs.d material (HostTls.id). */
  readonly #https = new Map<string, https.Agent>();

  /** Sends one request (following redirects when asked) and resolves with the response head. */
  async request(req: HttpRequest): Promise<IncomingMessage> {
    let url = req.url;
    let method = req.method.toUpperCase();
    let headers: OutgoingHttpHeaders = { 'user-agent': USER_AGENT, ...req.headers };
    let body = req.body;
    for (let hop = 0; ; hop++) {
      const res = await this.#once(method, url, headers, body, req);
      const location = res.headers.location;
      if (!REDIRECTS.has(res.statusCode ?? 0) || location === undefined || hop >= (req.maxRedirects ?? 0) || body instanceof Readable) return res;
      res.resume();
      const next = new URL(location, url);
      if (next.protocol !== 'http:' && next.protocol !== 'https:') return res;
      if (next.origin !== url.origin) {
        // Credentials are for the registry only, never for a CDN or object store it points to.
        headers = { ...headers };
        delete headers.authorization;
        delete headers.Authorization;
      }
      if (res.statusCode === 303 && method !== 'HEAD') {
        method = 'GET';
        body = undefined;
      }
      url = next;
    }
  }

  #once(method: string, url: URL, headers: OutgoingHttpHeaders, body: string | Buffer | Readable | undefined, req: HttpRequest): Promise<IncomingMessage> {
    const isHttps = url.protocol === 'https:';
    const what = describeRequest(method, url);
    return new Promise((resolve, reject) => {
      if (req.signal?.aborted) {
        reject(req.signal.reason);
        return;
      }
      let agent: http.Agent;
      try {
        agent = isHttps ? this.#httpsAgent(req.tlsVerify !== false, req.tls) : this.#http;
      } catch (err) {
        reject(err);
        return;
      }
      const outHeaders = { ...headers };
      if (body !== undefined && !(body instanceof Readable)) outHeaders['content-length'] = Buffer.byteLength(body);
      const options: https.RequestOptions = { method, headers: outHeaders, agent };
      if (req.signal) options.signal = req.signal;
      const cr = (isHttps ? https : http).request(url, options);
      let timer: NodeJS.Timeout | undefined;
      if (req.headersTimeoutMs !== undefined) {
        timer = setTimeout(() => cr.destroy(new Error(`timeout awaiting response headers after ${req.headersTimeoutMs} ms`)), req.headersTimeoutMs);
      }
      cr.on('response', (res) => {
        clearTimeout(timer);
        resolve(res);
      });
      cr.on('error', (err) => {
        clearTimeout(timer);
        reject(req.signal?.aborted ? req.signal.reason : new TransportError(what, err));
      });
      if (body instanceof Readable) {
        body.once('error', (err) => cr.destroy(err));
        body.pipe(cr);
      } else {
        cr.end(body);
      }
    });
  }

  /**
   * One agent per TLS setting, so its secure context (a few hundred parsed roots) is built once
   * and its pooled connections never serve a request that wants other certificates.
   */
  #httpsAgent(verify: boolean, tls: HostTls | undefined): https.Agent {
    const key = `${verify ? 'verify' : 'skip-verify'}:${tls?.id ?? ''}`;
    let agent = this.#https.get(key);
    if (agent) return agent;
    let secureContext;
    try {
      secureContext = createSecureContext({
        ...(verify ? { ca: [...systemCas(), ...(tls?.ca ?? [])] } : {}),
        ...(tls?.cert !== undefined ? { cert: tls.cert, key: tls.key } : {}),
      });
    } catch (err) {
      const where = tls ? ` in ${tls.dir}` : '';
      throw new BerthError('invalid-argument', `unable to use the TLS certificates${where}: ${errorMessage(err)}`, { cause: err });
    }
    agent = new https.Agent({ keepAlive: true, rejectUnauthorized: verify, secureContext });
    this.#https.set(key, agent);
    return agent;
  }

  /** Closes idle keep-alive sockets; in-flight requests are left alone. */
  close(): void {
    this.#http.destroy();
    for (const agent of this.#https.values()) agent.destroy();
    this.#https.clear();
  }
}
