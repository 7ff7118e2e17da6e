/**
 * What the runtime driver found on this host and where it keeps its state: conmon's and the
 * runtimes' binaries (and why one is unusable), the cgroup layout (fixed for crun on a hybrid
 * host), berthd's hard rlimits and capabilities (the most a container can get), the seccomp
 * filter cache, and the state dir's layout:
 *
 *   <stateDir>/crun/, runc/            the runtimes' --root (Berth's containers only)
 *   <stateDir>/exits/<id>              exit code written by conmon (--exit-dir); mtime = exit time
 *   <stateDir>/sockets/<id> → bundle   conmon's short link to the attach socket (--socket-dir-path)
 *   <stateDir>/containers/<id>/        meta.json, conmon.pid, pid (container), conmon.log, oom
 *   <stateDir>/execs/<id>/<exec id>/   one directory per exec session (exec-session.ts)
 */
import { constants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { invalidArgument, unavailable } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { detectCgroupLayout, fixHybridLayout, controllersOnUnified, type CgroupLayout } from './cgroups.js';
import { favorCgroupMoves } from './cgroup-dynmods.js';
import { ContainerMetas } from './container-meta.js';
import { SeccompBpfCache } from './seccomp-cache.js';
import { ownHardLimits, type HardLimits } from './rlimits.js';
import { ownCapabilities } from './capabilities.js';
import { RUNTIME_NAMES, type RuntimeBinary, type RuntimeName } from './runtime-cli.js';
import type { CpuRealtime } from './cpu-rt.js';

export interface RuntimeDriverOptions {
  /** Directory for runtime state, e.g. <exec-root>/runtime. Created by init(). */
  stateDir: string;
  defaultRuntime: RuntimeName;
  /** Binary paths; default: looked up in PATH. */
  conmonPath?: string;
  runtimePaths?: Partial<Record<RuntimeName, string>>;
  /** false: start conmon, and send signals, with spawn() (a fork of berthd) instead of long-lived shells. */
  launcher?: boolean;
  /** dockerd's --cpu-rt-period/--cpu-rt-runtime: the budget given to containers' parent cgroups. */
  cpuRealtime?: CpuRealtime;
}

async function findInPath(name: string): Promise<string | undefined> {
  const dirs = (process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin').split(delimiter);
  for (const dir of [...dirs, '/usr/libexec/podman', '/usr/bin']) {
    const p = join(dir, name);
    try {
      await access(p, constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  return undefined;
}

export class RuntimeHost {
  readonly stateDir: string;
  readonly defaultRuntime: RuntimeName;
  readonly exitsDir: string;
  readonly socketsDir: string;
  readonly metas: ContainerMetas;
  readonly #opts: RuntimeDriverOptions;
  readonly cpuRealtime: CpuRealtime | undefined;
  #conmonPath = '';
  readonly #runtimes = new Map<RuntimeName, RuntimeBinary>();
  /** Why a runtime cannot be used here (binary missing, crun on an unfixable hybrid layout). */
  readonly #unusable = new Map<RuntimeName, string>();
  #layout: CgroupLayout | undefined;
  #hardLimits: HardLimits = new Map();
  #capabilities: ReadonlySet<string> = new Set();
  #seccompCache: SeccompBpfCache | undefined;
  #releaseCgroupMoves: (() => void) | undefined;

  constructor(opts: RuntimeDriverOptions) {
    this.#opts = opts;
    this.cpuRealtime = opts.cpuRealtime;
    this.stateDir = opts.stateDir;
    this.defaultRuntime = opts.defaultRuntime;
    this.exitsDir = join(opts.stateDir, 'exits');
    this.socketsDir = join(opts.stateDir, 'sockets');
    this.metas = new ContainerMetas((id) => this.containerDir(id));
  }

  containerDir(id: string): string {
    return join(this.stateDir, 'containers', id);
  }

  /** The exec sessions' dirs of a container, or one session's dir. */
  execDir(id: string, execId?: string): string {
    return execId === undefined ? join(this.stateDir, 'execs', id) : join(this.stateDir, 'execs', id, execId);
  }

  /** Finds the binaries, fixes the cgroup layout for crun if needed. */
  async init(): Promise<void> {
    await Promise.all(['exits', 'sockets', 'containers', 'execs', ...RUNTIME_NAMES].map((d) => mkdir(join(this.stateDir, d), { recursive: true })));
    const conmon = this.#opts.conmonPath ?? (await findInPath('conmon'));
    if (!conmon) throw unavailable('conmon not found in PATH');
    this.#conmonPath = conmon;
    for (const name of RUNTIME_NAMES) {
      const path = this.#opts.runtimePaths?.[name] ?? (await findInPath(name));
      if (path) this.#runtimes.set(name, { name, path, root: join(this.stateDir, name) });
      else this.#unusable.set(name, `${name} not found in PATH`);
    }
    const crun = this.#runtimes.get('crun');
    if (crun) this.#seccompCache = await SeccompBpfCache.forBinary(crun.path);
    this.#hardLimits = ownHardLimits();
    this.#capabilities = ownCapabilities();

    let layout = detectCgroupLayout();
    if (layout.kind === 'hybrid' && (await controllersOnUnified(layout)).length > 0 && this.#runtimes.has('crun')) {
      const fixed = await fixHybridLayout(layout);
      layout = fixed.layout;
      if (fixed.failed.length > 0) {
        const why = fixed.failed.map((f) => `${f.controller}: ${f.error}`).join('; ');
        this.#unusable.set('crun', `crun cannot run containers on this hybrid cgroup layout (could not mount ${why}); use runc`);
        log.warn('cgroup controllers left on cgroup2, crun disabled', { failed: why });
      } else {
        log.info('mounted cgroup controllers as v1 hierarchies for crun', { layout: layout.kind });
      }
    }
    this.#layout = layout;
    if (this.#unusable.has(this.defaultRuntime)) throw unavailable(this.#unusable.get(this.defaultRuntime) ?? 'default runtime unusable');
    this.#releaseCgroupMoves = await favorCgroupMoves(join(this.stateDir, 'cgroup-dynmods'));
  }

  close(): void {
    const release = this.#releaseCgroupMoves;
    this.#releaseCgroupMoves = undefined;
    release?.();
  }

  get conmonPath(): string {
    return this.#conmonPath;
  }

  get cgroupLayout(): CgroupLayout {
    if (!this.#layout) throw new Error('RuntimeDriver.init() not called');
    return this.#layout;
  }

  /** What buildSpec's cgroupVersion should be on this host. */
  get cgroupVersion(): 1 | 2 {
    return this.cgroupLayout.kind === 'v2' ? 2 : 1;
  }

  get hardLimits(): HardLimits {
    return this.#hardLimits;
  }

  /** Capabilities berthd holds, the most a container can get. */
  get capabilities(): ReadonlySet<string> {
    return this.#capabilities;
  }

  get seccompCache(): SeccompBpfCache | undefined {
    return this.#seccompCache;
  }

  /** A runtime to use; unavailable (with the reason) when it cannot run containers here. */
  binary(name: RuntimeName): RuntimeBinary {
    const why = this.#unusable.get(name);
    if (why) throw unavailable(why);
    const rt = this.#runtimes.get(name);
    if (!rt) throw invalidArgument(`unknown runtime: ${name}`);
    return rt;
  }

  /** A runtime found here, usable or not (cleanup of what it holds); undefined when not found. */
  found(name: RuntimeName): RuntimeBinary | undefined {
    return this.#runtimes.get(name);
  }

  /** The runtimes found here. */
  foundNames(): RuntimeName[] {
    return [...this.#runtimes.keys()];
  }
}
