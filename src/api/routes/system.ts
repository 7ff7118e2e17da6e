/** /_ping, /version, /info, /auth and /events. */
import type { Router } from '../router.js';
import { COMMON_HEADER_LIST, SERVER_VERSION } from '../router.js';
import { API_VERSION, MIN_API_VERSION, versionBefore } from '../api-version.js';
import { readJsonObject, sendJson, queryString, type RequestContext } from '../request.js';
import type { Engine } from '../../engine/engine.js';
import { invalidArgument } from '../../lib/errors.js';
import { parseFilters } from '../filters.js';
import type { EngineEvent } from '../../lib/docker-api-types.js';
import { swarmInfoJson, swarmPingState } from './swarm-json.js';

/** Every header of a /_ping answer, built once per Swarm state and body length: clients poll it. */
const pingHeaders = (swarm: string, length: string): string[] => [
  ...COMMON_HEADER_LIST,
  'Builder-Version', '1',
  'Swarm', swarm,
  'Cache-Control', 'no-cache, no-store, must-revalidate',
  'Pragma', 'no-cache',
  'Content-Type', 'text/plain; charset=utf-8',
  'Content-Length', length,
];
const PING = new Map(['inactive', 'active/manager'].map((swarm) => [swarm, { get: pingHeaders(swarm, '2'), head: pingHeaders(swarm, '0') }]));

export function systemRoutes(r: Router, engine: Engine): void {
  const ping = () => {
    const state = swarmPingState(engine.swarm);
    return PING.get(state) ?? { get: pingHeaders(state, '2'), head: pingHeaders(state, '0') };
  };
  r.on('GET', '/_ping', (ctx) => {
    ctx.res.writeHead(200, ping().get);
    ctx.res.end('OK');
  }, { ownHeaders: true });
  r.on('HEAD', '/_ping', (ctx) => {
    ctx.res.writeHead(200, ping().head);
    ctx.res.end();
  }, { ownHeaders: true });

  r.on('GET', '/version', (ctx) => {
    const h = engine.host;
    ctx.res.setHeader('Builder-Version', '1'); // the classic builder (POST /build)
    sendJson(ctx, 200, {
      Platform: { Name: 'Berth' },
      Components: [
        {
          Name: 'Engine',
          Version: SERVER_VERSION,
          Details: { ApiVersion: API_VERSION, MinAPIVersion: MIN_API_VERSION, Arch: h.goArch, Os: 'linux', KernelVersion: h.kernelVersion, GitCommit: '', BuildTime: '', GoVersion: `node${process.versions.node}`, Experimental: 'false' },
        },
      ],
      Version: SERVER_VERSION,
      ApiVersion: API_VERSION,
      MinAPIVersion: MIN_API_VERSION,
      GitCommit: '',
      GoVersion: `node${process.versions.node}`,
      Os: 'linux',
      Arch: h.goArch,
      KernelVersion: h.kernelVersion,
      BuildTime: '',
    });
  });

  r.on('GET', '/info', (ctx) => sendJson(ctx, 200, info(engine)));

  r.on('POST', '/auth', async (ctx) => {
    sendJson(ctx, 200, await engine.login(await readJsonObject(ctx)));
  });

  r.on('GET', '/events', (ctx) => streamEvents(ctx, engine));
}

function info(engine: Engine): Record<string, unknown> {
  const h = engine.host;
  const c = engine.containerCounts();
  const cfg = engine.config;
  return {
    ID: engine.host.name,
    Containers: c.total,
    ContainersRunning: c.running,
    ContainersPaused: c.paused,
    ContainersStopped: c.stopped,
    Images: engine.images.count(),
    Driver: 'overlay2',
    DriverStatus: [['Backing Filesystem', 'extfs'], ['Supports d_type', 'true']],
    Plugins: { Volume: ['local'], Network: ['bridge', 'host', 'null'], Authorization: null, Log: ['json-file'] },
    MemoryLimit: true,
    SwapLimit: true,
    CpuCfsPeriod: true,
    CpuCfsQuota: true,
    CPUShares: true,
    CPUSet: true,
    PidsLimit: true,
    IPv4Forwarding: true,
    Debug: cfg.logLevel === 'debug',
    NFd: 0,
    OomKillDisable: engine.cgroupFacts().oomKillDisable,
    NGoroutines: 0,
    SystemTime: new Date().toISOString(),
    LoggingDriver: 'json-file',
    CgroupDriver: 'cgroupfs',
    CgroupVersion: engine.cgroupVersion,
    NEventsListener: 0,
    KernelVersion: h.kernelVersion,
    OperatingSystem: h.operatingSystem,
    OSVersion: h.osVersion,
    OSType: 'linux',
    Architecture: h.architecture,
    IndexServerAddress: 'https://index.docker.io/v1/',
    RegistryConfig: {
      InsecureRegistryCIDRs: ['127.0.0.0/8', '::1/128', ...cfg.insecureRegistries.filter((x) => x.includes('/'))],
      IndexConfigs: Object.fromEntries([
        ['docker.io', { Name: 'docker.io', Mirrors: cfg.registryMirrors, Secure: true, Official: true }],
        ...cfg.insecureRegistries.filter((x) => !x.includes('/')).map((x) => [x, { Name: x, Mirrors: [], Secure: false, Official: false }]),
      ]),
      Mirrors: cfg.registryMirrors,
    },
    NCPU: h.ncpu,
    MemTotal: h.memTotal,
    GenericResources: null,
    DockerRootDir: cfg.dataRoot,
    HttpProxy: process.env.HTTP_PROXY ?? '',
    HttpsProxy: process.env.HTTPS_PROXY ?? '',
    NoProxy: process.env.NO_PROXY ?? '',
    Name: h.name,
    Labels: [],
    ExperimentalBuild: false,
    ServerVersion: SERVER_VERSION,
    Runtimes: { crun: { path: 'crun' }, runc: { path: 'runc' } },
    DefaultRuntime: cfg.defaultRuntime,
    Swarm: swarmInfoJson(engine.swarm),
    LiveRestoreEnabled: true,
    Isolation: '',
    InitBinary: 'catatonit',
    ContainerdCommit: { ID: '' },
    RuncCommit: { ID: '' },
    InitCommit: { ID: '' },
    SecurityOptions: ['name=seccomp,profile=builtin', 'name=cgroupns'],
    Warnings: engine.cgroupFacts().warnings,
  };
}

const EVENT_FILTERS = ['type', 'event', 'container', 'image', 'label', 'network', 'volume', 'daemon', 'scope', 'service', 'node'] as const;

/** Parses `since`/`until` (Unix seconds with optional fraction) into nanoseconds. */
function toNanos(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+(\.\d+)?$/.test(v)) throw invalidArgument(`invalid timestamp: ${v}`);
  const [s, frac = ''] = v.split('.');
  return Number(s) * 1e9 + Number((frac + '000000000').slice(0, 9));
}

function streamEvents(ctx: RequestContext, engine: Engine): void {
  const filters = parseFilters(ctx.query.get('filters'), EVENT_FILTERS);
  const since = toNanos(queryString(ctx.query, 'since'));
  const until = toNanos(queryString(ctx.query, 'until'));
  const match = (e: EngineEvent) => eventMatches(e, filters);
  const legacy = versionBefore(ctx.version, '1.52');
  const format = (e: EngineEvent) => {
    const out: Record<string, unknown> = legacy && e.Type !== 'network' ? { status: e.Action, id: e.Actor.ID, from: e.Actor.Attributes.image ?? undefined, ...e } : { ...e };
    return JSON.stringify(out) + '\n';
  };
  ctx.res.writeHead(200, { 'Content-Type': 'application/json' });
  ctx.res.flushHeaders();
  const now = Date.now() * 1e6;
  if (since !== undefined) for (const e of engine.events.replay(since, until)) if (match(e)) ctx.res.write(format(e));
  if (until !== undefined && until <= now) {
    ctx.res.end();
    return;
  }
  const unsubscribe = engine.events.subscribe((e) => {
    if (until !== undefined && e.timeNano > until) return;
    if (match(e)) ctx.res.write(format(e));
  });
  let timer: NodeJS.Timeout | undefined;
  if (until !== undefined) timer = setTimeout(() => ctx.res.end(), Math.max(0, (until - now) / 1e6));
  ctx.res.on('close', () => {
    unsubscribe();
    if (timer) clearTimeout(timer);
  });
}

function eventMatches(e: EngineEvent, f: Map<string, string[]>): boolean {
  const any = (key: string, pred: (v: string) => boolean) => {
    const vs = f.get(key);
    return !vs?.length || vs.some(pred);
  };
  const attrs = e.Actor.Attributes;
  return (
    any('type', (v) => v === e.Type) &&
    any('event', (v) => v === e.Action || e.Action.startsWith(`${v}:`)) &&
    any('scope', (v) => v === e.scope) &&
    any('container', (v) => e.Type === 'container' && (e.Actor.ID.startsWith(v) || attrs.name === v)) &&
    any('image', (v) => (e.Type === 'image' && (e.Actor.ID === v || attrs.name === v)) || attrs.image === v) &&
    any('network', (v) => e.Type === 'network' && (e.Actor.ID.startsWith(v) || attrs.name === v)) &&
    any('volume', (v) => e.Type === 'volume' && e.Actor.ID === v) &&
    any('label', (v) => {
      const eq = v.indexOf('=');
      return eq < 0 ? v in attrs : attrs[v.slice(0, eq)] === v.slice(eq + 1);
    })
  );
}
