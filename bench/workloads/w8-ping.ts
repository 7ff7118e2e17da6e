import { requestRate } from '../lib/load.js';
import { alternate, type Ctx, type Workload } from './context.js';

/** 8. GET /_ping rate with `connections` concurrent keep-alive clients (autocannon, in-process). */
export const ping: Workload = {
  id: 8,
  name: 'ping rate',
  metrics: (o) => [
    { id: 'ping', workload: 8, title: `\`GET /_ping\` rate, ${o.connections} keep-alive clients`, unit: 'req/s', better: 'higher', goal: { factor: 1, dockerdReference: '17–21 k/s' } },
  ],
  async run(ctx: Ctx) {
    await alternate(
      ctx,
      ['ping'],
      ctx.opts.rateRounds,
      async (e, _i, warmup) => {
        const r = await requestRate(e.socket, '/_ping', { connections: ctx.opts.connections, seconds: warmup ? 1 : ctx.opts.rateSeconds });
        if (!warmup) ctx.rec.sample('ping', e.name, r.perSecond);
      },
      { warmup: 1, timeoutMs: (ctx.opts.rateSeconds + 60) * 1000 },
    );
  },
};
