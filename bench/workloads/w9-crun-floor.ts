import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mustRun, runCommand } from '../lib/run-command.js';
import { errorText, type Ctx, type Workload } from './context.js';

/**
 * 9. The floor: `crun run` of a bundle whose rootfs is the same busybox layer, running `true`. No
 * engine can start a container faster than its runtime alone; the table shows this beside workload 1.
 */

export const CRUN_BINARY = process.env.BENCH_CRUN ?? '/usr/bin/crun';

export const crunFloor: Workload = {
  id: 9,
  name: 'crun floor',
  metrics: () => [{ id: 'crun-run', workload: 9, title: '`crun run` of the busybox bundle (`true`)', unit: 's', better: 'lower' }],
  async run(ctx: Ctx) {
    try {
      const base = join(ctx.tmp, 'crun');
      const bundle = join(base, 'bundle');
      const state = join(base, 'state');
      mkdirSync(join(bundle, 'rootfs'), { recursive: true });
      mkdirSync(state, { recursive: true });
      await mustRun('tar', ['-xzf', ctx.busyboxLayerPath, '-C', join(bundle, 'rootfs')]);
      await mustRun(CRUN_BINARY, ['spec'], { cwd: bundle });
      const spec = JSON.parse(readFileSync(join(bundle, 'config.json'), 'utf8')) as { process: { args: string[]; terminal: boolean } };
      spec.process.args = ['true'];
      spec.process.terminal = false;
      writeFileSync(join(bundle, 'config.json'), JSON.stringify(spec));
      for (let i = -1; i < ctx.opts.iterations; i++) {
        const id = `berth-bench-${randomBytes(6).toString('hex')}`;
        const r = await runCommand(CRUN_BINARY, ['--root', state, 'run', '--bundle', bundle, id], { timeoutMs: 60_000 });
        if (r.code !== 0) {
          await runCommand(CRUN_BINARY, ['--root', state, 'delete', '--force', id]);
          throw new Error(`crun run: exit ${r.code}: ${r.stderr.trim().slice(0, 300)}`);
        }
        if (i >= 0) ctx.rec.sample('crun-run', 'crun', r.ms / 1000);
      }
    } catch (err) {
      ctx.log(`  crun: Errored: ${errorText(err)}`);
      ctx.rec.error('crun-run', 'crun', errorText(err));
    }
  },
};
