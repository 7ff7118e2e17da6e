/** /containers/...: the Docker wire format of the container lifecycle. */
import type { Router } from '../router.js';
import { queryBool, queryInt, queryString, readJsonObject, sendJson, sendNoContent, type RequestContext } from '../request.js';
import { parseFilters, matchLabels, parseUntil } from '../filters.js';
import type { Engine } from '../../engine/engine.js';
import type { ContainerService } from '../../engine/containers/container-service.js';
import type { CreateConfig, HostConfig, WaitCondition } from '../../lib/docker-api-types.js';
import { invalidArgument, notFound } from '../../lib/errors.js';
import { inspectContainer } from '../container-json.js';
import { ContainerList, LIST_FILTERS } from '../container-list.js';
import { checkMountsForVersion } from './volumes.js';
import { WorkGate } from '../../lib/work-gate.js';
import { versionBefore } from '../api-version.js';

/** How many creates and removes run at once (see WorkGate); more would not finish sooner on one thread. */
const WRITE_CONCURRENCY = 8;

export function containerRoutes(r: Router, engine: Engine, containers: ContainerService): void {
  // Creates and removes are admitted a few at a time, so listing never waits behind a flood of them.
  const writes = new WorkGate(WRITE_CONCURRENCY);
  r.on('POST', '/containers/create', async (ctx) => {
    const body = await readJsonObject(ctx);
    const { config, hostConfig, networkingConfig } = parseCreateBody(body);
    checkMountsForVersion(ctx.version, hostConfig.Mounts);
    // As dockerd: KernelMemory is ignored from API 1.42 on, KernelMemoryTCP before 1.40.
    if (!versionBefore(ctx.version, '1.42')) delete hostConfig.KernelMemory;
    if (versionBefore(ctx.version, '1.40')) delete hostConfig.KernelMemoryTCP;
    const name = queryString(ctx.query, 'name');
    sendJson(ctx, 201, await writes.run(() => containers.create({ name, config, hostConfig, networkingConfig })));
  });
  const list = new ContainerList(containers, (ref) => engine.images.idOf(ref));
  r.on('GET', '/containers/json', (ctx) => listContainers(ctx, list, containers));
  r.on('GET', '/containers/:id/json', async (ctx) => {
    const c = containers.get(ctx.params.id!);
    const size = queryBool(ctx.query, 'size') ? await containers.size(c).catch(() => undefined) : undefined;
    sendJson(ctx, 200, inspectContainer(c, engine.images, ctx.version, engine.config.dataRoot, size, containers.execIds(c.id)));
  });
  r.on('POST', '/containers/:id/start', async (ctx) => {
    await containers.start(ctx.params.id!);
    sendNoContent(ctx);
  });
  r.on('POST', '/containers/:id/stop', async (ctx) => {
    await containers.stop(ctx.params.id!, { timeout: queryInt(ctx.query, 't'), signal: queryString(ctx.query, 'signal') });
    sendNoContent(ctx);
  });
  r.on('POST', '/containers/:id/restart', async (ctx) => {
    await containers.restart(ctx.params.id!, { timeout: queryInt(ctx.query, 't'), signal: queryString(ctx.query, 'signal') });
    sendNoContent(ctx);
  });
  r.on('POST', '/containers/:id/kill', async (ctx) => {
    await containers.kill(ctx.params.id!, queryString(ctx.query, 'signal'));
    sendNoContent(ctx);
  });
  r.on('POST', '/containers/:id/pause', async (ctx) => {
    await containers.pause(ctx.params.id!);
    sendNoContent(ctx);
  });
  r.on('POST', '/containers/:id/unpause', async (ctx) => {
    await containers.unpause(ctx.params.id!);
    sendNoContent(ctx);
  });
  r.on('POST', '/containers/:id/update', async (ctx) => {
    sendJson(ctx, 200, await containers.update(ctx.params.id!, await readJsonObject(ctx)));
  });
  r.on('POST', '/containers/:id/rename', (ctx) => {
    containers.rename(ctx.params.id!, ctx.query.get('name') ?? '');
    sendNoContent(ctx);
  });
  r.on('DELETE', '/containers/:id', async (ctx) => {
    if (queryBool(ctx.query, 'link')) containers.removeLink(ctx.params.id!);
    else await writes.run(() => containers.remove(ctx.params.id!, { force: queryBool(ctx.query, 'force'), volumes: queryBool(ctx.query, 'v') }));
    sendNoContent(ctx);
  });
  // A link's name is /<parent>/<alias> (`docker rm --link`); only links have a slash in their name.
  r.on('DELETE', '/containers/:parent/:alias', (ctx) => {
    const name = `/${ctx.params.parent}/${ctx.params.alias}`;
    if (!queryBool(ctx.query, 'link')) throw notFound(`No such container: ${name}`);
    containers.removeLink(name);
    sendNoContent(ctx);
  });
  r.on('POST', '/containers/:id/wait', (ctx) => waitContainer(ctx, containers));
  r.on('POST', '/containers/prune', async (ctx) => {
    const filters = parseFilters(ctx.query.get('filters'), ['until', 'label', 'label!']);
    const deleted: string[] = [];
    let reclaimed = 0;
    const untilRaw = filters.get('until')?.[0];
    const until = untilRaw ? parseUntil(untilRaw) : undefined;
    for (const c of containers.all()) {
      if (c.state.status !== 'exited' && c.state.status !== 'created' && c.state.status !== 'dead') continue;
      if (!matchLabels(filters.get('label'), c.config.Labels)) continue;
      if ((filters.get('label!') ?? []).some((l) => matchLabels([l], c.config.Labels))) continue;
      if (until !== undefined && Date.parse(c.created) >= until) continue;
      // As dockerd: the space is the writable layer's, measured before the removal.
      const size = await containers.size(c).then((s) => s.rw, () => 0);
      await containers.remove(c.id, { force: false, volumes: false }).then(() => {
        deleted.push(c.id);
        reclaimed += size;
      }, () => undefined);
    }
    sendJson(ctx, 200, { ContainersDeleted: deleted.length ? deleted : null, SpaceReclaimed: reclaimed });
  });
}


const STRING_LIST_FIELDS = ['Cmd', 'Entrypoint'] as const;

/** The create body: Config fields at the top level, plus HostConfig and NetworkingConfig. */
function parseCreateBody(body: Record<string, unknown>): { config: CreateConfig; hostConfig: HostConfig; networkingConfig: Record<string, unknown> } {
  const { HostConfig: hc, NetworkingConfig: nc, ...rest } = body;
  const config = rest as CreateConfig;
  for (const f of STRING_LIST_FIELDS) {
    const v = config[f];
    if (typeof v === 'string') config[f] = [v];
    else if (v !== undefined && v !== null && (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))) throw invalidArgument(`invalid JSON: ${f} must be a list of strings`);
  }
  if (config.Env !== undefined && config.Env !== null && (!Array.isArray(config.Env) || config.Env.some((x) => typeof x !== 'string'))) throw invalidArgument('invalid JSON: Env must be a list of strings');
  if (config.Image !== undefined && typeof config.Image !== 'string') throw invalidArgument('invalid JSON: Image must be a string');
  if (config.Labels !== undefined && config.Labels !== null && (typeof config.Labels !== 'object' || Array.isArray(config.Labels))) throw invalidArgument('invalid JSON: Labels must be an object');
  for (const b of ['Tty', 'OpenStdin', 'StdinOnce', 'AttachStdin', 'AttachStdout', 'AttachStderr'] as const) {
    if (config[b] !== undefined && typeof config[b] !== 'boolean') throw invalidArgument(`invalid JSON: ${b} must be a boolean`);
  }
  if (hc !== undefined && hc !== null && (typeof hc !== 'object' || Array.isArray(hc))) throw invalidArgument('invalid JSON: HostConfig must be an object');
  const hostConfig = (hc ?? {}) as HostConfig;
  const endpoints = (nc as { EndpointsConfig?: Record<string, unknown> } | undefined)?.EndpointsConfig ?? {};
  return { config, hostConfig, networkingConfig: endpoints };
}

async function listContainers(ctx: RequestContext, list: ContainerList, containers: ContainerService): Promise<void> {
  const all = queryBool(ctx.query, 'all');
  const limit = queryInt(ctx.query, 'limit', -1)!;
  const rawFilters = ctx.query.get('filters');
  const selected = list.select({ all, limit, filters: parseFilters(rawFilters, LIST_FILTERS) });
  const now = Date.now();
  const parts = selected.map((c) => list.entry(c, now));
  let body: Buffer[];
  if (queryBool(ctx.query, 'size')) {
    await Promise.all(selected.map(async (c, i) => {
      const size = await containers.size(c).catch(() => ({ rw: 0, rootFs: 0 }));
      parts[i] = `${parts[i]!.slice(0, -1)},"SizeRw":${JSON.stringify(size.rw)},"SizeRootFs":${JSON.stringify(size.rootFs)}}`;
    }));
    body = [Buffer.from(`[${parts.join(',')}]`)];
  } else {
    body = list.body(`${all ? 1 : 0} ${limit} ${rawFilters ?? ''}`, parts);
  }
  let length = 0;
  for (const b of body) length += b.length;
  ctx.res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': length });
  // Written in one go: the socket is corked until the next tick, so this is a single writev.
  for (let i = 0; i < body.length - 1; i++) ctx.res.write(body[i]);
  ctx.res.end(body[body.length - 1]);
}

async function waitContainer(ctx: RequestContext, containers: ContainerService): Promise<void> {
  const condition = (ctx.query.get('condition') || 'not-running') as WaitCondition;
  if (!['not-running', 'next-exit', 'removed'].includes(condition)) throw invalidArgument(`invalid condition: "${condition}"`);
  const w = containers.wait(ctx.params.id!, condition);
  // Headers go out at once: clients (docker run) start the container only after they see them.
  ctx.res.writeHead(200, { 'Content-Type': 'application/json' });
  ctx.res.flushHeaders();
  const result = w.immediate ?? (await w.pending!);
  ctx.res.end(JSON.stringify(result) + '\n');
}
