import { countMultiplexed } from '../lib/api-client.js';
import type { Options } from '../lib/options.js';
import { timed } from '../lib/timing.js';
import { alternate, cliFailure, type Ctx, type Workload } from './context.js';
import { createContainer, removeContainer, startContainer, waitContainer } from './container-api.js';

/**
 * 6. A container writes `logMB` MB to stdout in 100-byte lines; then the whole log is read back
 * with `docker logs` (to a pipe the suite counts) and with a raw GET /containers/{id}/logs
 * (demultiplexed and counted). All three are timed; a short read is noted, not hidden.
 */
export const logs: Workload = {
  id: 6,
  name: 'logs',
  metrics: (o: Options) => [
    { id: 'logs-write', workload: 6, title: `a container writes ${o.logMB} MB to stdout (start → exit)`, unit: 's', better: 'lower' },
    { id: 'logs-cli', workload: 6, title: `${o.logMB} MB of logs read through \`docker logs\``, unit: 's', better: 'lower', goal: { factor: 0.1, dockerdReference: '12.0 s' } },
    { id: 'logs-http', workload: 6, title: `${o.logMB} MB of logs read through raw HTTP`, unit: 's', better: 'lower' },
  ],
  async run(ctx: Ctx) {
    const bytes = ctx.opts.logMB * 1_000_000;
    const lines = bytes / 100;
    await alternate(
      ctx,
      ['logs-write', 'logs-cli', 'logs-http'],
      ctx.opts.logIterations,
      async (e) => {
        const id = await createContainer(e, {
          Image: ctx.refs.busybox,
          Cmd: ['sh', '-c', `yes ${'x'.repeat(99)} | head -n ${lines}`],
          HostConfig: { NetworkMode: 'none' },
        });
        try {
          const write = await timed(async () => {
            await startContainer(e, id);
            return waitContainer(e, id, 600_000);
          });
          if (write.value !== 0) throw new Error(`the writer exited with ${write.value}`);
          ctx.rec.sample('logs-write', e.name, write.ms / 1000);

          const args = ['logs', id];
          const cli = await e.docker(args, { timeoutMs: 600_000, keepStdout: 0 });
          if (cli.code !== 0) throw cliFailure(args, cli);
          ctx.rec.sample('logs-cli', e.name, cli.ms / 1000);
          if (cli.stdoutBytes !== bytes) ctx.rec.note('logs-cli', e.name, `read ${cli.stdoutBytes} of ${bytes} bytes`);

          const http = await timed(async () => {
            const res = await e.api.stream('GET', `/containers/${id}/logs?stdout=1&stderr=1`, { timeoutMs: 600_000 });
            if (res.statusCode !== 200) throw new Error(`GET logs: ${res.statusCode}`);
            return countMultiplexed(res);
          });
          ctx.rec.sample('logs-http', e.name, http.ms / 1000);
          if (http.value.stdout !== bytes) ctx.rec.note('logs-http', e.name, `read ${http.value.stdout} of ${bytes} bytes`);
        } finally {
          await removeContainer(e, id);
        }
      },
      { timeoutMs: 1_500_000 },
    );
  },
};
