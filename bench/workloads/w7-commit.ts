import type { Options } from '../lib/options.js';
import { timed } from '../lib/timing.js';
import { alternate, type Ctx, type Workload } from './context.js';
import { removeContainer, removeImage, runToCompletion } from './container-api.js';

/**
 * 7. Commit of an exited container that wrote `commitMiB` files of 1 MiB of random data, through
 * POST /commit from the in-process client. Not through the CLI: podman 4.3 refuses the body-less
 * POST /commit the docker CLI sends ("Decode(): EOF"), and the same path for every engine keeps the
 * figures comparable (the CLI would add its ~30 ms start-up to each).
 */
export const commit: Workload = {
  id: 7,
  name: 'commit',
  metrics: (o: Options) => [
    { id: 'commit', workload: 7, title: `commit (\`POST /commit\`) of ${o.commitMiB} MiB of new files`, unit: 's', better: 'lower', goal: { factor: 0.5, dockerdReference: '0.42 s' } },
  ],
  async run(ctx: Ctx) {
    const n = ctx.opts.commitMiB;
    await alternate(
      ctx,
      ['commit'],
      ctx.opts.commitIterations,
      async (e) => {
        const id = await runToCompletion(e, {
          Image: ctx.refs.busybox,
          Cmd: ['sh', '-c', `mkdir /data && i=0 && while [ $i -lt ${n} ]; do head -c 1048576 /dev/urandom > /data/f$i; i=$((i+1)); done`],
          HostConfig: { NetworkMode: 'none' },
        });
        let image: string | undefined;
        try {
          const r = await timed(() => e.api.expect('POST', `/commit?container=${id}`, [201], { body: {}, timeoutMs: 300_000 }));
          image = r.value.json<{ Id: string }>().Id;
          if (!image) throw new Error(`POST /commit answered no Id: ${r.value.text().slice(0, 200)}`);
          ctx.rec.sample('commit', e.name, r.ms / 1000);
        } finally {
          await removeContainer(e, id);
          if (image) await removeImage(e, image);
        }
      },
      { timeoutMs: 600_000 },
    );
  },
};
