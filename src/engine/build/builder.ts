/**
 * One classic build: the Dockerfile's stages run instruction by instruction, each producing an
 * image (metadata steps without a layer), each looked up in the cache first. RUN runs as an
 * ordinary container of this engine; COPY/ADD/WORKDIR write into an overlay of the parent image
 * whose upper dir becomes the layer. The output is dockerd's classic builder stream.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { errorMessage } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { ContainerConfig, Platform } from '../../lib/oci.js';
import { readUpperXattrs } from '../../images/layer-diff.js';
import { copyUpperToLayer } from '../../images/layer-copy.js';
import type { Digest } from '../../lib/digest.js';
import { readLogRecords } from '../../runtime/log-file.js';
import type { BuildCacheRecords } from '../../state/build-cache-records.js';
import { commitLayer, type CommittedLayer } from '../images/container-commit.js';
import { mountRootfs, rootfsPaths, unmountRootfs } from '../containers/rootfs-mount.js';
import { resolveUser } from '../containers/container-user.js';
import type { ContainerService } from '../containers/container-service.js';
import { tryLookupImage } from '../images/image-lookup.js';
import type { ImageService } from '../images/image-service.js';
import type { ProgressMessage } from '../images/progress.js';
import { hostPlatform, parsePlatform } from '../../lib/platform.js';
import { parseDockerfile, type DockerfileNode } from './dockerfile/parser.js';
import { processWord, processWords } from './dockerfile/shell-word.js';
import { checksumSources, copySources, download, isArchive, resolveSources, type Owner, type Source } from './copy-files.js';
import type { ContextDigests } from './context-digests.js';
import { resolveInRoot } from './fs-in-root.js';
import { scratchImage, writeStepImage, type StepImage } from './image-writer.js';
import { CacheSources } from './cache-from.js';

/** What a build request sets that the builder reads as given. */
export interface BuildSettings {
  buildArgs: Record<string, string>;
  target?: string;
  labels: Record<string, string>;
  noCache: boolean;
  pull: boolean;
  rm: boolean;
  forceRm: boolean;
  quiet: boolean;
  platform?: Platform;
  /** RUN containers' limits and network: HostConfig fields */
  hostConfig: Record<string, unknown>;
  /** Images whose build chain alone may serve cache hits (dockerd's cache-from); empty: any. */
  cacheFrom: string[];
  signal: AbortSignal;
}

export interface BuildOptions extends BuildSettings {
  dockerfile: string;
  contextDir: string;
  /** Digests of the context's files, taken as it was received. */
  contextDigests?: ContextDigests;
  /** Pulls an image FROM names; resolves to its id. */
  pull_: (name: string, platform: Platform | undefined, out: (m: ProgressMessage) => void) => Promise<string>;
}

export type Emit = (m: Record<string, unknown>) => void;

const DEFAULT_SHELL = ['/bin/sh', '-c'];
const KNOWN = new Set(['from', 'run', 'cmd', 'entrypoint', 'env', 'arg', 'label', 'expose', 'volume', 'user', 'workdir', 'copy', 'add', 'healthcheck', 'stopsignal', 'onbuild', 'maintainer', 'shell']);
const PROXY_ARGS = new Set(['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'FTP_PROXY', 'ftp_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy']);

/** A step that failed: its message goes to the client as the build's error. */
export class BuildError extends Error {
  constructor(message: string, readonly code?: number) {
    super(message);
  }
}

interface Stage {
  name?: string;
  from: DockerfileNode;
  nodes: DockerfileNode[];
  result?: StepImage;
}

interface State {
  image: StepImage;
  config: ContainerConfig;
  args: Map<string, string | undefined>;
  cmdSet: boolean;
  author?: string;
}

export class Builder {
  #step = 0;
  #total = 0;
  readonly #usedArgs = new Set<string>();
  readonly #globalArgs = new Map<string, string | undefined>();
  #escape = '\\';
  readonly #work: string;
  /** With cacheFrom: the named images, which give hits by history and limit local hits to their chains. */
  #cacheFrom?: CacheSources;

  constructor(
    private readonly containers: ContainerService,
    private readonly images: ImageService,
    private readonly cache: BuildCacheRecords,
    private readonly opts: BuildOptions,
    private readonly emit: Emit,
    workDir: string,
  ) {
    this.#work = join(workDir, `b-${randomBytes(6).toString('hex')}`);
  }

  #out(text: string): void {
    if (!this.opts.quiet) this.emit({ stream: text });
  }

  async run(): Promise<string> {
    if (this.opts.cacheFrom.length > 0) this.#cacheFrom = new CacheSources(this.images, this.opts.cacheFrom);
    await mkdir(this.#work, { recursive: true });
    try {
      return await this.#run();
    } finally {
      await rm(this.#work, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  async #run(): Promise<string> {
    let parsed;
    try {
      parsed = parseDockerfile(this.opts.dockerfile);
    } catch (err) {
      throw new BuildError(`dockerfile parse error: ${errorMessage(err)}`);
    }
    this.#escape = parsed.escape;
    for (const w of parsed.warnings) this.#out(`[Warning] ${w}\n`);
    // As dockerd: an unknown instruction fails the build before any step runs.
    for (const n of parsed.nodes) {
      if (!KNOWN.has(n.name)) throw new BuildError(`dockerfile parse error on line ${n.line}: unknown instruction: ${n.original.trim().split(/\s/)[0]!.toUpperCase()}`);
    }
    const { stages, globals } = this.#split(parsed.nodes);
    let last = stages.length - 1;
    if (this.opts.target) {
      last = stages.findIndex((s) => s.name === this.opts.target!.toLowerCase());
      if (last < 0) throw new BuildError(`failed to reach build target ${this.opts.target} in Dockerfile`);
    }
    const used = stages.slice(0, last + 1);
    const labels = Object.entries(this.opts.labels).sort(([a], [b]) => a.localeCompare(b));
    if (labels.length > 0) {
      const text = 'LABEL ' + labels.map(([k, v]) => `${JSON.stringify(k)}=${JSON.stringify(v)}`).join(' ');
      used[used.length - 1]!.nodes.push({ name: 'label', flags: [], args: labels.flatMap(([k, v]) => [JSON.stringify(k), JSON.stringify(v), '=']), json: false, original: text, line: 0, heredocs: [] });
    }
    // as dockerd: the ARGs before the first FROM are steps too
    this.#total = globals.length + used.reduce((n, s) => n + 1 + s.nodes.length, 0);
    for (const g of globals) {
      this.#stepHeader(g);
      this.#declareArgs(g, this.#globalArgs, new Map());
    }
    let result: StepImage | undefined;
    for (const stage of used) {
      result = await this.#stage(stage, stages);
      stage.result = result;
    }
    const unused = Object.keys(this.opts.buildArgs).filter((k) => !this.#usedArgs.has(k) && !PROXY_ARGS.has(k));
    if (unused.length > 0) this.#out(`[Warning] One or more build-args [${unused.sort().join(' ')}] were not consumed\n`);
    if (!result?.record) throw new BuildError('No image was generated. Is your Dockerfile empty?');
    return result.record.id;
  }

  #split(nodes: DockerfileNode[]): { stages: Stage[]; globals: DockerfileNode[] } {
    const stages: Stage[] = [];
    const globals: DockerfileNode[] = [];
    for (const n of nodes) {
      if (n.name === 'from') {
        const a = n.args;
        if (a.length !== 1 && !(a.length === 3 && a[1]!.toLowerCase() === 'as')) throw new BuildError('FROM requires either one or three arguments');
        stages.push({ from: n, nodes: [], name: a.length === 3 ? a[2]!.toLowerCase() : undefined });
      } else if (stages.length === 0) {
        if (n.name !== 'arg') throw new BuildError(`no build stage in current context`);
        globals.push(n);
      } else stages[stages.length - 1]!.nodes.push(n);
    }
    if (stages.length === 0) throw new BuildError('No build stage in current context');
    return { stages, globals };
  }

  async #stage(stage: Stage, all: Stage[]): Promise<StepImage> {
    const state = await this.#from(stage, all);
    const triggers = state.config.OnBuild ?? [];
    if (triggers.length > 0) {
      this.#out(`# Executing ${triggers.length} build trigger${triggers.length > 1 ? 's' : ''}\n`);
      state.config = { ...state.config, OnBuild: [] };
      for (const t of triggers) {
        if (this.opts.signal.aborted) throw new BuildError('build canceled');
        const node = parseDockerfile(t).nodes[0]!;
        await this.#dispatch(node, state, all);
      }
    }
    for (const node of stage.nodes) {
      this.#stepHeader(node);
      await this.#dispatch(node, state, all);
      this.#out(` ---> ${short(state.image.record!.id)}\n`);
    }
    return state.image;
  }

  #stepHeader(node: DockerfileNode): void {
    // A client gone mid-build stops it before the next step.
    if (this.opts.signal.aborted) throw new BuildError('build canceled');
    this.#step++;
    this.#out(`Step ${this.#step}/${this.#total} : ${node.original.trim()}\n`);
  }

  async #from(stage: Stage, all: Stage[]): Promise<State> {
    this.#stepHeader(stage.from);
    const env = new Map([...this.#globalArgs].filter((e): e is [string, string] => e[1] !== undefined));
    const name = this.#expand(stage.from.args[0]!, env);
    const flags = parseFlags(stage.from.flags, ['platform']);
    const platform = (flags.platform ? parsePlatform(this.#expand(flags.platform, env)) : undefined) ?? this.opts.platform;
    let image: StepImage;
    const earlier = all.find((s) => s.name === name.toLowerCase() && s.result);
    if (earlier) image = earlier.result!;
    else if (name.toLowerCase() === 'scratch') image = scratchImage(platform?.architecture ?? hostPlatform().architecture);
    else {
      let found = this.opts.pull ? undefined : tryLookupImage(this.images.records, name)?.image;
      if (!found) {
        const id = await this.opts.pull_(name, platform, (m) => {
          if (!this.opts.quiet) this.emit(m as Record<string, unknown>);
        });
        found = this.images.records.getImage(id);
        if (!found) throw new BuildError(`pull access denied for ${name}`);
      }
      image = { record: found, config: this.images.config(found) };
    }
    this.#out(` ---> ${image.record ? short(image.record.id) : 'scratch'}\n`);
    const config: ContainerConfig = structuredClone(image.config.config ?? {});
    return { image, config, args: new Map(), cmdSet: false };
  }

  /** Values instructions expand with: the stage's args, overridden by ENV. */
  #env(state: State): Map<string, string> {
    const m = new Map<string, string>();
    for (const [k, v] of state.args) if (v !== undefined) m.set(k, v);
    for (const kv of state.config.Env ?? []) {
      const eq = kv.indexOf('=');
      m.set(eq < 0 ? kv : kv.slice(0, eq), eq < 0 ? '' : kv.slice(eq + 1));
    }
    return m;
  }

  #expand(word: string, env: ReadonlyMap<string, string>): string {
    try {
      return processWord(word, env, this.#escape);
    } catch (err) {
      throw new BuildError(errorMessage(err));
    }
  }

  /** ARG name[=default]...: a build arg given for the name wins over the default. */
  #declareArgs(node: DockerfileNode, into: Map<string, string | undefined>, env: ReadonlyMap<string, string>): string[] {
    const shown: string[] = [];
    for (const word of node.args) {
      const eq = word.indexOf('=');
      const name = eq < 0 ? word : word.slice(0, eq);
      let value = eq < 0 ? undefined : this.#expand(word.slice(eq + 1), new Map([...env, ...[...into].filter((e): e is [string, string] => e[1] !== undefined)]));
      if (eq < 0 && this.#globalArgs.has(name) && into !== this.#globalArgs) value = this.#globalArgs.get(name);
      if (Object.hasOwn(this.opts.buildArgs, name)) {
        value = this.opts.buildArgs[name];
        this.#usedArgs.add(name);
      }
      into.set(name, value);
      shown.push(eq < 0 ? name : `${name}=${word.slice(eq + 1)}`);
    }
    return shown;
  }

  async #dispatch(node: DockerfileNode, s: State, all: Stage[]): Promise<void> {
    // Flags are read by the instructions that have them; elsewhere (RUN --mount...) they are refused.
    if (!['copy', 'add', 'healthcheck'].includes(node.name)) parseFlags(node.flags, []);
    const env = this.#env(s);
    const shell = s.config.Shell?.length ? s.config.Shell : DEFAULT_SHELL;
    switch (node.name) {
      case 'env': {
        const pairs = triples(node.args).map(([k, v]) => [this.#expand(k, env), this.#expand(v, env)] as const);
        if (pairs.length === 0) throw new BuildError('ENV requires at least one argument');
        const list = [...(s.config.Env ?? [])];
        for (const [k, v] of pairs) {
          const i = list.findIndex((e) => e === k || e.startsWith(`${k}=`));
          if (i >= 0) list[i] = `${k}=${v}`;
          else list.push(`${k}=${v}`);
        }
        s.config.Env = list;
        return this.#commit(s, 'ENV ' + pairs.map(([k, v]) => `${k}=${v}`).join(' '));
      }
      case 'label': {
        const pairs = triples(node.args).map(([k, v]) => [this.#expand(k, env), this.#expand(v, env)] as const);
        if (pairs.length === 0) throw new BuildError('LABEL requires at least one argument');
        s.config.Labels = { ...(s.config.Labels ?? {}) };
        for (const [k, v] of pairs) s.config.Labels[k] = v;
        return this.#commit(s, 'LABEL ' + pairs.map(([k, v]) => `${k}=${v}`).join(' '));
      }
      case 'arg': {
        if (node.args.length === 0) throw new BuildError('ARG requires exactly one argument');
        const shown = this.#declareArgs(node, s.args, env);
        return this.#commit(s, 'ARG ' + shown.join(' '));
      }
      case 'maintainer':
        s.author = node.args[0] ?? '';
        return this.#commit(s, `MAINTAINER ${s.author}`);
      case 'cmd': {
        s.config.Cmd = node.json ? node.args : [...shell, node.args[0] ?? ''];
        s.cmdSet = true;
        return this.#commit(s, `CMD ${goQuoteList(s.config.Cmd)}`);
      }
      case 'entrypoint': {
        s.config.Entrypoint = node.json ? node.args : node.args.length ? [...shell, node.args[0]!] : null;
        if (!s.cmdSet) s.config.Cmd = null;
        return this.#commit(s, `ENTRYPOINT ${goQuoteList(s.config.Entrypoint ?? [])}`);
      }
      case 'shell':
        if (!node.json || node.args.length === 0) throw new BuildError('SHELL requires the arguments to be in JSON form');
        s.config.Shell = node.args;
        return this.#commit(s, `SHELL [${node.args.join(' ')}]`);
      case 'expose': {
        if (node.args.length === 0) throw new BuildError('EXPOSE requires at least one argument');
        const ports = node.args.flatMap((a) => processWords(a, env, this.#escape));
        s.config.ExposedPorts = { ...(s.config.ExposedPorts ?? {}) };
        for (const p of ports) for (const q of expandPort(p)) s.config.ExposedPorts[q] = {};
        return this.#commit(s, `EXPOSE ${ports.join(' ')}`);
      }
      case 'volume': {
        const vols = node.args.map((a) => this.#expand(a, env)).filter((v) => v.trim() !== '');
        if (vols.length === 0) throw new BuildError('VOLUME specified can not be an empty string');
        s.config.Volumes = { ...(s.config.Volumes ?? {}) };
        for (const v of vols) s.config.Volumes[v] = {};
        return this.#commit(s, `VOLUME [${vols.join(' ')}]`);
      }
      case 'user':
        if (node.args.length === 0) throw new BuildError('USER requires exactly one argument');
        s.config.User = this.#expand(node.args[0]!, env);
        return this.#commit(s, `USER ${s.config.User}`);
      case 'stopsignal':
        if (node.args.length === 0) throw new BuildError('STOPSIGNAL requires exactly one argument');
        s.config.StopSignal = this.#expand(node.args[0]!, env);
        return this.#commit(s, `STOPSIGNAL ${s.config.StopSignal}`);
      case 'onbuild': {
        const sub = node.sub;
        if (!sub) throw new BuildError('ONBUILD requires at least one argument');
        if (sub.name === 'onbuild') throw new BuildError('Chaining ONBUILD via `ONBUILD ONBUILD` isn\'t allowed');
        if (sub.name === 'from' || sub.name === 'maintainer') throw new BuildError(`${sub.name.toUpperCase()} isn't allowed as an ONBUILD trigger`);
        const expr = node.original.trim().replace(/^onbuild\s+/i, '');
        s.config.OnBuild = [...(s.config.OnBuild ?? []), expr];
        return this.#commit(s, `ONBUILD ${expr}`);
      }
      case 'healthcheck':
        s.config.Healthcheck = healthcheck(node, shell);
        return this.#commit(s, `HEALTHCHECK ${describeHealthcheck(s.config.Healthcheck)}`);
      case 'workdir': {
        if (node.args.length === 0) throw new BuildError('WORKDIR requires exactly one argument');
        const dir = this.#expand(node.args[0]!, env);
        s.config.WorkingDir = posix.isAbsolute(dir) ? posix.normalize(dir) : posix.join(s.config.WorkingDir || '/', dir);
        return this.#fsStep(s, `WORKDIR ${s.config.WorkingDir}`, async (root) => {
          const abs = await resolveInRoot(root, s.config.WorkingDir!);
          await mkdir(abs, { recursive: true, mode: 0o755 });
        }, { emptyIfUnchanged: true, stepContainer: true });
      }
      case 'run':
        return this.#runStep(node, s, shell);
      case 'copy': case 'add':
        return this.#copyStep(node, s, env, all);
      case 'from':
        throw new BuildError('FROM is not allowed here');
      default:
        throw new BuildError(`unknown instruction: ${node.name.toUpperCase()}`);
    }
  }

  /** A metadata step: a new image with the config changed and no layer. */
  async #commit(s: State, text: string): Promise<void> {
    const createdBy = `/bin/sh -c #(nop)  ${text}`;
    await this.#cached(s, createdBy, '', () => this.#withStepContainer(s, ['/bin/sh', '-c', '#(nop) ', text], async () => writeStepImage(this.images, { parent: s.image, config: s.config, createdBy, author: s.author })));
  }

  /**
   * As dockerd's classic builder, a metadata or WORKDIR step made on a cache miss goes through a
   * container of the parent image (created, never started) that is removed as a RUN step's is, so
   * the stream names it. FROM scratch has no image to create one from.
   */
  async #withStepContainer(s: State, cmd: string[], make: () => Promise<StepImage>): Promise<StepImage> {
    if (!s.image.record) return make();
    const { Id } = this.containers.create({
      config: { Image: s.image.record.id, Cmd: cmd, Entrypoint: [''], Env: s.config.Env ?? [], User: s.config.User ?? '', WorkingDir: s.config.WorkingDir ?? '', Healthcheck: { Test: ['NONE'] }, Labels: {} } as never,
      hostConfig: { ...this.opts.hostConfig } as never,
      networkingConfig: {},
    });
    this.#out(` ---> Running in ${short(Id)}\n`);
    let made = false;
    try {
      const image = await make();
      made = true;
      return image;
    } finally {
      const aborted = this.opts.signal.aborted;
      if (aborted || this.opts.forceRm || (this.opts.rm && made)) {
        await this.containers.remove(Id, { force: true, volumes: true }).catch((err) => log.warn('build: removing an intermediate container failed', { id: Id, err }));
        if (!aborted) this.#out(` ---> Removed intermediate container ${short(Id)}\n`);
      }
    }
  }

  /** Looks the step up in the cache, or makes it and records it there. */
  async #cached(s: State, createdBy: string, extra: string, make: () => Promise<StepImage>): Promise<void> {
    const key = createHash('sha256').update(JSON.stringify([s.image.record?.id ?? 'scratch', createdBy, extra, s.author ?? ''])).digest('hex');
    if (!this.opts.noCache) {
      const hit = this.cache.get(key);
      const record = hit && this.images.records.getImage(hit.imageId);
      if (hit && record && (!this.#cacheFrom || this.#cacheFrom.chain.has(record.id))) {
        this.cache.touch(key);
        this.#out(' ---> Using cache\n');
        s.image = { record, config: this.images.config(record) };
        s.config = structuredClone(s.image.config.config ?? {});
        return;
      }
      const restored = await this.#cacheFrom?.match(s.image, createdBy, s.config, s.author);
      if (restored?.record) {
        this.cache.put(key, restored.record.id);
        this.#out(' ---> Using cache\n');
        s.image = restored;
        s.config = structuredClone(restored.config.config ?? {});
        return;
      }
    }
    s.image = await make();
    this.cache.put(key, s.image.record!.id);
  }

  /** COPY/ADD/WORKDIR: an overlay of the parent image written through, its upper dir the layer. */
  async #fsStep(s: State, text: string, write: (root: string) => Promise<void>, opts: { extra?: string; emptyIfUnchanged?: boolean; stepContainer?: boolean } = {}): Promise<void> {
    const createdBy = `/bin/sh -c #(nop) ${text}`;
    const make = async (): Promise<StepImage> => {
      const paths = rootfsPaths(join(this.#work, `step-${this.#step}-${randomBytes(4).toString('hex')}`));
      const lowers = [...(s.image.record?.chainIds ?? [])].reverse().map((id) => this.images.layers.diffDir(id as Digest));
      // volatile: the upper dir is read once into the layer, then deleted; no sync at unmount
      await mountRootfs(paths, lowers, { volatile: true });
      try {
        await write(paths.merged);
      } finally {
        await unmountRootfs(paths);
      }
      const top = s.image.record?.chainIds[s.image.record.chainIds.length - 1] as Digest | undefined;
      const xattrs = await readUpperXattrs(paths.upper);
      let layer: CommittedLayer | undefined = await this.images.layers.buildComputed(top, (dir) => copyUpperToLayer(paths.upper, dir, { xattrs }));
      await rm(paths.dir, { recursive: true, force: true });
      if (opts.emptyIfUnchanged && layer.tarSize <= 1024) {
        if (this.images.records.layerUsers(layer.chainId) === 0) await this.images.layers.remove(layer.chainId);
        layer = undefined;
      }
      return writeStepImage(this.images, { parent: s.image, config: s.config, createdBy, layer, author: s.author });
    };
    await this.#cached(s, createdBy, opts.extra ?? '', opts.stepContainer ? () => this.#withStepContainer(s, ['/bin/sh', '-c', `#(nop) ${text}`], make) : make);
  }

  async #copyStep(node: DockerfileNode, s: State, env: Map<string, string>, all: Stage[]): Promise<void> {
    const cmd = node.name.toUpperCase();
    const flags = parseFlags(node.flags, node.name === 'copy' ? ['from', 'chown', 'chmod'] : ['chown', 'chmod']);
    let args = node.args.map((a) => a);
    const heredocs = node.heredocs;
    if (heredocs.length > 0) {
      // COPY <<EOF /dest: the bodies are the sources
      args = args.filter((a) => !/^<<-?["']?[A-Za-z_][A-Za-z0-9_]*["']?$/.test(a));
    }
    if (args.length + heredocs.length < 2 && !(heredocs.length > 0 && args.length === 1)) throw new BuildError(`${cmd} requires at least two arguments, but only one was provided. Destination could not be determined.`);
    const destRaw = this.#expand(args[args.length - 1]!, env);
    const wd = s.config.WorkingDir || '/';
    // a trailing `/` (or `.`) says the destination is a directory
    let dest = posix.normalize(posix.isAbsolute(destRaw) ? destRaw : posix.join(wd, destRaw));
    if ((destRaw.endsWith('/') || destRaw === '.' || destRaw.endsWith('/.')) && !dest.endsWith('/')) dest += '/';
    const srcWords = args.slice(0, -1).map((a) => this.#expand(a, env));
    let srcRoot = this.opts.contextDir;
    let fromMount: { paths: ReturnType<typeof rootfsPaths> } | undefined;
    const sources: Source[] = [];
    const scratch = join(this.#work, `src-${this.#step}`);
    await mkdir(scratch, { recursive: true });
    try {
      if (flags.from) {
        const from = this.#expand(flags.from, env).toLowerCase();
        const stage = all.find((st) => st.name === from && st.result) ?? (/^\d+$/.test(from) ? all[Number(from)] : undefined);
        let img = stage?.result;
        if (!img) {
          let rec = tryLookupImage(this.images.records, from)?.image;
          if (!rec) {
            const id = await this.opts.pull_(from, this.opts.platform, () => undefined);
            rec = this.images.records.getImage(id);
          }
          if (!rec) throw new BuildError(`invalid from flag value ${from}: not found`);
          img = { record: rec, config: this.images.config(rec) };
        }
        const paths = rootfsPaths(join(this.#work, `from-${this.#step}`));
        await mountRootfs(paths, [...(img.record?.chainIds ?? [])].reverse().map((id) => this.images.layers.diffDir(id as Digest)), { volatile: true });
        fromMount = { paths };
        srcRoot = paths.merged;
      }
      const local = srcWords.filter((w) => !(node.name === 'add' && /^https?:\/\//.test(w)));
      if (local.length > 0) sources.push(...(await resolveSources(srcRoot, local, cmd).catch((err) => { throw new BuildError(errorMessage(err)); })));
      if (node.name === 'add') {
        for (const w of srcWords.filter((x) => /^https?:\/\//.test(x))) sources.push(await download(w, scratch, this.opts.signal));
        if (!fromMount) for (const src of sources) if (!src.isDir && !src.abs.startsWith(scratch) && (await isArchive(src.abs))) src.extract = true;
      }
      for (const [i, doc] of heredocs.entries()) {
        const abs = join(scratch, `heredoc-${i}`);
        // An unquoted heredoc word expands variables in the body as a double-quoted word would.
        await writeFile(abs, doc.expand ? this.#expand(`"${doc.content.replace(/"/g, '\\"')}"`, env) : doc.content, { mode: 0o644 });
        sources.push({ abs, name: doc.name, isDir: false });
      }
      if (sources.length > 1 && !dest.endsWith('/')) throw new BuildError(`When using ${cmd} with more than one source file, the destination must be a directory and end with a /`);
      const sum = await checksumSources(sources, fromMount ? undefined : this.opts.contextDigests);
      const kind = sources.length > 1 ? 'multi' : sources[0]!.isDir ? 'dir' : 'file';
      const owner = flags.chown ? await this.#owner(s, this.#expand(flags.chown, env)) : undefined;
      const mode = flags.chmod ? parseMode(flags.chmod) : undefined;
      const text = `${cmd} ${flags.chown ? `--chown=${flags.chown} ` : ''}${flags.chmod ? `--chmod=${flags.chmod} ` : ''}${kind}:${sum} in ${dest} `;
      await this.#fsStep(s, text, (root) => copySources(sources, { root, dest, owner, mode, keepOwner: !!fromMount, scratchDir: scratch }), { extra: JSON.stringify([flags.chown ?? '', flags.chmod ?? '', sources.map((x) => x.extract ?? false)]) });
    } finally {
      if (fromMount) await unmountRootfs(fromMount.paths).catch(() => undefined);
      await rm(scratch, { recursive: true, force: true });
    }
  }

  async #owner(s: State, spec: string): Promise<Owner> {
    const [u = '', g] = spec.split(':', 2);
    if (/^\d+$/.test(u) && (g === undefined || /^\d+$/.test(g))) return { uid: Number(u), gid: Number(g ?? u) };
    const paths = rootfsPaths(join(this.#work, `chown-${this.#step}`));
    await mountRootfs(paths, [...(s.image.record?.chainIds ?? [])].reverse().map((id) => this.images.layers.diffDir(id as Digest)), { volatile: true });
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

  async #runStep(node: DockerfileNode, s: State, shell: string[]): Promise<void> {
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
    const proxy = Object.entries(this.opts.buildArgs).filter(([k]) => PROXY_ARGS.has(k) && !s.args.has(k)).map(([k, v]) => `${k}=${v}`);
    // as dockerd: any build arg in effect (a proxy arg too, though not listed) prefixes the history text
    const saved = argEnv.length + proxy.length > 0 ? [`|${argEnv.length}`, ...argEnv, ...cmd] : cmd;
    const createdBy = saved.join(' ');
    await this.#cached(s, createdBy, '', async () => {
      const { Id } = this.containers.create({
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
        hostConfig: { ...this.opts.hostConfig } as never,
        networkingConfig: {},
      });
      this.#out(` ---> Running in ${short(Id)}\n`);
      let keep = !this.opts.rm && !this.opts.forceRm;
      try {
        const c = this.containers.get(Id);
        const waited = this.containers.wait(Id, 'next-exit').pending!;
        const aborted = new Promise<never>((_, reject) => this.opts.signal.addEventListener('abort', () => reject(new BuildError('build canceled')), { once: true }));
        aborted.catch(() => undefined);
        await this.containers.start(Id);
        const logs = (async () => {
          for await (const r of readLogRecords(c.logPath, { follow: true, until: waited, signal: this.opts.signal })) this.#out(r.text + (r.partial ? '' : '\n'));
        })();
        const result = await Promise.race([waited, aborted]);
        await logs.catch(() => undefined);
        if (result.StatusCode !== 0) {
          // dockerd: rm removes after success only; forcerm also after a failure
          keep = !this.opts.forceRm;
          throw new BuildError(`The command '${cmd.join(' ')}' returned a non-zero code: ${result.StatusCode}`, result.StatusCode);
        }
        const layer = await this.containers.withLock(Id, () => commitLayer(this.containers, c, true), { alongsideRelease: true });
        return await writeStepImage(this.images, { parent: s.image, config: s.config, createdBy, layer, author: s.author });
      } finally {
        // A canceled build leaves nothing behind; a failed step's container stays unless rm and forcerm say otherwise.
        if (this.opts.signal.aborted) keep = false;
        if (!keep) {
          await this.containers.remove(Id, { force: true, volumes: true }).catch((err) => log.warn('build: removing an intermediate container failed', { id: Id, err }));
          if (!this.opts.signal.aborted) this.#out(` ---> Removed intermediate container ${short(Id)}\n`);
        }
      }
    });
  }
}

const short = (id: string): string => id.replace(/^sha256:/, '').slice(0, 12);

function triples(args: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < args.length; i += 3) out.push([args[i]!, args[i + 1]!]);
  return out;
}

/** BuildKit's flags, refused by name so the user knows which builder has them. */
const BUILDKIT_FLAGS = new Set(['link', 'parents', 'exclude', 'checksum', 'keep-git-dir', 'mount', 'network', 'security', 'start-interval-only']);

function parseFlags(flags: string[], allowed: string[]): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const f of flags) {
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(f);
    const name = m?.[1] ?? f.replace(/^--/, '').split('=')[0]!;
    if (!m || !allowed.includes(name)) {
      throw new BuildError(BUILDKIT_FLAGS.has(name) ? `the --${name} option requires BuildKit: unknown flag: ${name}` : `Unknown flag: ${name}`);
    }
    out[name] = m[2] ?? 'true';
  }
  return out;
}

function parseMode(s: string): number {
  if (!/^[0-7]{1,4}$/.test(s)) throw new BuildError(`invalid chmod parameter ${s}`);
  return parseInt(s, 8);
}

function expandPort(p: string): string[] {
  const [ports = '', proto = 'tcp'] = p.split('/');
  const m = /^(\d+)(?:-(\d+))?$/.exec(ports);
  if (!m) throw new BuildError(`Invalid containerPort: ${ports}`);
  const lo = Number(m[1]);
  const hi = m[2] ? Number(m[2]) : lo;
  if (hi < lo || hi > 65535) throw new BuildError(`Invalid port range: ${ports}`);
  const out: string[] = [];
  for (let i = lo; i <= hi && out.length < 65536; i++) out.push(`${i}/${proto.toLowerCase()}`);
  return out;
}

/** Go's %q of a string slice: ["a" "b"] */
function goQuoteList(a: string[]): string {
  return '[' + a.map((x) => JSON.stringify(x)).join(' ') + ']';
}

const DURATION_UNITS: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };

function parseDuration(s: string, what: string): number {
  if (s === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let pos = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    total += Number(m[1]) * DURATION_UNITS[m[2]!]!;
    pos = re.lastIndex;
  }
  if (pos !== s.length || s === '') throw new BuildError(`invalid duration for ${what}: ${s}`);
  return Math.round(total);
}

function healthcheck(node: DockerfileNode, shell: string[]): NonNullable<ContainerConfig['Healthcheck']> {
  const [typ, ...rest] = node.args;
  const t = (typ ?? '').toUpperCase();
  if (t === 'NONE') {
    if (rest.length > 0 || node.flags.length > 0) throw new BuildError('HEALTHCHECK NONE takes no arguments');
    return { Test: ['NONE'] };
  }
  if (t !== 'CMD') throw new BuildError(`Unknown type "${typ ?? ''}" in HEALTHCHECK (try CMD)`);
  if (rest.length === 0) throw new BuildError('Missing command after HEALTHCHECK CMD');
  const f = parseFlags(node.flags, ['interval', 'timeout', 'start-period', 'start-interval', 'retries']);
  const hc: NonNullable<ContainerConfig['Healthcheck']> = { Test: node.json ? ['CMD', ...rest] : ['CMD-SHELL', rest[0]!] };
  void shell;
  if (f.interval) hc.Interval = parseDuration(f.interval, 'interval');
  if (f.timeout) hc.Timeout = parseDuration(f.timeout, 'timeout');
  if (f['start-period']) hc.StartPeriod = parseDuration(f['start-period'], 'start-period');
  if (f['start-interval']) hc.StartInterval = parseDuration(f['start-interval'], 'start-interval');
  if (f.retries) {
    const r = Number(f.retries);
    if (!Number.isInteger(r) || r < 0) throw new BuildError(`invalid retries: ${f.retries}`);
    hc.Retries = r;
  }
  return hc;
}

function goDuration(ns: number | undefined): string {
  const n = ns ?? 0;
  if (n === 0) return '0s';
  const s = n / 1e9;
  if (s < 60) return `${s}s`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return `${h ? `${h}h` : ''}${h || m ? `${m}m` : ''}${sec}s`;
}

/** Go's %+v of the health config, as dockerd's history shows it. */
function describeHealthcheck(h: NonNullable<ContainerConfig['Healthcheck']>): string {
  return `&{Test:[${(h.Test ?? []).join(' ')}] Interval:${goDuration(h.Interval)} Timeout:${goDuration(h.Timeout)} StartPeriod:${goDuration(h.StartPeriod)} StartInterval:${goDuration(h.StartInterval)} Retries:${h.Retries ?? 0}}`;
}

