/**
 * What a route handler sees: the parsed request, the negotiated API version, and typed readers for
 * query parameters and JSON bodies. Unknown query parameters and unknown JSON fields are ignored, as
 * dockerd ignores them; malformed values are a 400.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { BerthError, invalidArgument } from '../lib/errors.js';
import type { ApiOperation } from './request-schema.js';

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** Set for upgraded (hijacked) requests instead of res. */
  socket?: Duplex;
  head?: Buffer;
  version: string;
  params: Record<string, string | undefined>;
  query: URLSearchParams;
  /** The Engine API operation served, when the spec gives it checks: readJson validates bodies with it. */
  operation?: ApiOperation;
}

/** The context the router builds: the query is parsed only when a handler reads it. */
export class Context implements RequestContext {
  socket?: Duplex;
  head?: Buffer;
  #search: string;
  #query: URLSearchParams | undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly version: string,
    public params: Record<string, string | undefined>,
    search: string,
    readonly operation?: ApiOperation,
  ) {
    this.#search = search;
  }

  get query(): URLSearchParams {
    return (this.#query ??= new URLSearchParams(this.#search));
  }
}

const MAX_JSON_BODY = 16 * 1024 * 1024;

/** Reads a JSON body; an empty body gives `undefined`. */
export async function readJson<T = unknown>(ctx: RequestContext): Promise<T | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of ctx.req) {
      size += chunk.length;
      if (size > MAX_JSON_BODY) throw invalidArgument('request body too large');
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    // A client that closes mid-body ("aborted") sent a bad request, not a daemon failure.
    if (err instanceof BerthError) throw err;
    throw invalidArgument(`incomplete request body: ${(err as Error).message}`);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return undefined;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw invalidArgument(`invalid JSON: ${(err as Error).message}`);
  }
  checkJsonBody(ctx, body);
  return body as T;
}

/** Checks a parsed body against the operation's schema (readJson does this; for bodies read otherwise). */
export function checkJsonBody(ctx: RequestContext, body: unknown): void {
  ctx.operation?.checkBody(body);
}

/** Like readJson but the body must be a JSON object (or empty, giving {}). */
export async function readJsonObject(ctx: RequestContext): Promise<Record<string, unknown>> {
  const body = await readJson(ctx);
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw invalidArgument('invalid JSON: expected an object');
  return body as Record<string, unknown>;
}

/** dockerd's boolean query rule: absent, "", "0", "no", "false", "none" are false; anything else true. */
export function queryBool(q: URLSearchParams, name: string, dflt = false): boolean {
  const v = q.get(name);
  if (v === null) return dflt;
  const s = v.trim().toLowerCase();
  return !(s === '' || s === '0' || s === 'no' || s === 'false' || s === 'none');
}

export function queryInt(q: URLSearchParams, name: string, dflt?: number): number | undefined {
  const v = q.get(name);
  if (v === null || v === '') return dflt;
  if (!/^-?\d+$/.test(v.trim())) throw invalidArgument(`invalid value for ${name}: ${JSON.stringify(v)}: must be an integer`);
  return Number.parseInt(v, 10);
}

export function queryString(q: URLSearchParams, name: string): string | undefined {
  const v = q.get(name);
  return v === null || v === '' ? undefined : v;
}

export function sendJson(ctx: RequestContext, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  ctx.res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  ctx.res.end(text);
}

export function sendNoContent(ctx: RequestContext, status = 204): void {
  ctx.res.writeHead(status);
  ctx.res.end();
}
