import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../../test/harness/daemon.js';
import { dockerCliEnv, type Engine } from '../engines/engine.js';
import type { Options } from '../lib/options.js';
import { mustRun, runCommand } from '../lib/run-command.js';
import { alternate, type Ctx, type Workload } from './context.js';

/**
 * 15. Docker Compose v2 (scripts/install-compose.sh's binary, run standalone): `up -d --wait` and
 * `down -v` of a project of `composeServices` busybox services on one network, one with a
 * healthcheck that `--wait` waits for, and one named volume. An engine without `/volumes` (Berth
 * before named volumes land) gets the project without the volume, and so do the others in that run,
 * so that the figures stay comparable; the report notes it.
 */
export const composeUpDown: Workload = {
  id: 15,
  name: 'compose up/down',
  metrics: (o: Options) => [
    { id: 'compose-up', workload: 15, title: `compose \`up -d --wait\` of ${o.composeServices} services (one network, one volume, one healthcheck)`, unit: 's', better: 'lower', goal: { factor: 0.3, dockerdReference: 'not measured yet' } },
    { id: 'compose-down', workload: 15, title: `compose \`down -v\` of the same project`, unit: 's', better: 'lower' },
  ],
  async run(ctx: Ctx) {
    const bin = (await mustRun('bash', [join(repoRoot(), 'scripts', 'install-compose.sh')], { timeoutMs: 1_800_000 })).stdout.trim();
    const dir = join(ctx.tmp, 'compose-project');
    const config = join(ctx.tmp, 'compose-docker-config');
    mkdirSync(dir, { recursive: true });
    mkdirSync(config, { recursive: true });
    writeFileSync(join(config, 'config.json'), '{}\n');

    let withVolume = true;
    for (const e of ctx.engines) {
      if ((await e.api.request('GET', '/volumes', { timeoutMs: 10_000 })).status !== 200) withVolume = false;
    }
    if (!withVolume) {
      ctx.log('  an engine has no /volumes: the project goes without its volume on every engine');
      for (const e of ctx.engines) ctx.rec.note('compose-up', e.name, 'without the named volume (an engine in this run has no /volumes)');
    }
    writeFileSync(join(dir, 'compose.json'), JSON.stringify(project(ctx.refs.busybox, ctx.opts.composeServices, withVolume), null, 2));

    const compose = (e: Engine, args: string[]) =>
      runCommand(bin, ['-f', join(dir, 'compose.json'), '-p', 'benchcompose', '--progress', 'quiet', ...args], { env: dockerCliEnv(e.dockerHost, config), timeoutMs: 300_000 });
    await alternate(
      ctx,
      ['compose-up', 'compose-down'],
      ctx.opts.composeIterations,
      async (e, _i, warmup) => {
        const up = await compose(e, ['up', '-d', '--wait']);
        if (up.code !== 0) {
          await compose(e, ['down', '-v', '-t', '0']);
          throw new Error(`compose up: exit ${up.code}: ${up.stderr.trim().split('\n').slice(-2).join(' | ')}`);
        }
        const down = await compose(e, ['down', '-v', '-t', '0']);
        if (down.code !== 0) throw new Error(`compose down: exit ${down.code}: ${down.stderr.trim().split('\n').slice(-2).join(' | ')}`);
        if (warmup) return;
        ctx.rec.sample('compose-up', e.name, up.ms / 1000);
        ctx.rec.sample('compose-down', e.name, down.ms / 1000);
      },
      { warmup: 1, timeoutMs: 600_000 },
    );
  },
};

function project(image: string, services: number, withVolume: boolean): Record<string, unknown> {
  const out: Record<string, Record<string, unknown>> = {};
  for (let i = 1; i <= services; i++) {
    const s: Record<string, unknown> = { image, command: ['sleep', '3600'], init: true, stop_grace_period: '1s' };
    if (i === 1) {
      s.command = ['sh', '-c', 'touch /tmp/ready; exec sleep 3600'];
      // A short interval rather than start_interval, which compose refuses for engines before 25 (dockerd 20.10 here).
      s.healthcheck = { test: ['CMD', 'test', '-f', '/tmp/ready'], interval: '200ms', retries: 100 };
      if (withVolume) s.volumes = ['data:/data'];
    }
    out[`svc${i}`] = s;
  }
  return { services: out, ...(withVolume ? { volumes: { data: {} } } : {}) };
}
