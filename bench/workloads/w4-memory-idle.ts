import { sleep } from '../lib/timing.js';
import { eachEngine, type Ctx, type Workload } from './context.js';

/**
 * 4 (first half). The engines' memory at rest: PSS of the daemon and its helpers, after start-up and
 * the busybox pull, with no container. The figure with N running is taken by workload 3.
 */
export const memoryIdle: Workload = {
  id: 4,
  name: 'memory',
  metrics: () => [{ id: 'mem-idle', workload: 4, title: 'memory (PSS), idle', unit: 'MiB', better: 'lower' }],
  async run(ctx: Ctx) {
    await eachEngine(ctx, ['mem-idle'], async (e) => {
      let last: ReturnType<typeof e.memory> | undefined;
      for (let k = 0; k < 3; k++) {
        if (k) await sleep(500);
        last = e.memory();
        ctx.rec.sample('mem-idle', e.name, last.bytes / 2 ** 20);
      }
      const parts = Object.entries(last!.byName).map(([name, v]) => `${name}${v.count > 1 ? ` ×${v.count}` : ''} ${(v.bytes / 2 ** 20).toFixed(1)}`);
      ctx.rec.note('mem-idle', e.name, `MiB by process: ${parts.join(', ')}`);
    });
  },
};
