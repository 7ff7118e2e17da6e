/**
 * Turns operations into versioned HTTP calls: applies the API version (pinned, negotiated once
 * through /_ping, or the client default), encodes queries and JSON bodies, and converts error
 * responses into typed errors carrying the daemon's message.
 */
import type { IncomingMessage } from 'node:http';
import { CLIENT_API_VERSION, negotiatedVersion } from './api-version.js';
import { errorForStatus } from './errors.js';
import { readBody, type Transport } from './transport.js';

export type QueryValue = string | number | boolean | string[] | undefined;

export interface CallOptions {
  query?: Record<string, QueryValue>;
  /** Sent as JSON. */
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Send the path without /vX.Y (used by /_ping). */
  unversioned?: boolean;
}

export interface PingResult {
  /** The daemon's Api-Version header, if it sent one. */
  apiVersion: string | undefined;
  osType: string | undefined;
  experimental: boolean;
  builderVersion: string | undefined;
  swarm: string | undefined;
}

export interface VersionPolicy {
  /** Pins the version: nothing is negotiated. */
  pinned?: string;
  /** Ask /_ping for the daemon's version before the first call. */
  negotiate: boolean;
}

export class ApiCaller {
  readonly transport: Transport;
  #version: Promise<string> | undefined;

  constructor(transport: Transport, policy: VersionPolicy) {
    this.transport = transport;
    if (policy.pinned) this.#version = Promise.resolve(policy.pinned);
    else if (!policy.negotiate) this.#version = Promise.resolve(CLIENT_API_VERSION);
  }

  /** The API version calls use; negotiates on first use when the policy says so. */
  apiVersion(): Promise<string> {
    if (!this.#version) {
      const attempt = this.ping().then((p) => negotiatedVersion(p.apiVersion));
      // A failed ping must not stick: the next call tries again.
      this.#version = attempt.catch((err: unknown) => {
        this.#version = undefined;
        throw err;
      });
    }
    return this.#version;
  }

  /** HEAD /_ping, falling back to GET, as the official clients do. */
  async ping(signal?: AbortSignal): Promise<PingResult> {
    let res: IncomingMessage;
    try {
      res = await this.call('HEAD', '/_ping', { unversioned: true, ...(signal && { signal }) });
      res.resume();
    } catch (err) {
      if (signal?.aborted) throw err;
      res = await this.call('GET', '/_ping', { unversioned: true, ...(signal && { signal }) });
      await readBody(res, 4096);
    }
    const h = res.headers;
    const header = (name: string) => {
      const v = h[name];
      return Array.isArray(v) ? v[0] : v;
    };
    return {
      apiVersion: header('api-version'),
      osType: header('ostype'),
      experimental: header('docker-experimental') === 'true',
      builderVersion: header('builder-version'),
      swarm: header('swarm'),
    };
  }

  /** Sends a call and returns the response once headers are in; non-2xx/3xx statuses throw. */
  async call(method: string, path: string, opts: CallOptions = {}): Promise<IncomingMessage> {
    const prefix = opts.unversioned ? '' : `/v${await this.apiVersion()}`;
    const headers: Record<string, string> = { ...opts.headers };
    let body: Buffer | undefined;
    if (opts.body !== undefined) {
      body = Buffer.from(JSON.stringify(opts.body));
      headers['Content-Type'] = 'application/json';
    }
    const res = await this.transport.request({
      method,
      path: prefix + path + encodeQuery(opts.query),
      headers,
      ...(body && { body }),
      ...(opts.signal && { signal: opts.signal }),
    });
    const status = res.statusCode ?? 0;
    if (status >= 400) throw errorForStatus(status, await errorMessage(res));
    return res;
  }

  /** A call whose reply is a JSON document. */
  async json<T>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
    const res = await this.call(method, path, opts);
    const text = (await readBody(res)).toString('utf8');
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** A call whose reply has no body worth reading (204, 304, 201 with an empty body). */
  async empty(method: string, path: string, opts: CallOptions = {}): Promise<number> {
    const res = await this.call(method, path, opts);
    await readBody(res, 1024 * 1024);
    return res.statusCode ?? 0;
  }
}

/** Encodes a query; arrays repeat the key, undefined values are left out, booleans become 1/0. */
export function encodeQuery(query: Record<string, QueryValue> | undefined): string {
  if (!query) return '';
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) q.append(k, item);
    else if (typeof v === 'boolean') q.append(k, v ? '1' : '0');
    else q.append(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** The daemon's message: `{"message": ...}` normally, plain text for very old versions. */
async function errorMessage(res: IncomingMessage): Promise<string> {
  const text = (await readBody(res, 1024 * 1024)).toString('utf8').trim();
  if (!text) return `${res.statusCode} ${res.statusMessage ?? ''}`.trim();
  try {
    const parsed = JSON.parse(text) as { message?: unknown };
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON: use the text as is
  }
  return text;
}
