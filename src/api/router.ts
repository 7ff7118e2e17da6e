/**
 * Routes requests to handlers. Every route answers with and without the /vX.Y prefix; the version
 * window is checked here once, and the headers every response carries are set here once.
 */
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import FindMyWay, { type HTTPVersion, type Instance } from 'find-my-way';
import { API_VERSION, MIN_API_VERSION, compareVersions, splitVersion } from './api-version.js';
import { errorText, sendError, statusOf } from './http-errors.js';
import { Context, type RequestContext } from './request.js';
import { parseRequestTarget } from './request-target.js';
import { apiOperation, type ApiOperation } from './request-schema.js';
import { log, isLogEnabled } from '../lib/log.js';
import { BerthError } from '../lib/errors.js';
import { RouteLog } from './route-log.js';

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

/** COMMON_HEADERS as a flat [name, value, ...] list, for handlers that write all headers at once. */
export const COMMON_HEADER_LIST: readonly string[] = Object.entries(COMMON_HEADERS).flat();

export interface RouteOptions {
  /**
   * The handler writes every header itself in one writeHead, COMMON_HEADER_LIST first: for tiny,
   * hot answers (/_ping) where setting headers one by one is most of the work.
   */
  ownHeaders?: boolean;
}

interface Route {
  handler: Handler;
  ownHeaders: boolean;
  /** The spec's operation for this method and path, when it has checks (body or typed query). */
  operation: ApiOperation | undefined;
  /** "METHOD /template", for the route log. */
  key: string;
}

export interface RouterOptions {
  /** A file that lists the routes and those that answered (the tests' route coverage); none by default. */
  routeLog?: string | undefined;
}

/** How a /vX.Y prefix compares with the versions served. */
type VersionVerdict = 'ok' | 'old' | 'new';

/** Distinct versions whose verdict is remembered; clients use a handful. */
const MAX_VERDICTS = 64;

const EMPTY_QUERY = Object.freeze({});

function setCommonHeaders(res: ServerResponse): void {
  for (let i = 0; i < COMMON_HEADER_LIST.length; i += 2) res.setHeader(COMMON_HEADER_LIST[i]!, COMMON_HEADER_LIST[i + 1]!);
}

export class Router {
  readonly #fmw: Instance<HTTPVersion.V1>;
  readonly #verdicts = new Map<string, VersionVerdict>();
  readonly #operations: ApiOperation[] = [];
  readonly #routeLog: RouteLog | undefined;

  constructor(opts: RouterOptions = {}) {
    this.#routeLog = opts.routeLog ? new RouteLog(opts.routeLog) : undefined;
    // The query is split off before routing; find-my-way need not parse it.
    this.#fmw = FindMyWay({ ignoreTrailingSlash: true, ignoreDuplicateSlashes: true, caseSensitive: true, querystringParser: () => EMPTY_QUERY });
  }

  on(method: Method | Method[], path: string, handler: Handler, opts: RouteOptions = {}): void {
    for (const m of Array.isArray(method) ? method : [method]) {
      const route: Route = { handler, ownHeaders: opts.ownHeaders ?? false, operation: apiOperation(m, path), key: `${m} ${path}` };
      if (route.operation) this.#operations.push(route.operation);
      this.#routeLog?.registered(route.key);
      this.#fmw.on(m, path, () => undefined, route);
    }
  }

  /** Whether a handler is registered for the method and path (a route pattern as given to on()). */
  has(method: Method, path: string): boolean {
    return this.#fmw.hasRoute(method, path);
  }

  /**
   * Compiles the routes' request validators in the background, one per turn of the event loop, so
   * that the first create after start-up does not pay for it (loading ajv and compiling the create
   * body take ~0.1-0.2 s here; each other body much less).
   */
  warmUp(): void {
    const pending = [...this.#operations];
    const next = (): void => {
      const op = pending.shift();
      if (!op) return;
      op.warm();
      setImmediate(next).unref();
    };
    setImmediate(next).unref();
  }

  /** Serves a plain request; never throws, handler errors become error responses. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    const method = req.method ?? 'GET';
    if (method === 'OPTIONS') {
      setCommonHeaders(res);
      res.writeHead(200);
      res.end();
      return;
    }
    const target = parseRequestTarget(req.url ?? '/');
    const { version, path } = splitVersion(target.path);
    if (version !== undefined && !this.#versionServed(version, res, true)) return;
    const found = this.#fmw.find(method as Method, path);
    if (isLogEnabled('debug')) log.debug('request', { method, path, version: version ?? API_VERSION });
    if (!found) {
      setCommonHeaders(res);
      sendError(res, new BerthError('not-found', 'page not found'));
      return;
    }
    const route = found.store as Route;
    if (!route.ownHeaders) setCommonHeaders(res);
    const ctx = new Context(req, res, version ?? API_VERSION, found.params, target.search, route.operation);
    this.#run(route, ctx);
  }

  /** Serves a request that asked for `Upgrade: tcp` (attach, exec start): the handler owns the socket. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, res: ServerResponse): void {
    const method = req.method ?? 'POST';
    const target = parseRequestTarget(req.url ?? '/');
    const { version, path } = splitVersion(target.path);
    if (version !== undefined && !this.#versionServed(version, res, false)) return;
    const found = this.#fmw.find(method as Method, path);
    if (isLogEnabled('debug')) log.debug('request', { method, path, version: version ?? API_VERSION });
    if (!found) {
      sendError(res, new BerthError('not-found', 'page not found'));
      socket.destroy();
      return;
    }
    const route = found.store as Route;
    const ctx = new Context(req, res, version ?? API_VERSION, found.params, target.search, route.operation);
    ctx.socket = socket;
    ctx.head = head;
    this.#run(route, ctx);
  }

  /** Runs a handler; synchronous ones cost no promise. */
  #run(route: Route, ctx: Context): void {
    if (this.#routeLog !== undefined) this.#routeLog.answered(route.key);
    try {
      if (route.operation?.checksQuery) route.operation.checkQuery(ctx.query);
      const pending = route.handler(ctx);
      if (pending instanceof Promise) pending.then(undefined, (err: unknown) => this.#fail(route, ctx, err));
    } catch (err) {
      this.#fail(route, ctx, err);
    }
  }

  #fail(route: Route, ctx: Context, err: unknown): void {
    if (ctx.socket) {
      writeRawError(ctx.socket, err);
      return;
    }
    if (route.ownHeaders && !ctx.res.headersSent) setCommonHeaders(ctx.res);
    sendError(ctx.res, err);
  }

  /** False when the version is outside the window; the refusal is then sent. */
  #versionServed(version: string, res: ServerResponse, commonHeaders: boolean): boolean {
    let verdict = this.#verdicts.get(version);
    if (verdict === undefined) {
      verdict = compareVersions(version, MIN_API_VERSION) < 0 ? 'old' : compareVersions(version, API_VERSION) > 0 ? 'new' : 'ok';
      if (this.#verdicts.size >= MAX_VERDICTS) this.#verdicts.clear();
      this.#verdicts.set(version, verdict);
    }
    if (verdict === 'ok') return true;
    if (commonHeaders) setCommonHeaders(res);
    if (verdict === 'old') {
      // dockerd answers pre-negotiation clients in plain text.
      const text = `client version ${version} is too old. Minimum supported API version is ${MIN_API_VERSION}, please upgrade your client to a newer version\n`;
      res.writeHead(400, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
      res.end(text);
    } else {
      sendError(res, new BerthError('invalid-argument', `client version ${version} is too new. Maximum supported API version is ${API_VERSION}`));
    }
    return false;
  }
}

/** After a hijack the response object is unused; errors are written on the socket by hand. */
function writeRawError(socket: Duplex, err: unknown): void {
  const status = statusOf(err);
  if (status >= 500) log.error('request failed', { err: err instanceof Error ? err.stack : String(err) });
  const body = JSON.stringify({ message: errorText(err) });
  if (!socket.destroyed && socket.writable) {
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
}
