/**
 * One error type for the whole engine. Code below api/ throws BerthError with a kind;
 * api/ maps kinds to HTTP status codes in one table (api/http-errors.ts).
 * Messages follow dockerd's wording wherever clients parse them.
 */
export type ErrorKind =
  | 'invalid-argument' // 400
  | 'unauthorized' // 401
  | 'forbidden' // 403
  | 'not-found' // 404
  | 'conflict' // 409
  | 'not-modified' // 304
  | 'unavailable' // 503
  | 'not-implemented' // 501
  | 'internal'; // 500

export class BerthError extends Error {
  readonly kind: ErrorKind;
  constructor(kind: ErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BerthError';
    this.kind = kind;
  }
}

export const invalidArgument = (msg: string, cause?: unknown) => new BerthError('invalid-argument', msg, { cause });
export const notFound = (msg: string) => new BerthError('not-found', msg);
export const conflict = (msg: string) => new BerthError('conflict', msg);
export const unauthorized = (msg: string) => new BerthError('unauthorized', msg);
export const notModified = () => new BerthError('not-modified', '');
export const unavailable = (msg: string) => new BerthError('unavailable', msg);
export const notImplemented = (msg: string) => new BerthError('not-implemented', msg);
export const internal = (msg: string, cause?: unknown) => new BerthError('internal', msg, { cause });

export function isKind(err: unknown, kind: ErrorKind): boolean {
  return err instanceof BerthError && err.kind === kind;
}

/** A short text for any thrown value. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
