import { drainProgress } from '../lib/api-client.js';
import type { Options } from '../lib/options.js';
import { timed } from '../lib/timing.js';
import { alternate, type Ctx, type Workload } from './context.js';
import { removeImage } from './container-api.js';

/**
 * 5. A cold pull of the three-layer image of random data (fixture bigImage) through
 * POST /images/create, read to the end of its progress stream; the image is removed before each pull.
 */
export const coldPull: Workload = {
  id: 5,
  name: 'cold pull',
  metrics: (o: Options) => [
    { id: 'pull', workload: 5, title: `cold pull, ${o.pullMB} MiB in 3 layers`, unit: 's', better: 'lower', goal: { factor: 0.5, dockerdReference: '0.96 s' } },
  ],
  async run(ctx: Ctx) {
    const ref = ctx.refs.big;
    const colon = ref.lastIndexOf(':');
    const [name, tag] = [ref.slice(0, colon), ref.slice(colon + 1)];
    try {
      await alternate(
        ctx,
        ['pull'],
        ctx.opts.pullIterations,
        async (e) => {
          await removeImage(e, ref);
          const gone = await e.api.request('GET', `/images/${encodeURIComponent(ref)}/json`);
          if (gone.status !== 404) throw new Error(`image still there after removal (${gone.status})`);
          const { ms } = await timed(async () => {
            const res = await e.api.stream('POST', `/images/create?fromImage=${encodeURIComponent(name)}&tag=${encodeURIComponent(tag)}`, { timeoutMs: 300_000 });
            await drainProgress(res);
          });
          await e.api.expect('GET', `/images/${encodeURIComponent(ref)}/json`, [200]);
          ctx.rec.sample('pull', e.name, ms / 1000);
        },
        { timeoutMs: 400_000 },
      );
    } finally {
      for (const e of ctx.engines) await removeImage(e, ref).catch(() => undefined);
    }
  },
};
