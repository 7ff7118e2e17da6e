import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Engine } from '../engines/engine.js';
import { alternate, type Ctx, type Workload } from './context.js';
import { createContainer, removeContainer } from './container-api.js';

/**
 * 16. `GET /containers/json` latency while `writers` clients (default 200) create and remove
 * containers as fast as they can (issue 23: reads never wait behind writes). The latency is sampled by
 * a separate process (list-sampler.ts), one request at a time every 50 ms, so the load generator's own
 * busy event loop does not count against the engine. Reported: the median and p90 of one round's samples.
 */
const SAMPLER = fileURLToPath(new URL('../lib/list-sampler.js', import.meta.url));

export const listUnderLoad: Workload = {
  id: 16,
  name: 'list under write load',
  metrics: (o) => [
    { id: 'list-load-median', workload: 16, title: `\`GET /containers/json\` median latency, ${o.writers} clients creating and removing`, unit: 'ms', better: 'lower' },
    { id: 'list-load-p90', workload: 16, title: `\`GET /containers/json\` p90 latency, ${o.writers} clients creating and removing`, unit: 'ms', better: 'lower' },
  ],
  async run(ctx: Ctx) {
    for (const e of ctx.engines) await e.api.expect('POST', `/images/create?fromImage=${encodeURIComponent(ctx.refs.busybox)}`, [200], { timeoutMs: 300_000 });
    await alternate(
      ctx,
      ['list-load-median', 'list-load-p90'],
      ctx.opts.rateRounds,
      async (e) => {
        const r = await underLoad(ctx, e);
        ctx.rec.sample('list-load-median', e.name, r.median);
        ctx.rec.sample('list-load-p90', e.name, r.p90);
        ctx.rec.note('list-load-median', e.name, `${r.samples} samples, ${r.writes} containers created and removed meanwhile`);
      },
      { timeoutMs: (ctx.opts.rateSeconds + 300) * 1000 },
    );
  },
};

async function underLoad(ctx: Ctx, e: Engine): Promise<{ median: number; p90: number; samples: number; writes: number }> {
  let stop = false;
  let writes = 0;
  const writer = async () => {
    while (!stop) {
      const id = await createContainer(e, { Image: ctx.refs.busybox, Cmd: ['true'], HostConfig: { NetworkMode: 'none' } });
      await removeContainer(e, id);
      writes++;
    }
  };
  const writers = Array.from({ length: ctx.opts.writers }, writer);
  try {
    await new Promise((r) => setTimeout(r, 1000)); // let the load build up
    const child = spawn(process.execPath, [SAMPLER, e.socket, String(ctx.opts.rateSeconds)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    if (code !== 0) throw new Error(`list sampler exited with ${code}`);
    return { ...(JSON.parse(out) as { median: number; p90: number; samples: number }), writes };
  } finally {
    stop = true;
    await Promise.all(writers);
  }
}
