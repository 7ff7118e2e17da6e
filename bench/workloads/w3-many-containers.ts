import type { Engine } from '../engines/engine.js';
import { removeAllContainers } from '../engines/engine.js';
import { requestRate } from '../lib/load.js';
import type { Options } from '../lib/options.js';
import { mapLimit, sleep } from '../lib/timing.js';
import { alternate, cliFailure, eachEngine, printedId, type Ctx, type Workload } from './context.js';
import { createContainer, removeContainer, startContainer } from './container-api.js';

/**
 * 3 (and the second half of 4). N × `docker run -d busybox sleep 3600` through the CLI, taking turns
 * between engines; then, with N running: the engines' memory, `docker ps`, and the rate of
 * GET /containers/json. Then, one engine at a time, more containers (through the API, --network none)
 * up to the scale count, and the same list measurements again. Everything is removed at the end.
 */

const metricsOf = (o: Options) => withoutScaleUnlessAsked(o, [
  { id: 'run-d', workload: 3, title: `${o.containers} × \`docker run -d busybox sleep 3600\`, per container`, unit: 's' as const, better: 'lower' as const, goal: { factor: 0.2, dockerdReference: '298 ms' } },
  { id: 'mem-n', workload: 4, title: `memory (PSS, monitors included), ${o.containers} running`, unit: 'MiB' as const, better: 'lower' as const, goal: { factor: 0.25, dockerdReference: '442 MiB' } },
  { id: 'ps-n', workload: 3, title: `\`docker ps\`, ${o.containers} running`, unit: 's' as const, better: 'lower' as const },
  { id: 'list-n', workload: 3, title: `\`GET /containers/json\` rate, ${o.containers} running, ${o.connections} clients`, unit: 'req/s' as const, better: 'higher' as const, goal: { factor: 10, dockerdReference: '257 req/s' } },
  { id: 'mem-scale', workload: 4, title: `memory (PSS, monitors included), ${o.scale} running`, unit: 'MiB' as const, better: 'lower' as const },
  { id: 'ps-scale', workload: 3, title: `\`docker ps\`, ${o.scale} running`, unit: 's' as const, better: 'lower' as const },
  { id: 'list-scale', workload: 3, title: `\`GET /containers/json\` rate, ${o.scale} running, ${o.connections} clients`, unit: 'req/s' as const, better: 'higher' as const },
]);

function withoutScaleUnlessAsked<T extends { id: string }>(o: Options, defs: T[]): T[] {
  return o.scale > o.containers ? defs : defs.filter((d) => !d.id.endsWith('-scale'));
}

async function runningCount(e: Engine): Promise<number> {
  return (await e.api.expect('GET', '/containers/json', [200], { timeoutMs: 120_000 })).json<unknown[]>().length;
}

async function memorySamples(ctx: Ctx, metric: string, e: Engine, expectRunning: number): Promise<void> {
  const n = await runningCount(e);
  if (n !== expectRunning) throw new Error(`${n} containers running, expected ${expectRunning}`);
  let last: ReturnType<Engine['memory']> | undefined;
  for (let k = 0; k < 3; k++) {
    if (k) await sleep(500);
    last = e.memory();
    ctx.rec.sample(metric, e.name, last.bytes / 2 ** 20);
  }
  const parts = Object.entries(last!.byName)
    .sort((a, b) => b[1].bytes - a[1].bytes)
    .map(([name, v]) => `${name}${v.count > 1 ? ` ×${v.count}` : ''} ${(v.bytes / 2 ** 20).toFixed(1)}`);
  ctx.rec.note(metric, e.name, `MiB by process: ${parts.join(', ')}`);
}

async function psSamples(ctx: Ctx, metric: string, engines: Engine[], expect: number, rounds: number): Promise<Engine[]> {
  return alternate(
    ctx,
    [metric],
    rounds,
    async (e, _i, warmup) => {
      const r = await e.docker(['ps', '--no-trunc'], { timeoutMs: 120_000, keepStdout: 4 << 20 });
      if (r.code !== 0) throw cliFailure(['ps'], r);
      const rows = r.stdout.trim().split('\n').length - 1;
      if (rows !== expect) throw new Error(`docker ps listed ${rows} containers, expected ${expect}`);
      if (!warmup) ctx.rec.sample(metric, e.name, r.ms / 1000);
    },
    { warmup: 1, engines },
  );
}

function listRate(ctx: Ctx, metric: string, engines: Engine[]): Promise<Engine[]> {
  return alternate(
    ctx,
    [metric],
    ctx.opts.rateRounds,
    async (e) => {
      const r = await requestRate(e.socket, '/containers/json', { connections: ctx.opts.connections, seconds: ctx.opts.rateSeconds });
      ctx.rec.sample(metric, e.name, r.perSecond);
    },
    { engines, timeoutMs: (ctx.opts.rateSeconds + 300) * 1000 },
  );
}

export const manyContainers: Workload = {
  id: 3,
  name: 'many containers',
  metrics: metricsOf,
  async run(ctx: Ctx) {
    const n = ctx.opts.containers;
    const all = metricsOf(ctx.opts).map((d) => d.id);
    try {
      ctx.log(`  ${n} × docker run -d`);
      let ok = await alternate(
        ctx,
        all,
        n,
        async (e) => {
          const args = ['run', '-d', ctx.refs.busybox, 'sleep', '3600'];
          const r = await e.docker(args, { timeoutMs: 120_000 });
          if (r.code !== 0) throw cliFailure(args, r);
          printedId(r.stdout);
          ctx.rec.sample('run-d', e.name, r.ms / 1000);
        },
        { timeoutMs: 150_000 },
      );
      ctx.log(`  memory, docker ps and list rate with ${n} running`);
      ok = await eachEngine(ctx, ['mem-n'], (e) => memorySamples(ctx, 'mem-n', e, n), { engines: ok });
      await psSamples(ctx, 'ps-n', ok, n, 5);
      await listRate(ctx, 'list-n', ok);

      const extra = ctx.opts.scale - n;
      if (extra <= 0) return;
      // One engine at a time, so the machine never holds three engines' worth of containers.
      for (const e of ok) {
        ctx.log(`  ${e.name}: ${extra} more containers (API, --network none), then list again`);
        const created: string[] = [];
        const more = await eachEngine(
          ctx,
          ['mem-scale', 'ps-scale', 'list-scale'],
          async () => {
            await mapLimit(Array.from({ length: extra }), 4, async () => {
              const id = await createContainer(e, { Image: ctx.refs.busybox, Cmd: ['sleep', '3600'], HostConfig: { NetworkMode: 'none' } });
              created.push(id);
              await startContainer(e, id);
            });
            await memorySamples(ctx, 'mem-scale', e, ctx.opts.scale);
          },
          { engines: [e], timeoutMs: 1_800_000 },
        );
        if (more.length) {
          await psSamples(ctx, 'ps-scale', more, ctx.opts.scale, 3);
          await listRate(ctx, 'list-scale', more);
        }
        ctx.log(`  ${e.name}: removing the ${created.length} extra containers`);
        await mapLimit(created, 4, (id) => removeContainer(e, id)).catch((err: Error) => ctx.log(`  ${e.name}: removing: ${err.message}`));
      }
    } finally {
      for (const e of ctx.engines) {
        await removeAllContainers(e, 900_000).catch((err: Error) => ctx.log(`  ${e.name}: removing containers: ${err.message}`));
      }
    }
  },
};
