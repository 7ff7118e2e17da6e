/**
 * A step through the cache: its key (parent image, history text, what else the step depends on,
 * author) looked up first, the step made and recorded on a miss. Metadata steps, and the
 * intermediate container dockerd's classic builder names for them.
 */
import { createHash } from 'node:crypto';
import { log } from '../../lib/log.js';
import { short, type State, type StepContext } from './build-step.js';
import { writeStepImage, type StepImage } from './image-writer.js';

/** A metadata step: a new image with the config changed and no layer. */
export async function metadataStep(ctx: StepContext, s: State, text: string): Promise<void> {
  const createdBy = `/bin/sh -c #(nop)  ${text}`;
  await cachedStep(ctx, s, createdBy, '', () => withStepContainer(ctx, s, ['/bin/sh', '-c', '#(nop) ', text], async () => writeStepImage(ctx.images, { parent: s.image, config: s.config, createdBy, author: s.author })));
}

/**
 * As dockerd's classic builder, a metadata or WORKDIR step made on a cache miss goes through a
 * container of the parent image (created, never started) that is removed as a RUN step's is, so
 * the stream names it. FROM scratch has no image to create one from.
 */
export async function withStepContainer(ctx: StepContext, s: State, cmd: string[], make: () => Promise<StepImage>): Promise<StepImage> {
  if (!s.image.record) return make();
  const { Id } = ctx.containers.create({
    config: { Image: s.image.record.id, Cmd: cmd, Entrypoint: [''], Env: s.config.Env ?? [], User: s.config.User ?? '', WorkingDir: s.config.WorkingDir ?? '', Healthcheck: { Test: ['NONE'] }, Labels: {} } as never,
    hostConfig: { ...ctx.opts.hostConfig } as never,
    networkingConfig: {},
  });
  ctx.out(` ---> Running in ${short(Id)}\n`);
  let made = false;
  try {
    const image = await make();
    made = true;
    return image;
  } finally {
    const aborted = ctx.opts.signal.aborted;
    if (aborted || ctx.opts.forceRm || (ctx.opts.rm && made)) {
      await ctx.containers.remove(Id, { force: true, volumes: true }).catch((err) => log.warn('build: removing an intermediate container failed', { id: Id, err }));
      if (!aborted) ctx.out(` ---> Removed intermediate container ${short(Id)}\n`);
    }
  }
}

/** Looks the step up in the cache, or makes it and records it there. */
export async function cachedStep(ctx: StepContext, s: State, createdBy: string, extra: string, make: () => Promise<StepImage>): Promise<void> {
  const key = createHash('sha256').update(JSON.stringify([s.image.record?.id ?? 'scratch', createdBy, extra, s.author ?? ''])).digest('hex');
  if (!ctx.opts.noCache) {
    const hit = ctx.cache.get(key);
    const record = hit && ctx.images.records.getImage(hit.imageId);
    if (hit && record && (!ctx.cacheFrom || ctx.cacheFrom.chain.has(record.id))) {
      ctx.cache.touch(key);
      ctx.out(' ---> Using cache\n');
      s.image = { record, config: ctx.images.config(record) };
      s.config = structuredClone(s.image.config.config ?? {});
      return;
    }
    const restored = await ctx.cacheFrom?.match(s.image, createdBy, s.config, s.author);
    if (restored?.record) {
      ctx.cache.put(key, restored.record.id);
      ctx.out(' ---> Using cache\n');
      s.image = restored;
      s.config = structuredClone(restored.config.config ?? {});
      return;
    }
  }
  s.image = await make();
  ctx.cache.put(key, s.image.record!.id);
}
