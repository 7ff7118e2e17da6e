import { performance } from 'node:perf_hooks';
import { alternate, type Ctx, type Workload } from './context.js';
import { createContainer, removeContainer, startContainer, waitContainer } from './container-api.js';

/**
 * 2. The API round trip of `busybox echo hi` from an in-process keep-alive client, so no process
 * start-up is counted: create → start → wait → logs → delete.
 */
export const apiRoundTrip: Workload = {
  id: 2,
  name: 'API round trip',
  metrics: () => [
    { id: 'api-roundtrip', workload: 2, title: 'API create → start → wait → logs → delete (`echo hi`)', unit: 'ms', better: 'lower', goal: { factor: 0.15, dockerdReference: '345 ms' } },
  ],
  async run(ctx: Ctx) {
    await alternate(
      ctx,
      ['api-roundtrip'],
      ctx.opts.iterations,
      async (e, _i, warmup) => {
        const t0 = performance.now();
        const id = await createContainer(e, { Image: ctx.refs.busybox, Cmd: ['echo', 'hi'] });
        try {
          await startContainer(e, id);
          const code = await waitContainer(e, id, 60_000);
          const logs = await e.api.expect('GET', `/containers/${id}/logs?stdout=1&stderr=1`, [200], { timeoutMs: 60_000 });
          await e.api.expect('DELETE', `/containers/${id}`, [204], { timeoutMs: 60_000 });
          const ms = performance.now() - t0;
          if (code !== 0) throw new Error(`echo hi exited with ${code}`);
          if (!logs.body.includes('hi\n')) throw new Error(`logs did not return "hi": ${JSON.stringify(logs.text().slice(0, 100))}`);
          if (!warmup) ctx.rec.sample('api-roundtrip', e.name, ms);
        } catch (err) {
          await removeContainer(e, id).catch(() => undefined);
          throw err;
        }
      },
      { warmup: 1, timeoutMs: 120_000 },
    );
  },
};
