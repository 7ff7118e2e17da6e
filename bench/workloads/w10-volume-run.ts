import { alternate, cliFailure, type Ctx, type Workload } from './context.js';

/**
 * 10. `docker run --rm -v vol:/data busybox true` against the same run without a volume, taking
 * turns, so the difference is what mounting a named volume adds to a start (goal: ≤ 5 ms on Berth).
 */
export const volumeRun: Workload = {
  id: 10,
  name: 'docker run with a named volume',
  metrics: () => [
    { id: 'run-vol', workload: 10, title: '`docker run --rm -v vol:/data busybox true`', unit: 's', better: 'lower' },
    { id: 'run-novol', workload: 10, title: 'the same run without the volume', unit: 's', better: 'lower' },
  ],
  async run(ctx: Ctx) {
    const volume = 'berth-bench-vol';
    try {
      await alternate(
        ctx,
        ['run-vol', 'run-novol'],
        ctx.opts.iterations,
        async (e, _i, warmup) => {
          for (const [metric, extra] of [['run-vol', ['-v', `${volume}:/data`]], ['run-novol', []]] as const) {
            const args = ['run', '--rm', ...extra, ctx.refs.busybox, 'true'];
            const r = await e.docker(args, { timeoutMs: 120_000 });
            if (r.code !== 0) throw cliFailure(args, r);
            if (!warmup) ctx.rec.sample(metric, e.name, r.ms / 1000);
          }
        },
        { warmup: 1, timeoutMs: 300_000 },
      );
    } finally {
      for (const e of ctx.engines) await e.docker(['volume', 'rm', '-f', volume], { timeoutMs: 60_000 }).catch(() => undefined);
    }
  },
};
