/**
 * Registry error bodies (`{"errors":[{code,message,detail}]}`) and the error Berth raises for a
 * failed registry request. Messages use the `<code in words>: <message>` form dockerd prints.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import { BerthError, type ErrorKind } from '../lib/errors.js';

export interface RegistryErrorEntry {
  code: string;
  message: string;
  detail?: unknown;
}

/** A registry answered with an unexpected status. `message` reads `Get "<url>": <detail>`. */
export class RegistryStatusError extends BerthError {
  readonly status: number;
  readonly errors: RegistryErrorEntry[];
  /** The part after the request description, e.g. `manifest unknown: manifest unknown`. */
  readonly detail: string;
  /** `Get "<url>"`. */
  readonly request: string;
  constructor(kind: ErrorKind, request: string, status: number, errors: RegistryErrorEntry[], detail: string) {
    super(kind, `${request}: ${detail}`);
    this.request = request;
    this.status = status;
    this.errors = errors;
    this.detail = detail;
  }

  hasCode(code: string): boolean {
    return this.errors.some((e) => e.code === code);
  }
}

const MAX_ERROR_BODY = 64 * 1024;

/** Go's method spelling in url.Error messages (`Get "…": …`). */
export function describeRequest(method: string, url: string | URL): string {
  const m = method.toUpperCase();
  return `${m.charAt(0)}${m.slice(1).toLowerCase()} "${String(url)}"`;
}

/** Parses a registry or token-server error body; returns [] when it is not one. */
export function parseErrorBody(body: Buffer | string): RegistryErrorEntry[] {
  let json: unknown;
  try {
    json = JSON.parse(body.toString());
  } catch {
    return [];
  }
  if (json === null || typeof json !== 'object') return [];
  const obj = json as Record<string, unknown>;
  if (Array.isArray(obj.errors)) {
    return obj.errors
      .filter((e): e is Record<string, unknown> => e !== null && typeof e === 'object')
      .map((e) => ({
        code: typeof e.code === 'string' ? e.code.toUpperCase() : 'UNKNOWN',
        message: typeof e.message === 'string' ? e.message : '',
        ...(e.detail !== undefined ? { detail: e.detail } : {}),
      }));
  }
  // Token servers (Docker Hub's among them) answer `{"details":"incorrect username or password"}`.
  for (const key of ['details', 'message', 'error_description', 'error']) {
    if (typeof obj[key] === 'string' && obj[key] !== '') return [{ code: '', message: obj[key] as string }];
  }
  return [];
}

/** `MANIFEST_UNKNOWN` + `manifest unknown` → `manifest unknown: manifest unknown`. */
export function formatErrorEntry(e: RegistryErrorEntry): string {
  if (e.code === '') return e.message;
  const words = e.code.toLowerCase().replace(/_/g, ' ');
  return e.message === '' ? words : `${words}: ${e.message}`;
}

function defaultDetail(status: number): string {
  switch (status) {
    case 401:
      return 'unauthorized: authentication required';
    case 403:
      return 'denied: requested access to the resource is denied';
    case 404:
      return 'not found';
    case 429:
      return 'toomanyrequests: too many requests';
    default:
      return `received unexpected HTTP status: ${status} ${STATUS_CODES[status] ?? ''}`.trimEnd();
  }
}

function kindFor(status: number): ErrorKind {
  if (status === 401) return 'unauthorized';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not-found';
  if (status === 429 || status === 502 || status === 503 || status === 504) return 'unavailable';
  return 'internal';
}

/** Consumes a failed response (bounded) and turns it into a RegistryStatusError. */
export async function errorFromResponse(res: IncomingMessage, method: string, url: string | URL): Promise<RegistryStatusError> {
  const status = res.statusCode ?? 0;
  let body: Buffer = Buffer.alloc(0);
  if (method.toUpperCase() !== 'HEAD') {
    body = await readLimited(res, MAX_ERROR_BODY).catch(() => Buffer.alloc(0));
  } else {
    res.resume();
  }
  const errors = parseErrorBody(body);
  const first = errors[0];
  let detail = first ? formatErrorEntry(first) : defaultDetail(status);
  if (first && first.code === '' && status === 401) detail = `unauthorized: ${first.message}`;
  return new RegistryStatusError(kindFor(status), describeRequest(method, url), status, errors, detail);
}

/** Reads a body, giving up (and destroying the stream) past `limit` bytes. */
export async function readLimited(res: NodeJS.ReadableStream & { destroy?: (e?: Error) => void }, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > limit) {
      const err = new BerthError('internal', `response body exceeds ${limit} bytes`);
      res.destroy?.(err);
      throw err;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
