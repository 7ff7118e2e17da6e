/** RUN: the command as an ordinary container of this engine, its output streamed, its upper dir the layer. */
import { log } from '../../lib/log.js';
import { readLogRecords } from '../../runtime/log-file.js';
import { commitLayer } from '../images/container-commit.js';
import { BuildError, PROXY_ARGS, short, type State, type StepContext } from './build-step.js';
import type { DockerfileNode } from './dockerfile/parser.js';
import { writeStepImage } from './image-writer.js';
import { cachedStep } from './step-cache.js';

export async function runStep(ctx: StepContext, node: DockerfileNode, s: State, shell: string[]): Promise<void> {
  if (!s.image.record) throw new BuildError('failed to run on a scratch image: no such file or directory');
  let cmd: string[];
  const doc = node.heredocs[0];
  if (node.json) cmd = node.args;
  else if (doc && node.heredocs.length === 1 && /^<<-?["']?[A-Za-z_][A-Za-z0-9_]*["']?$/.test((node.args[0] ?? '').trim())) cmd = [...shell, doc.content];
  else if (node.heredocs.length > 0) cmd = [...shell, [node.args[0] ?? '', ...node.heredocs.map((h) => h.content + h.name)].join('\n')];
  else cmd = [...shell, node.args[0] ?? ''];
  // Declared args reach the command as environment (not shadowed by ENV), and name the step.
  const envKeys = new Set((s.config.Env ?? []).map((e) => e.split('=', 1)[0]));
  const argEnv = [...s.args].filter(([k, v]) => v !== undefined && !envKeys.has(k)).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`);
  const proxy = Object.entries(ctx.opts.buildArgs).filter(([k]) => PROXY_ARGS.has(k) && !s.args.has(k)).map(([k, v]) => `${k}=${v}`);
  // as dockerd: any build arg in effect (a proxy arg too, though not listed) prefixes the history text
  const saved = argEnv.length + proxy.length > 0 ? [`|${argEnv.length}`, ...argEnv, ...cmd] : cmd;
  const createdBy = saved.join(' ');
  await cachedStep(ctx, s, createdBy, '', async () => {
    const { Id } = ctx.containers.create({
      config: {
        Image: s.image.record!.id,
        Cmd: cmd,
        Entrypoint: [''],
        Env: [...(s.config.Env ?? []), ...argEnv, ...proxy],
        User: s.config.User ?? '',
        WorkingDir: s.config.WorkingDir ?? '',
        Healthcheck: { Test: ['NONE'] },
        Labels: {},
        AttachStdout: true,
        AttachStderr: true,
      } as never,
      hostConfig: { ...ctx.opts.hostConfig } as never,
      networkingConfig: {},
    });
    ctx.out(` ---> Running in ${short(Id)}\n`);
    let keep = !ctx.opts.rm && !ctx.opts.forceRm;
    try {
      const c = ctx.containers.get(Id);
      const waited = ctx.containers.wait(Id, 'next-exit').pending!;
      const aborted = new Promise<never>((_, reject) => ctx.opts.signal.addEventListener('abort', () => reject(new BuildError('build canceled')), { once: true }));
      aborted.catch(() => undefined);
      await ctx.containers.start(Id);
      const logs = (async () => {
        for await (const r of readLogRecords(c.logPath, { follow: true, until: waited, signal: ctx.opts.signal })) ctx.out(r.text + (r.partial ? '' : '\n'));
      })();
      const result = await Promise.race([waited, aborted]);
      await logs.catch(() => undefined);
      if (result.StatusCode !== 0) {
        // dockerd: rm removes after success only; forcerm also after a failure
        keep = !ctx.opts.forceRm;
        throw new BuildError(`The command '${cmd.join(' ')}' returned a non-zero code: ${result.StatusCode}`, result.StatusCode);
      }
      const layer = await ctx.containers.withLock(Id, () => commitLayer(ctx.containers, c, true), { alongsideRelease: true });
      return await writeStepImage(ctx.images, { parent: s.image, config: s.config, createdBy, layer, author: s.author });
    } finally {
      // A canceled build leaves nothing behind; a failed step's container stays unless rm and forcerm say otherwise.
      if (ctx.opts.signal.aborted) keep = false;
      if (!keep) {
        await ctx.containers.remove(Id, { force: true, volumes: true }).catch((err) => log.warn('build: removing an intermediate container failed', { id: Id, err }));
        if (!ctx.opts.signal.aborted) ctx.out(` ---> Removed intermediate container ${short(Id)}\n`);
      }
    }
  });
}
