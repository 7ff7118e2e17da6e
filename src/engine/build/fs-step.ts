/**
 * COPY, ADD and WORKDIR: an overlay of the parent image written through, its upper dir the step's
 * layer; COPY/ADD resolve their sources (context, another stage or image, URLs, heredocs) and key
 * the cache with their checksum.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { randomHex } from '../../lib/random-hex.js';
import { errorMessage } from '../../lib/errors.js';
import type { Digest } from '../../lib/digest.js';
import { readUpperXattrs } from '../../images/layer-diff.js';
import { copyUpperToLayer } from '../../images/layer-copy.js';
import type { CommittedLayer } from '../images/container-commit.js';
import { mountRootfs, rootfsPaths, unmountRootfs } from '../containers/rootfs-mount.js';
import { resolveUser } from '../containers/container-user.js';
import { tryLookupImage } from '../images/image-lookup.js';
import { BuildError, type Stage, type State, type StepContext } from './build-step.js';
import type { DockerfileNode } from './dockerfile/parser.js';
import { checksumSources, copySources, download, isArchive, resolveSources, type Owner, type Source } from './copy-files.js';
import { writeStepImage, type StepImage } from './image-writer.js';
import { parseFlags, parseMode } from './instruction-args.js';
import { cachedStep, withStepContainer } from './step-cache.js';

/** COPY/ADD/WORKDIR: an overlay of the parent image written through, its upper dir the layer. */
export async function fsStep(ctx: StepContext, s: State, text: string, write: (root: string) => Promise<void>, opts: { extra?: string; emptyIfUnchanged?: boolean; stepContainer?: boolean } = {}): Promise<void> {
  const createdBy = `/bin/sh -c #(nop) ${text}`;
  const make = async (): Promise<StepImage> => {
    const paths = rootfsPaths(join(ctx.work, `step-${ctx.step}-${randomHex(4)}`));
    const lowers = [...(s.image.record?.chainIds ?? [])].reverse().map((id) => ctx.images.layers.diffDir(id as Digest));
    // volatile: the upper dir is read once into the layer, then deleted; no sync at unmount
    await mountRootfs(paths, lowers, { volatile: true });
    try {
      await write(paths.merged);
    } finally {
      await unmountRootfs(paths);
    }
    const top = s.image.record?.chainIds[s.image.record.chainIds.length - 1] as Digest | undefined;
    const xattrs = await readUpperXattrs(paths.upper);
    let layer: CommittedLayer | undefined = await ctx.images.layers.buildComputed(top, (dir) => copyUpperToLayer(paths.upper, dir, { xattrs }));
    await rm(paths.dir, { recursive: true, force: true });
    if (opts.emptyIfUnchanged && layer.tarSize <= 1024) {
      if (ctx.images.records.layerUsers(layer.chainId) === 0) await ctx.images.layers.remove(layer.chainId);
      layer = undefined;
    }
    return writeStepImage(ctx.images, { parent: s.image, config: s.config, createdBy, layer, author: s.author });
  };
  await cachedStep(ctx, s, createdBy, opts.extra ?? '', opts.stepContainer ? () => withStepContainer(ctx, s, ['/bin/sh', '-c', `#(nop) ${text}`], make) : make);
}

export async function copyStep(ctx: StepContext, node: DockerfileNode, s: State, env: Map<string, string>, all: Stage[]): Promise<void> {
  const cmd = node.name.toUpperCase();
  const flags = parseFlags(node.flags, node.name === 'copy' ? ['from', 'chown', 'chmod'] : ['chown', 'chmod']);
  let args = node.args.map((a) => a);
  const heredocs = node.heredocs;
  if (heredocs.length > 0) {
    // COPY <<EOF /dest: the bodies are the sources
    args = args.filter((a) => !/^<<-?["']?[A-Za-z_][A-Za-z0-9_]*["']?$/.test(a));
  }
  if (args.length + heredocs.length < 2 && !(heredocs.length > 0 && args.length === 1)) throw new BuildError(`${cmd} requires at least two arguments, but only one was provided. Destination could not be determined.`);
  const destRaw = ctx.expand(args[args.length - 1]!, env);
  const wd = s.config.WorkingDir || '/';
  // a trailing `/` (or `.`) says the destination is a directory
  let dest = posix.normalize(posix.isAbsolute(destRaw) ? destRaw : posix.join(wd, destRaw));
  if ((destRaw.endsWith('/') || destRaw === '.' || destRaw.endsWith('/.')) && !dest.endsWith('/')) dest += '/';
  const srcWords = args.slice(0, -1).map((a) => ctx.expand(a, env));
  let srcRoot = ctx.opts.contextDir;
  let fromMount: { paths: ReturnType<typeof rootfsPaths> } | undefined;
  const sources: Source[] = [];
  // Named and made only when something is put there (heredocs here; downloads and ADD's archives
  // make it themselves): an unchanged COPY touches no directory.
  let scratchDir: string | undefined;
  const scratch = (): string => (scratchDir ??= join(ctx.work, `src-${ctx.step}`));
  try {
    if (flags.from) {
      const from = ctx.expand(flags.from, env).toLowerCase();
      const stage = all.find((st) => st.name === from && st.result) ?? (/^\d+$/.test(from) ? all[Number(from)] : undefined);
      let img = stage?.result;
      if (!img) {
        let rec = tryLookupImage(ctx.images.records, from)?.image;
        if (!rec) {
          const id = await ctx.opts.pull_(from, ctx.opts.platform, () => undefined);
          rec = ctx.images.records.getImage(id);
        }
        if (!rec) throw new BuildError(`invalid from flag value ${from}: not found`);
        img = { record: rec, config: ctx.images.config(rec) };
      }
      const paths = rootfsPaths(join(ctx.work, `from-${ctx.step}`));
      await mountRootfs(paths, [...(img.record?.chainIds ?? [])].reverse().map((id) => ctx.images.layers.diffDir(id as Digest)), { volatile: true });
      fromMount = { paths };
      srcRoot = paths.merged;
    }
    const local = srcWords.filter((w) => !(node.name === 'add' && /^https?:\/\//.test(w)));
    if (local.length > 0) sources.push(...(await resolveSources(srcRoot, local, cmd).catch((err) => { throw new BuildError(errorMessage(err)); })));
    if (node.name === 'add') {
      for (const w of srcWords.filter((x) => /^https?:\/\//.test(x))) sources.push(await download(w, scratch(), ctx.opts.signal));
      if (!fromMount) for (const src of sources) if (!src.isDir && !src.abs.startsWith(scratch()) && (await isArchive(src.abs))) src.extract = true;
    }
    if (heredocs.length > 0) await mkdir(scratch(), { recursive: true });
    for (const [i, doc] of heredocs.entries()) {
      const abs = join(scratch(), `heredoc-${i}`);
      // An unquoted heredoc word expands variables in the body as a double-quoted word would.
      await writeFile(abs, doc.expand ? ctx.expand(`"${doc.content.replace(/"/g, '\\"')}"`, env) : doc.content, { mode: 0o644 });
      sources.push({ abs, name: doc.name, isDir: false });
    }
    if (sources.length > 1 && !dest.endsWith('/')) throw new BuildError(`When using ${cmd} with more than one source file, the destination must be a directory and end with a /`);
    const sum = await checksumSources(sources, fromMount ? undefined : ctx.opts.contextDigests);
    const kind = sources.length > 1 ? 'multi' : sources[0]!.isDir ? 'dir' : 'file';
    const owner = flags.chown ? await chownOwner(ctx, s, ctx.expand(flags.chown, env)) : undefined;
    const mode = flags.chmod ? parseMode(flags.chmod) : undefined;
    const text = `${cmd} ${flags.chown ? `--chown=${flags.chown} ` : ''}${flags.chmod ? `--chmod=${flags.chmod} ` : ''}${kind}:${sum} in ${dest} `;
    await fsStep(ctx, s, text, (root) => copySources(sources, { root, dest, owner, mode, keepOwner: !!fromMount, scratchDir: scratch() }), { extra: JSON.stringify([flags.chown ?? '', flags.chmod ?? '', sources.map((x) => x.extract ?? false)]) });
  } finally {
    if (fromMount) await unmountRootfs(fromMount.paths).catch(() => undefined);
    if (scratchDir) await rm(scratchDir, { recursive: true, force: true });
  }
}

async function chownOwner(ctx: StepContext, s: State, spec: string): Promise<Owner> {
  const [u = '', g] = spec.split(':', 2);
  if (/^\d+$/.test(u) && (g === undefined || /^\d+$/.test(g))) return { uid: Number(u), gid: Number(g ?? u) };
  const paths = rootfsPaths(join(ctx.work, `chown-${ctx.step}`));
  await mountRootfs(paths, [...(s.image.record?.chainIds ?? [])].reverse().map((id) => ctx.images.layers.diffDir(id as Digest)), { volatile: true });
  try {
    const r = await resolveUser(paths.merged, g === undefined ? u : `${u}:${g}`);
    return { uid: r.uid, gid: g === undefined && /^\d+$/.test(u) ? r.uid : r.gid };
  } catch (err) {
    throw new BuildError(`unable to convert uid/gid chown string to host mapping: ${errorMessage(err)}`);
  } finally {
    await unmountRootfs(paths);
    await rm(paths.dir, { recursive: true, force: true });
  }
}
