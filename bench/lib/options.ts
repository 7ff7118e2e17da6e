import { parseArgs } from 'node:util';
import { ENGINE_NAMES, type EngineName } from '../engines/engine.js';

/** Command-line options of the suite; `--quick` shrinks every count for a smoke run. */

export interface Options {
  engines: EngineName[];
  install: boolean;
  only?: number[];
  iterations: number;
  containers: number;
  scale: number;
  pullIterations: number;
  pullMB: number;
  pushIterations: number;
  saveIterations: number;
  logIterations: number;
  logMB: number;
  commitIterations: number;
  commitMiB: number;
  buildIterations: number;
  buildMiB: number;
  cpIterations: number;
  cpMB: number;
  composeIterations: number;
  composeServices: number;
  rateRounds: number;
  rateSeconds: number;
  connections: number;
  /** Clients creating and removing containers while listing is timed (workload 10). */
  writers: number;
  /** Replicas of the 3-node swarm service, and how many clusters are formed (workload 17). */
  swarmReplicas: number;
  swarmIterations: number;
  json?: string;
  berthLogLevel: string;
  quick: boolean;
}

export const USAGE = `usage: bash bench/run.sh [options]

Runs every workload against berthd and, alternating in the same run, against dockerd and podman's
Docker-compatible service when they are installed, all on loopback sockets with one local registry.

  --engines LIST         berth,dockerd,podman (default: all that are installed)
  --install              apt-get install docker.io and podman first when missing
  --only LIST            workload numbers to run, e.g. 1,2,8 (default: all)
  --iterations N         samples for run --rm, the API round trip and crun (default 10)
  --containers N         containers started with docker run -d (default 100)
  --scale N              containers for the second list-rate measurement (default 1000, 0 skips)
  --pull-iterations N    cold pulls per engine (default 5); --pull-mb MB image size (default 60)
  --push-iterations N    pushes of the big image to an empty repository per engine (default 5)
  --save-iterations N    save + load rounds of the big image per engine (default 5)
  --log-iterations N     200 MB log runs per engine (default 3); --log-mb MB (default 200)
  --commit-iterations N  commits per engine (default 3); --commit-mib MiB written (default 50)
  --build-iterations N   builds per engine, cold and cached (default 3); --build-mib MiB COPY'd (default 20)
  --cp-iterations N      docker cp in and out per engine (default 3); --cp-mb MB tree size (default 100)
  --compose-iterations N compose up/down cycles per engine (default 5); --compose-services N (default 10)
  --rate-rounds N        rounds of each request-rate measurement (default 3)
  --rate-seconds S       length of one round (default 3)
  --connections N        concurrent keep-alive clients for request rates (default 8)
  --writers N            clients creating and removing containers in workload 16 (default 200)
  --swarm-replicas N     replicas of the 3-node swarm service in workload 17 (default 30)
  --swarm-iterations N   clusters formed and timed in workload 17 (default 3)
  --json PATH            raw figures (default bench/results/<date>.json)
  --berth-log-level L    berthd's --log-level (default info)
  --quick                small counts everywhere, for a smoke run
`;

export function parseOptions(argv: string[]): Options | 'help' {
  const { values } = parseArgs({
    args: argv,
    allowPositionals: false,
    options: {
      engines: { type: 'string' },
      install: { type: 'boolean' },
      only: { type: 'string' },
      iterations: { type: 'string' },
      containers: { type: 'string' },
      scale: { type: 'string' },
      'pull-iterations': { type: 'string' },
      'pull-mb': { type: 'string' },
      'push-iterations': { type: 'string' },
      'save-iterations': { type: 'string' },
      'log-iterations': { type: 'string' },
      'log-mb': { type: 'string' },
      'commit-iterations': { type: 'string' },
      'commit-mib': { type: 'string' },
      'build-iterations': { type: 'string' },
      'build-mib': { type: 'string' },
      'cp-iterations': { type: 'string' },
      'cp-mb': { type: 'string' },
      'compose-iterations': { type: 'string' },
      'compose-services': { type: 'string' },
      'rate-rounds': { type: 'string' },
      'rate-seconds': { type: 'string' },
      connections: { type: 'string' },
      writers: { type: 'string' },
      json: { type: 'string' },
      'berth-log-level': { type: 'string' },
      quick: { type: 'boolean' },
      'swarm-replicas': { type: 'string' },
      'swarm-iterations': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  const quick = !!values.quick;
  const int = (name: string, v: string | undefined, dflt: number, quickValue: number, min = 0): number => {
    if (v === undefined) return quick ? quickValue : dflt;
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} wants a number ≥ ${min}, got ${v}`);
    return n;
  };
  const engines = (values.engines ?? ENGINE_NAMES.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  for (const e of engines) if (!ENGINE_NAMES.includes(e as EngineName)) throw new Error(`unknown engine ${e} (berth, dockerd, podman)`);
  const only = values.only?.split(',').map((s) => Number(s.trim()));
  if (only?.some((n) => !Number.isInteger(n) || n < 1 || n > 17)) throw new Error(`--only wants workload numbers 1-17, got ${values.only}`);
  const containers = int('containers', values.containers, 100, 10, 1);
  return {
    engines: engines as EngineName[],
    install: !!values.install,
    only,
    iterations: int('iterations', values.iterations, 10, 3, 1),
    containers,
    scale: int('scale', values.scale, 1000, 0),
    pullIterations: int('pull-iterations', values['pull-iterations'], 5, 2, 1),
    pullMB: int('pull-mb', values['pull-mb'], 60, 6, 1),
    pushIterations: int('push-iterations', values['push-iterations'], 5, 2, 1),
    saveIterations: int('save-iterations', values['save-iterations'], 5, 2, 1),
    logIterations: int('log-iterations', values['log-iterations'], 3, 1, 1),
    logMB: int('log-mb', values['log-mb'], 200, 10, 1),
    commitIterations: int('commit-iterations', values['commit-iterations'], 3, 1, 1),
    commitMiB: int('commit-mib', values['commit-mib'], 50, 5, 1),
    buildIterations: int('build-iterations', values['build-iterations'], 3, 1, 1),
    buildMiB: int('build-mib', values['build-mib'], 20, 2, 1),
    cpIterations: int('cp-iterations', values['cp-iterations'], 3, 1, 1),
    cpMB: int('cp-mb', values['cp-mb'], 100, 5, 1),
    composeIterations: int('compose-iterations', values['compose-iterations'], 5, 1, 1),
    composeServices: int('compose-services', values['compose-services'], 10, 10, 1),
    rateRounds: int('rate-rounds', values['rate-rounds'], 3, 1, 1),
    rateSeconds: int('rate-seconds', values['rate-seconds'], 3, 1, 1),
    connections: int('connections', values.connections, 8, 8, 1),
    writers: int('writers', values.writers, 200, 20, 1),
    swarmReplicas: int('swarm-replicas', values['swarm-replicas'], 30, 6, 1),
    swarmIterations: int('swarm-iterations', values['swarm-iterations'], 3, 1, 1),
    json: values.json,
    berthLogLevel: values['berth-log-level'] ?? 'info',
    quick,
  };
}
