/** Request helpers shared by the swarm, node, service and task routes. */
import { invalidArgument } from '../../lib/errors.js';
import type { RequestContext } from '../request.js';

/** The `version` query parameter every swarm object update must carry. */
export function objectVersion(ctx: RequestContext, what: string): number {
  const raw = ctx.query.get('version') ?? '';
  if (!/^\d+$/.test(raw)) throw invalidArgument(`invalid ${what} version '${raw}': strconv.ParseUint: parsing ${JSON.stringify(raw)}: invalid syntax`);
  return Number(raw);
}

/** dockerd answers these updates with 200 and no body. */
export function sendEmpty(ctx: RequestContext): void {
  ctx.res.writeHead(200, { 'Content-Length': '0' });
  ctx.res.end();
}
