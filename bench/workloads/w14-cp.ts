import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Options } from '../lib/options.js';
import { timed } from '../lib/timing.js';
import { alternate, cliFailure, printedId, type Ctx, type Workload } from './context.js';
import { removeContainer } from './container-api.js';

/**
 * 14. `docker cp` of a tree of `cpMB` MB in and out of a created (never started) container: a third
 * of the bytes in 16 KiB files (100 to a directory), the rest in four large files. Through the CLI,
 * as users run it; its start-up is in every engine's figure alike.
 */
export const cp: Workload = {
  id: 14,
  name: 'cp',
  metrics: (o: Options) => [
    { id: 'cp-in', workload: 14, title: `\`docker cp\` of a ${o.cpMB} MB tree into a container`, unit: 's', better: 'lower', goal: { factor: 0.5, dockerdReference: 'not measured yet' } },
    { id: 'cp-out', workload: 14, title: `\`docker cp\` of a ${o.cpMB} MB tree out of a container`, unit: 's', better: 'lower', goal: { factor: 0.5, dockerdReference: 'not measured yet' } },
  ],
  async run(ctx: Ctx) {
    const tree = join(ctx.tmp, 'cp-tree');
    makeTree(tree, ctx.opts.cpMB);
    try {
      await alternate(
        ctx,
        ['cp-in', 'cp-out'],
        ctx.opts.cpIterations,
        async (e, i, warmup) => {
          const create = ['create', ctx.refs.busybox, 'true'];
          const c = await e.docker(create, { timeoutMs: 120_000 });
          if (c.code !== 0) throw cliFailure(create, c);
          const id = printedId(c.stdout);
          const out = join(ctx.tmp, `cp-out-${e.name}-${i}`);
          try {
            const cpIn = ['cp', tree, `${id}:/data`];
            const tin = await timed(() => e.docker(cpIn, { timeoutMs: 600_000 }));
            if (tin.value.code !== 0) throw cliFailure(cpIn, tin.value);
            const cpOut = ['cp', `${id}:/data`, out];
            const tout = await timed(() => e.docker(cpOut, { timeoutMs: 600_000 }));
            if (tout.value.code !== 0) throw cliFailure(cpOut, tout.value);
            if (!warmup) {
              ctx.rec.sample('cp-in', e.name, tin.ms / 1000);
              ctx.rec.sample('cp-out', e.name, tout.ms / 1000);
            }
          } finally {
            rmSync(out, { recursive: true, force: true });
            await removeContainer(e, id);
          }
        },
        { warmup: 1, timeoutMs: 1_200_000 },
      );
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  },
};

/** The tree: ⅓ of `mb` in 16 KiB files, 100 per directory, ⅔ in four large files. */
function makeTree(dir: string, mb: number): void {
  const total = mb * 1024 * 1024;
  const small = 16 * 1024;
  const smallCount = Math.max(1, Math.round(total / 3 / small));
  for (let i = 0; i < smallCount; i++) {
    const sub = join(dir, `d${Math.floor(i / 100)}`);
    if (i % 100 === 0) mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `f${i}`), randomBytes(small));
  }
  const large = Math.floor((total - smallCount * small) / 4);
  const chunk = randomBytes(1024 * 1024);
  for (let i = 0; i < 4; i++) {
    const parts: Buffer[] = [];
    for (let left = large; left > 0; left -= chunk.length) parts.push(left >= chunk.length ? chunk : chunk.subarray(0, left));
    writeFileSync(join(dir, `large${i}`), Buffer.concat(parts));
  }
}
