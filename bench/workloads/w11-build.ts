import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import tarStream from 'tar-stream';
import type { Options } from '../lib/options.js';
import { timed } from '../lib/timing.js';
import { ApiClient, drainProgress } from '../lib/api-client.js';
import { startDrainServer } from '../lib/drain-server.js';
import { alternate, errorText, type Ctx, type Workload } from './context.js';
import { removeImage } from './container-api.js';

/**
 * 11. `docker build` with the classic builder (POST /build, version 1) of a 6-step Dockerfile:
 * FROM, COPY of `buildMiB` MiB of random data, three RUNs, CMD. Cold (nocache=1, the image removed
 * after each round) and fully cached (the same context again). The context is sent as a plain tar.
 */
export const build: Workload = {
  id: 11,
  name: 'build',
  metrics: (o: Options) => [
    { id: 'build-cold', workload: 11, title: `classic build, cold (FROM, COPY ${o.buildMiB} MiB, 3 RUN, CMD)`, unit: 's', better: 'lower', goal: { factor: 0.5, dockerdReference: 'not yet measured' } },
    { id: 'build-cached', workload: 11, title: 'classic build, every step cached', unit: 's', better: 'lower', goal: { factor: 0.2, dockerdReference: 'not yet measured' } },
    { id: 'build-context-floor', workload: 11, title: `the same context POSTed to a server that only reads it (the client's and the kernel's share)`, unit: 's', better: 'lower', floor: 'drain server' },
  ],
  async run(ctx: Ctx) {
    const context = await contextTar(ctx.refs.busybox, ctx.opts.buildMiB);
    const tag = 'bench/build:w10';
    await alternate(
      ctx,
      ['build-cold', 'build-cached'],
      ctx.opts.buildIterations,
      async (e) => {
        try {
          const cold = await timed(() => buildOnce(e.api, context, `nocache=1&t=${tag}`));
          ctx.rec.sample('build-cold', e.name, cold.ms / 1000);
          const cached = await timed(() => buildOnce(e.api, context, `t=${tag}`));
          if (cached.value !== cold.value) throw new Error(`cached build made ${cached.value}, not ${cold.value}`);
          ctx.rec.sample('build-cached', e.name, cached.ms / 1000);
        } finally {
          await removeImage(e, tag);
        }
      },
      { timeoutMs: 600_000 },
    );
    await contextFloor(ctx, context);
  },
};

/**
 * The floor of the cached build: the same body POSTed the same way to a server that reads it and
 * drops it (bench/lib/drain-server.ts). Each timed POST follows an untimed one, so that it starts
 * on a machine just busy, as each cached build does (right after its cold build).
 */
async function contextFloor(ctx: Ctx, context: Buffer): Promise<void> {
  try {
    const drain = await startDrainServer(ctx.tmp);
    const client = new ApiClient(drain.socket);
    try {
      for (let i = 0; i < ctx.opts.buildIterations; i++) {
        await drainProgress(await client.stream('POST', '/build?version=1&rm=1', { body: context, timeoutMs: 60_000 }));
        const t = await timed(async () => drainProgress(await client.stream('POST', '/build?version=1&rm=1', { body: context, timeoutMs: 60_000 })));
        ctx.rec.sample('build-context-floor', 'drain server', t.ms / 1000);
      }
    } finally {
      client.close();
      await drain.stop();
    }
  } catch (err) {
    ctx.log(`  drain server: Errored: ${errorText(err)}`);
    ctx.rec.error('build-context-floor', 'drain server', errorText(err));
  }
}

/** Runs one build to its end; returns the image id, throws on the stream's error (as the CLI reads it). */
export async function buildOnce(api: ApiClient, context: Buffer, query: string): Promise<string> {
  const res: IncomingMessage = await api.stream('POST', `/build?version=1&rm=1&${query}`, { body: context, timeoutMs: 600_000 });
  let id = '';
  await drainProgress(res, (m) => {
    const aux = m.aux as { ID?: string } | undefined;
    if (aux?.ID) id = aux.ID;
  });
  if (!id) throw new Error('build: no image id in the stream');
  return id;
}

export async function contextTar(base: string, mib: number): Promise<Buffer> {
  const dockerfile = [
    `FROM ${base}`,
    'COPY data.bin /data/data.bin',
    'RUN sha256sum /data/data.bin > /data/sum',
    'RUN echo two > /two',
    'RUN echo three > /three',
    'CMD ["sh"]',
  ].join('\n') + '\n';
  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => void chunks.push(c as Buffer));
  const done = new Promise<void>((r) => pack.on('end', () => r()));
  const add = (name: string, body: Buffer) => new Promise<void>((res, rej) => pack.entry({ name, mode: 0o644 }, body, (err) => (err ? rej(err) : res())));
  await add('Dockerfile', Buffer.from(dockerfile));
  await add('data.bin', randomBytes(mib * 1024 * 1024));
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}
