import { createReadStream, createWriteStream, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Options } from '../lib/options.js';
import { timed } from '../lib/timing.js';
import { alternate, type Ctx, type Workload } from './context.js';
import { removeImage } from './container-api.js';

/**
 * 13. `docker save` of the image of random data (fixture bigImage, pulled first) to a file, the
 * image removed, then `docker load` of that file: GET /images/{name}/get streamed to disk plus
 * POST /images/load read to its end, timed together.
 */
export const saveLoad: Workload = {
  id: 13,
  name: 'save + load',
  metrics: (o: Options) => [{ id: 'save-load', workload: 13, title: `save + load, ${o.pullMB} MiB in 3 layers`, unit: 's', better: 'lower', goal: { factor: 0.5, dockerdReference: 'not measured yet' } }],
  async run(ctx: Ctx) {
    const ref = ctx.refs.big;
    const file = join(ctx.tmp, 'save-load.tar');
    try {
      await alternate(
        ctx,
        ['save-load'],
        ctx.opts.saveIterations,
        async (e) => {
          await e.api.expect('POST', `/images/create?fromImage=${encodeURIComponent(ref)}`, [200], { timeoutMs: 300_000 });
          const save = await timed(async () => {
            const res = await e.api.stream('GET', `/images/${encodeURIComponent(ref)}/get`, { timeoutMs: 300_000 });
            if (res.statusCode !== 200) throw new Error(`save: status ${res.statusCode}`);
            await pipeline(res, createWriteStream(file));
          });
          await removeImage(e, ref);
          const load = await timed(async () => {
            const res = await e.api.stream('POST', '/images/load?quiet=1', { timeoutMs: 300_000, body: createReadStream(file), headers: { 'Content-Type': 'application/x-tar' } });
            let text = '';
            for await (const c of res) text += (c as Buffer).toString('utf8');
            if (res.statusCode !== 200 || !/Loaded image/.test(text)) throw new Error(`load: status ${res.statusCode}: ${text.slice(0, 300)}`);
          });
          await e.api.expect('GET', `/images/${encodeURIComponent(ref)}/json`, [200]);
          ctx.rec.sample('save-load', e.name, (save.ms + load.ms) / 1000);
        },
        { timeoutMs: 400_000 },
      );
    } finally {
      rmSync(file, { force: true });
      for (const e of ctx.engines) await removeImage(e, ref).catch(() => undefined);
    }
  },
};
