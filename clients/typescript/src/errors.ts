/**
 * Errors raised by the client. Every error the daemon reports keeps the daemon's own message; the
 * class says which kind it is, so callers branch with `instanceof` (or on `code`) instead of text.
 */

/** Base class: something the daemon (or a stream it sent) reported. */
export class BerthApiError extends Error {
  /** HTTP status of the response, or 200 for an error reported inside a stream. */
  readonly statusCode: number;
  /** Stable code for programmatic checks. */
  readonly code: string = 'BERTH_API_ERROR';

  constructor(message: string, statusCode: number) {
    super(message);
    this.name = new.target.name;
    this.statusCode = statusCode;
  }
}

/** 400: invalid parameter, malformed body, API version outside the daemon's window. */
export class BadRequestError extends BerthApiError {
  override readonly code = 'BERTH_BAD_REQUEST';
}

/** 401: registry credentials refused. */
export class UnauthorizedError extends BerthApiError {
  override readonly code = 'BERTH_UNAUTHORIZED';
}

/** 403 */
export class ForbiddenError extends BerthApiError {
  override readonly code = 'BERTH_FORBIDDEN';
}

/** 404: no such container, image, or repository. */
export class NotFoundError extends BerthApiError {
  override readonly code = 'BERTH_NOT_FOUND';
}

/** 409: name in use, container running, image in use... */
export class ConflictError extends BerthApiError {
  override readonly code = 'BERTH_CONFLICT';
}

/** 5xx: the daemon failed. */
export class ServerError extends BerthApiError {
  override readonly code = 'BERTH_SERVER_ERROR';
}

/** An `{"error": ..., "errorDetail": ...}` record inside a progress stream (pull, push). */
export class StreamError extends BerthApiError {
  override readonly code = 'BERTH_STREAM_ERROR';
  /** errorDetail.code, when the daemon gave one. */
  readonly detailCode: number | undefined;

  constructor(message: string, detailCode?: number) {
    super(message, 200);
    this.detailCode = detailCode;
  }
}

/** A foreground `run` whose container exited non-zero. */
export class ContainerError extends Error {
  readonly code = 'BERTH_CONTAINER_FAILED';
  readonly containerId: string;
  readonly exitCode: number;
  /** What the container wrote on stderr. */
  readonly stderr: Buffer;

  constructor(containerId: string, exitCode: number, image: string, command: string[] | undefined, stderr: Buffer) {
    const cmd = command?.length ? ` '${command.join(' ')}'` : '';
    super(`Command${cmd} in image '${image}' returned non-zero exit status ${exitCode}: ${stderr.toString('utf8').trimEnd()}`);
    this.name = 'ContainerError';
    this.containerId = containerId;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

/** Picks the error class for an HTTP status. */
export function errorForStatus(statusCode: number, message: string): BerthApiError {
  switch (statusCode) {
    case 400:
      return new BadRequestError(message, statusCode);
    case 401:
      return new UnauthorizedError(message, statusCode);
    case 403:
      return new ForbiddenError(message, statusCode);
    case 404:
      return new NotFoundError(message, statusCode);
    case 409:
      return new ConflictError(message, statusCode);
    default:
      return statusCode >= 500 ? new ServerError(message, statusCode) : new BerthApiError(message, statusCode);
  }
}
