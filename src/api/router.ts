/**
 * Routes requests to handlers. Every route answers with and without the /vX.Y prefix; the version
 * window is checked here once, and the headers every response carries are set here once.
 */
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import FindMyWay, { type HTTPVersion, type Instance } from 'find-my-way';
import { API_VERSION, MIN_API_VERSION, compareVersions, splitVersion } from './api-version.js';
import { sendError, statusOf } from './http-errors.js';
import type { RequestContext } from './request.js';
import { log, isLogEnabled } from '../lib/log.js';
import { BerthError } from '../lib/errors.js';

export type Handler = (ctx: RequestContext) => Promise<void> | void;
type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE';

export const SERVER_VERSION = '0.1.0';

/** Headers on every API response, read by clients for negotiation. */
export const COMMON_HEADERS: Record<string, string> = {
  'Api-Version': API_VERSION,
  Ostype: 'linux',
  Server: `Berth/${SERVER_VERSION} (linux)`,
  'Docker-Experimental': 'false',
};

export class Router {
  readonly #fmw: Instance<HTTPVersion.V1>;

  constructor() {
    this.#fmw = FindMyWay({ ignoreTrailingSlash: true, ignoreDuplicateSlashes: true, caseSensitive: true });
  }

  on(method: Method | Method[], path: string, handler: Handler): void {
    for (const m of Array.isArray(method) ? method : [method]) {
      this.#fmw.on(m, path, () => undefined, { handler });
    }
  }

  /** Serves a plain request. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    for (const [k, v] of Object.entries(COMMON_HEADERS)) res.setHeader(k, v);
    if (req.method === 'OPTIONS') {
      res.writeHead(200);
      res.end();
      return;
    }
    const ctx = this.#context(req, res);
    if (!ctx) return;
    await this.#dispatch(ctx, req.method ?? 'GET');
  }

  /** Serves a request that asked for `Upgrade: tcp` (attach, exec start): the handler owns the socket. */
  async handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, res: ServerResponse): Promise<void> {
    const ctx = this.#context(req, res);
    if (!ctx) return;
    ctx.socket = socket;
    ctx.head = head;
    await this.#dispatch(ctx, req.method ?? 'POST');
  }

  #context(req: IncomingMessage, res: ServerResponse): RequestContext | undefined {
    const url = new URL(req.url ?? '/', 'http://berth');
    const { version, path } = splitVersion(url.pathname);
    if (version !== undefined) {
      if (compareVersions(version, MIN_API_VERSION) < 0) {
        // dockerd answers pre-negotiation clients in plain text.
        const text = `client version ${version} is too old. Minimum supported API version is ${MIN_API_VERSION}, please upgrade your client to a newer version\n`;
        res.writeHead(400, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
        res.end(text);
        return undefined;
      }
      if (compareVersions(version, API_VERSION) > 0) {
        sendError(res, new BerthError('invalid-argument', `client version ${version} is too new. Maximum supported API version is ${API_VERSION}`));
        return undefined;
      }
    }
    return { req, res, version: version ?? API_VERSION, params: { '*': path }, query: url.searchParams };
  }

  async #dispatch(ctx: RequestContext, method: string): Promise<void> {
    const path = ctx.params['*']!;
    const found = this.#fmw.find(method as Method, path);
    if (isLogEnabled('debug')) log.debug('request', { method, path, version: ctx.version });
    if (!found) {
      sendError(ctx.res, new BerthError('not-found', 'page not found'));
      ctx.socket?.destroy();
      return;
    }
    ctx.params = { ...found.params };
    try {
      await (found.store as { handler: Handler }).handler(ctx);
    } catch (err) {
      if (ctx.socket) {
        writeRawError(ctx.socket, err);
      } else {
        sendError(ctx.res, err);
      }
    }
  }
}

/** After a hijack the response object is unused; errors are written on the socket by hand. */
function writeRawError(socket: Duplex, err: unknown): void {
  const status = statusOf(err);
  if (status >= 500) log.error('request failed', { err: err instanceof Error ? err.stack : String(err) });
  const body = JSON.stringify({ message: err instanceof Error ? err.message : String(err) });
  if (!socket.destroyed && socket.writable) {
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
}
