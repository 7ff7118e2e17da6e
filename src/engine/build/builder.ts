/**
 * One classic build: the Dockerfile's stages run instruction by instruction, each producing an
 * image (metadata steps without a layer), each looked up in the cache first. RUN runs as an
 * ordinary container of this engine; COPY/ADD/WORKDIR write into an overlay of the parent image
 * whose upper dir becomes the layer. The output is dockerd's classic builder stream. The
 * instructions' handlers live in instructions.ts, fs-step.ts, run-step.ts and step-cache.ts.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { randomHex } from '../../lib/random-hex.js';
import { errorMessage } from '../../lib/errors.js';
import type { ContainerConfig } from '../../lib/oci.js';
import type { BuildCacheRecords } from '../../state/build-cache-records.js';
import type { ContainerService } from '../containers/container-service.js';
import { tryLookupImage } from '../images/image-lookup.js';
import type { ImageService } from '../images/image-service.js';
import { hostPlatform, parsePlatform } from '../../lib/platform.js';
import { parseDockerfile, type DockerfileNode } from './dockerfile/parser.js';
import { processWord } from './dockerfile/shell-word.js';
import { scratchImage, type StepImage } from './image-writer.js';
import { CacheSources } from './cache-from.js';
import { BuildError, PROXY_ARGS, short, type BuildOptions, type Emit, type Stage, type State, type StepContext } from './build-step.js';
import { dispatchInstruction } from './instructions.js';
import { parseFlags } from './instruction-args.js';

export { BuildError, type BuildOptions, type BuildSettings, type Emit } from './build-step.js';

const KNOWN = new Set(['from', 'run', 'cmd', 'entrypoint', 'env', 'arg', 'label', 'expose', 'volume', 'user', 'workdir', 'copy', 'add', 'healthcheck', 'stopsignal', 'onbuild', 'maintainer', 'shell']);

export class Builder implements StepContext {
  #step = 0;
  #total = 0;
  readonly #usedArgs = new Set<string>();
  readonly #globalArgs = new Map<string, string | undefined>();
  #escape = '\\';
  readonly #work: string;
  /** whether a step asked for the work dir (its users make it): a fully cached build never does */
  #workUsed = false;
  /** With cacheFrom: the named images, which give hits by history and limit local hits to their chains. */
  #cacheFrom?: CacheSources;

  constructor(
    readonly containers: ContainerService,
    readonly images: ImageService,
    readonly cache: BuildCacheRecords,
    readonly opts: BuildOptions,
    private readonly emit: Emit,
    workDir: string,
  ) {
    this.#work = join(workDir, `b-${randomHex(6)}`);
  }

  get step(): number {
    return this.#step;
  }

  get escape(): string {
    return this.#escape;
  }

  get work(): string {
    this.#workUsed = true;
    return this.#work;
  }

  get cacheFrom(): CacheSources | undefined {
    return this.#cacheFrom;
  }

  out(text: string): void {
    if (!this.opts.quiet) this.emit({ stream: text });
  }

  async run(): Promise<string> {
    if (this.opts.cacheFrom.length > 0) this.#cacheFrom = new CacheSources(this.images, this.opts.cacheFrom);
    try {
      return await this.#run();
    } finally {
      if (this.#workUsed) await rm(this.#work, { recursive: true, force: true }).catch(() => undefined);
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
    for (const w of parsed.warnings) this.out(`[Warning] ${w}\n`);
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
      this.declareArgs(g, this.#globalArgs, new Map());
    }
    let result: StepImage | undefined;
    for (const stage of used) {
      result = await this.#stage(stage, stages);
      stage.result = result;
    }
    const unused = Object.keys(this.opts.buildArgs).filter((k) => !this.#usedArgs.has(k) && !PROXY_ARGS.has(k));
    if (unused.length > 0) this.out(`[Warning] One or more build-args [${unused.sort().join(' ')}] were not consumed\n`);
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
      this.out(`# Executing ${triggers.length} build trigger${triggers.length > 1 ? 's' : ''}\n`);
      state.config = { ...state.config, OnBuild: [] };
      for (const t of triggers) {
        if (this.opts.signal.aborted) throw new BuildError('build canceled');
        const node = parseDockerfile(t).nodes[0]!;
        await dispatchInstruction(this, node, state, all);
      }
    }
    for (const node of stage.nodes) {
      this.#stepHeader(node);
      await dispatchInstruction(this, node, state, all);
      this.out(` ---> ${short(state.image.record!.id)}\n`);
    }
    return state.image;
  }

  #stepHeader(node: DockerfileNode): void {
    // A client gone mid-build stops it before the next step.
    if (this.opts.signal.aborted) throw new BuildError('build canceled');
    this.#step++;
    this.out(`Step ${this.#step}/${this.#total} : ${node.original.trim()}\n`);
  }

  async #from(stage: Stage, all: Stage[]): Promise<State> {
    this.#stepHeader(stage.from);
    const env = new Map([...this.#globalArgs].filter((e): e is [string, string] => e[1] !== undefined));
    const name = this.expand(stage.from.args[0]!, env);
    const flags = parseFlags(stage.from.flags, ['platform']);
    const platform = (flags.platform ? parsePlatform(this.expand(flags.platform, env)) : undefined) ?? this.opts.platform;
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
    this.out(` ---> ${image.record ? short(image.record.id) : 'scratch'}\n`);
    const config: ContainerConfig = structuredClone(image.config.config ?? {});
    return { image, config, args: new Map(), cmdSet: false };
  }


  expand(word: string, env: ReadonlyMap<string, string>): string {
    try {
      return processWord(word, env, this.#escape);
    } catch (err) {
      throw new BuildError(errorMessage(err));
    }
  }

  /** ARG name[=default]...: a build arg given for the name wins over the default. */
  declareArgs(node: DockerfileNode, into: Map<string, string | undefined>, env: ReadonlyMap<string, string>): string[] {
    const shown: string[] = [];
    for (const word of node.args) {
      const eq = word.indexOf('=');
      const name = eq < 0 ? word : word.slice(0, eq);
      let value = eq < 0 ? undefined : this.expand(word.slice(eq + 1), new Map([...env, ...[...into].filter((e): e is [string, string] => e[1] !== undefined)]));
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
}
