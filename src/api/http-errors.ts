/** The one place where error kinds become HTTP status codes. */
import type { ServerResponse } from 'node:http';
import { BerthError, type ErrorKind } from '../lib/errors.js';
import { log } from '../lib/log.js';

const STATUS: Record<ErrorKind, number> = {
  'invalid-argument': 400,
  unauthorized: 401,
  forbidden: 403,
  'not-found': 404,
  conflict: 409,
  'not-modified': 304,
  unavailable: 503,
  'not-implemented': 501,
  internal: 500,
};

export function statusOf(err: unknown): number {
  return err instanceof BerthError ? STATUS[err.kind] : 500;
}

/**
 * The message a client sees. A JavaScript engine error (TypeError and the like) is a Berth bug whose
 * text ("x.startsWith is not a function") means nothing to a client: it is logged with its stack and
 * answered in general terms.
 */
export function errorText(err: unknown): string {
  if (err instanceof TypeError || err instanceof ReferenceError || err instanceof RangeError || err instanceof SyntaxError) {
    return 'internal error in berthd (details are in its log)';
  }
  return err instanceof Error ? err.message : String(err);
}

export function sendError(res: ServerResponse, err: unknown): void {
  const status = statusOf(err);
  if (status >= 500) log.error('request failed', { err: err instanceof Error ? err.stack : String(err) });
  if (res.headersSent) {
    res.destroy(err instanceof Error ? err : undefined);
    return;
  }
  if (status === 304) {
    res.writeHead(304);
    res.end();
    return;
  }
  const body = JSON.stringify({ message: errorText(err) });
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}
