/**
 * Every request is checked against the Engine API's schema before its handler acts on it, keyed by
 * the spec's operation (method + path template), so a route needs no code of its own to be checked:
 * the router attaches the operation, readJson checks the body, the router checks the query.
 *
 * What is checked, and how nulls are normalised, is lib/engine-api-schema.ts's business. Each
 * operation's validator is compiled once: at start-up in the background (Router.warmUp), or on the
 * operation's first request if that comes first.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { OPERATIONS, compileApiSchema, type OperationSpec, type QueryCheck } from '../lib/engine-api-schema.js';
import { invalidArgument } from '../lib/errors.js';
import { log } from '../lib/log.js';

export class ApiOperation {
  readonly #body: object | undefined;
  readonly #query: [string, QueryCheck][] | undefined;
  #validate: ValidateFunction | undefined;

  constructor(op: OperationSpec) {
    this.#body = op.body;
    this.#query = op.query ? Object.entries(op.query) : undefined;
  }

  get checksQuery(): boolean {
    return this.#query !== undefined;
  }

  /** Throws a 400 naming the parameter when a typed query parameter has a value Go would not parse. */
  checkQuery(q: URLSearchParams): void {
    for (const [name, check] of this.#query ?? []) {
      const v = q.get(name);
      if (v === null || v === '') continue;
      if (check.type === 'integer') {
        const s = v.trim();
        if (!/^[+-]?\d+$/.test(s)) throw invalidArgument(`invalid value for ${name}: ${JSON.stringify(v)}: must be an integer`);
        const n = Number(s);
        if (n < check.minimum! || n > check.maximum!) throw invalidArgument(`invalid value for ${name}: ${JSON.stringify(v)}: value out of range for ${check.goType}`);
      } else if (check.enum && !check.enum.includes(v)) {
        // dockerd's wording for `condition` of wait, the one such parameter clients meet.
        throw invalidArgument(`invalid ${name}: ${JSON.stringify(v)}`);
      }
    }
  }

  /** Throws a 400 naming the field when the parsed body does not fit; normalises nulls in place. */
  checkBody(body: unknown): void {
    if (this.#body === undefined || body === undefined) return;
    const validate = (this.#validate ??= this.#compile());
    if (!validate(body)) throw invalidArgument(describe(validate.errors?.[0]));
  }

  /** Compiles the body validator now (at start-up, off the first request's path); never throws. */
  warm(): void {
    try {
      if (this.#body !== undefined) this.#validate ??= this.#compile();
    } catch (err) {
      // The first request will meet the same error and answer it; start-up goes on.
      log.error('compiling a request validator failed', { err: err instanceof Error ? err.stack : String(err) });
    }
  }

  #compile(): ValidateFunction {
    return compileApiSchema(this.#body!);
  }
}

/** "/HostConfig/Binds/0" → "HostConfig.Binds[0]". */
function fieldPath(instancePath: string): string {
  if (instancePath === '') return 'body';
  let out = '';
  for (const part of instancePath.slice(1).split('/')) {
    const name = part.replaceAll('~1', '/').replaceAll('~0', '~');
    out += /^\d+$/.test(name) ? `[${name}]` : out === '' ? name : `.${name}`;
  }
  return out;
}

function jsonKind(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'bool';
  return typeof v; // string, number, object
}

/** Go decoder's shape: "json: cannot unmarshal number into Go struct field HostConfig.NetworkMode of type string". */
function describe(err: ErrorObject | undefined): string {
  if (!err) return 'invalid request body';
  const field = fieldPath(err.instancePath);
  const goType = (err.parentSchema as { goType?: string } | undefined)?.goType ?? 'the expected type';
  switch (err.keyword) {
    case 'type':
      return `json: cannot unmarshal ${jsonKind(err.data)} into Go struct field ${field} of type ${goType}`;
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return `json: cannot unmarshal number ${String(err.data)} into Go struct field ${field} of type ${goType}`;
    case 'enum': {
      const allowed = ((err.schema as unknown[]) ?? []).filter((e) => typeof e === 'string' && e !== '');
      return `invalid value ${JSON.stringify(err.data)} for ${field}: must be one of ${allowed.map((e) => JSON.stringify(e)).join(', ')}`;
    }
    default:
      return `invalid ${field}: ${err.message ?? 'does not match the API schema'}`;
  }
}

/** The operation a route serves: its path template with `:param` in place of the spec's `{param}`. */
export function apiOperation(method: string, routePath: string): ApiOperation | undefined {
  const key = `${method} ${routePath.replace(/\/:[^/]+/g, '/{}')}`;
  const op = OPERATIONS[key];
  return op ? new ApiOperation(op) : undefined;
}
