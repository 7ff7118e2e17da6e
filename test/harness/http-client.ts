import { request as httpRequestRaw, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';

/** Where a request goes: an http:// URL, or a path on a unix socket. */
export type HttpTarget = { url: string } | { socketPath: string; path: string };

export interface HttpOptions {
  method?: string;
  headers?: OutgoingHttpHeaders;
  /** Objects are sent as JSON; a Readable is streamed (give Content-Length in headers when known). */
  body?: unknown;
  timeoutMs?: number;
}

export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text(): string;
  json<T = any>(): T;
}

function requestOptions(target: HttpTarget, opts: HttpOptions) {
  const headers: OutgoingHttpHeaders = { ...(opts.headers ?? {}) };
  let body: Buffer | Readable | undefined;
  const b = opts.body;
  if (b instanceof Readable) body = b;
  else if (Buffer.isBuffer(b)) body = b;
  else if (b instanceof Uint8Array) body = Buffer.from(b);
  else if (typeof b === 'string') body = Buffer.from(b);
  else if (b !== undefined) {
    body = Buffer.from(JSON.stringify(b));
    if (!hasHeader(headers, 'content-type')) headers['Content-Type'] = 'application/json';
  }
  if (Buffer.isBuffer(body) && !hasHeader(headers, 'content-length')) headers['Content-Length'] = body.length;
  const method = opts.method ?? 'GET';
  if ('url' in target) {
    const u = new URL(target.url);
    return {
      body,
      options: { method, headers, hostname: u.hostname, port: u.port || 80, path: u.pathname + u.search },
    };
  }
  // A unix socket still needs a Host header; Docker clients send "docker" or "localhost".
  if (!hasHeader(headers, 'host')) headers.Host = 'localhost';
  // No connection pooling on the daemon socket: a kept-alive connection to a daemon that was just
  // restarted or killed would fail the next request for reasons that have nothing to do with the test.
  return { body, options: { method, headers, socketPath: target.socketPath, path: target.path, agent: false } };
}

function hasHeader(headers: OutgoingHttpHeaders, name: string): boolean {
  return Object.keys(headers).some((k) => k.toLowerCase() === name);
}

function describe(target: HttpTarget, method: string): string {
  return 'url' in target ? `${method} ${target.url}` : `${method} unix:${target.socketPath}${target.path}`;
}

/** Sends a request and resolves with the response head, body unread. */
export function httpStream(target: HttpTarget, opts: HttpOptions = {}): Promise<IncomingMessage> {
  const { body, options } = requestOptions(target, opts);
  return new Promise((resolve, reject) => {
    const req = httpRequestRaw(options, resolve);
    req.on('error', (err) => reject(new Error(`${describe(target, options.method)}: ${err.message}`, { cause: err })));
    if (opts.timeoutMs) {
      req.setTimeout(opts.timeoutMs, () => req.destroy(new Error(`timed out after ${opts.timeoutMs} ms`)));
    }
    if (body instanceof Readable) {
      body.on('error', (err) => req.destroy(err));
      body.pipe(req);
    } else {
      req.end(body);
    }
  });
}

/** Sends a request and reads the whole response body. */
export async function httpRequest(target: HttpTarget, opts: HttpOptions = {}): Promise<HttpResponse> {
  const res = await httpStream(target, opts);
  const body = await readAll(res);
  return toResponse(res.statusCode ?? 0, res.headers, body);
}

export function toResponse(status: number, headers: IncomingHttpHeaders, body: Buffer): HttpResponse {
  return {
    status,
    headers,
    body,
    text: () => body.toString('utf8'),
    json: <T>() => {
      try {
        return JSON.parse(body.toString('utf8')) as T;
      } catch (err) {
        throw new Error(`response (status ${status}) is not JSON: ${body.toString('utf8').slice(0, 500)}`, { cause: err });
      }
    },
  };
}

export async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks);
}

/** The result of a request that asked for a connection upgrade (attach, exec start). */
export type UpgradeResult =
  | { upgraded: true; response: IncomingMessage; socket: Socket; head: Buffer }
  | { upgraded: false; response: IncomingMessage };

/**
 * Sends `Connection: Upgrade, Upgrade: tcp` (what the docker CLI sends for attach and exec) and resolves
 * with the raw socket on 101, or with the plain response when the server answers without upgrading.
 */
export function httpUpgrade(target: HttpTarget, opts: HttpOptions = {}): Promise<UpgradeResult> {
  const headers = { Connection: 'Upgrade', Upgrade: 'tcp', ...(opts.headers ?? {}) };
  const { body, options } = requestOptions(target, { ...opts, method: opts.method ?? 'POST', headers });
  return new Promise((resolve, reject) => {
    const req = httpRequestRaw(options);
    req.on('upgrade', (response, socket, head) => resolve({ upgraded: true, response, socket: socket as Socket, head }));
    req.on('response', (response) => resolve({ upgraded: false, response }));
    req.on('error', (err) => reject(new Error(`${describe(target, options.method)}: ${err.message}`, { cause: err })));
    if (body instanceof Readable) body.pipe(req);
    else req.end(body);
  });
}
