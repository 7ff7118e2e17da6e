import { rmSync } from 'node:fs';
import { drainProgress } from '../lib/api-client.js';
import type { Options } from '../lib/options.js';
import { timed } from '../lib/timing.js';
import { alternate, type Ctx, type Workload } from './context.js';
import { removeImage } from './container-api.js';

/** X-Registry-Auth for an open registry: empty credentials, as the CLI sends them. */
const NO_AUTH = Buffer.from('{}').toString('base64');

/**
 * 12. A push of the three-layer image of random data (fixture bigImage, pulled first) to a new,
 * empty repository of a registry that holds none of its blobs (its storage is emptied before each
 * push): POST /images/{name}/push read to the end of its progress stream.
 */
export const push: Workload = {
  id: 12,
  name: 'push',
  metrics: (o: Options) => [{ id: 'push', workload: 12, title: `push to an empty repository, ${o.pullMB} MiB in 3 layers`, unit: 's', better: 'lower', goal: { factor: 0.5, dockerdReference: 'not measured yet' } }],
  async run(ctx: Ctx) {
    const tagged: { e: string; ref: string }[] = [];
    try {
      await alternate(
        ctx,
        ['push'],
        ctx.opts.pushIterations,
        async (e, i) => {
          await e.api.expect('POST', `/images/create?fromImage=${encodeURIComponent(ctx.refs.big)}`, [200], { timeoutMs: 300_000 });
          // An empty registry each time: no blob to find with HEAD or to mount from an earlier push.
          rmSync(ctx.pushRegistry.storage, { recursive: true, force: true });
          const repo = `${ctx.pushRegistry.host}/push-${e.name}-${i}-${Date.now()}`;
          await e.api.expect('POST', `/images/${encodeURIComponent(ctx.refs.big)}/tag?repo=${encodeURIComponent(repo)}&tag=latest`, [201]);
          tagged.push({ e: e.name, ref: `${repo}:latest` });
          const { ms } = await timed(async () => {
            const res = await e.api.stream('POST', `/images/${encodeURIComponent(repo)}/push?tag=latest`, { timeoutMs: 300_000, headers: { 'X-Registry-Auth': NO_AUTH } });
            await drainProgress(res);
          });
          ctx.rec.sample('push', e.name, ms / 1000);
        },
        { timeoutMs: 400_000 },
      );
    } finally {
      for (const t of tagged) {
        const e = ctx.engines.find((x) => x.name === t.e);
        if (e) await removeImage(e, t.ref).catch(() => undefined);
      }
      for (const e of ctx.engines) await removeImage(e, ctx.refs.big).catch(() => undefined);
    }
  },
};
