import { alternate, cliFailure, type Ctx, type Workload } from './context.js';

/** 1. `docker run --rm busybox true` through the CLI, on the default network and with --network none. */
export const runRm: Workload = {
  id: 1,
  name: 'docker run --rm busybox true',
  metrics: () => [
    { id: 'run-rm', workload: 1, title: '`docker run --rm busybox true`', unit: 's', better: 'lower', goal: { factor: 0.25, dockerdReference: '0.36–0.44 s' } },
    { id: 'run-rm-none', workload: 1, title: '`docker run --rm --network none busybox true`', unit: 's', better: 'lower', goal: { factor: 0.25, dockerdReference: '0.36–0.44 s' } },
  ],
  async run(ctx: Ctx) {
    for (const [metric, extra] of [['run-rm', []], ['run-rm-none', ['--network', 'none']]] as const) {
      ctx.log(`  ${metric}`);
      await alternate(
        ctx,
        [metric],
        ctx.opts.iterations,
        async (e, _i, warmup) => {
          const args = ['run', '--rm', ...extra, ctx.refs.busybox, 'true'];
          const r = await e.docker(args, { timeoutMs: 120_000 });
          if (r.code !== 0) throw cliFailure(args, r);
          if (!warmup) ctx.rec.sample(metric, e.name, r.ms / 1000);
        },
        { warmup: 1, timeoutMs: 150_000 },
      );
    }
  },
};
