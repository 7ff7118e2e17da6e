/**
 * The runtime driver: OCI bundle → conmon → crun/runc, and everything after (start, signals,
 * pause, exit tracking, exec, stats, cleanup). See README.md in this folder for conmon's files,
 * log format and attach socket framing.
 *
 * Every container is supervised by its own conmon, started detached: containers, their logs and
 * their exit codes outlive berthd. All state lives in files under `stateDir`, so a new driver
 * instance (after a daemon restart) picks containers up by id without any registration step:
 *
 *   <stateDir>/crun/, runc/            the runtimes' --root (Berth's containers only)
 *   <stateDir>/exits/<id>              exit code written by conmon (--exit-dir); mtime = exit time
 *   <stateDir>/sockets/<id> → bundle   conmon's short link to the attach socket (--socket-dir-path)
 *   <stateDir>/containers/<id>/        meta.json, conmon.pid, pid (container), conmon.log, oom
 *   <stateDir>/execs/<id>/<exec id>/   one directory per exec session (exec-session.ts)
 */
import { spawn } from 'node:child_process';
import { constants, openSync, closeSync, unlinkSync, writeSync } from 'node:fs';
import { access, mkdir, open, readdir, readFile, readlink, rm, rmdir, unlink, writeFile, rename } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { Socket } from 'node:net';
import { PassThrough, type Readable } from 'node:stream';
import { BerthError, conflict, internal, invalidArgument, notFound, unavailable } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { writeBundleConfig } from './bundle.js';
import { controllerDir, detectCgroupLayout, fixHybridLayout, readCgroupStats, removeCgroup, controllersOnUnified, type CgroupLayout, type CgroupStats } from './cgroups.js';
import { favorCgroupMoves } from './cgroup-dynmods.js';
import { ConmonLauncher, LauncherError, makeFifo } from './conmon-launcher.js';
import { conmonEnv, SyncPipeReader } from './conmon-sync.js';
import { startExec, type ExecOptions, type ExecSession } from './exec-session.js';
import { ExitWatcher, type ExitRecord } from './exit-watcher.js';
import type { OciResources, OciSpec } from './oci-spec.js';
import { isProcessAlive, readPidFile } from './pid-file.js';
import { SeccompBpfCache } from './seccomp-cache.js';
import { clampRlimits, ownHardLimits, type HardLimits } from './rlimits.js';
import { clampCapabilities, ownCapabilities } from './capabilities.js';
import { cleanMessage, RUNTIME_NAMES, runRuntime, runtimeState, type RuntimeBinary, type RuntimeName } from './runtime-cli.js';

export type { RuntimeName } from './runtime-cli.js';
import { initCpuRtParents, type CpuRealtime } from './cpu-rt.js';

export interface RuntimeDriverOptions {
  /** Directory for runtime state, e.g. <exec-root>/runtime. Created by init(). */
  stateDir: string;
  defaultRuntime: RuntimeName;
  /** Binary paths; default: looked up in PATH. */
  conmonPath?: string;
  runtimePaths?: Partial<Record<RuntimeName, string>>;
  /** false: start conmon with spawn() (a fork of berthd) instead of the launcher shell. */
  launcher?: boolean;
  /** dockerd's --cpu-rt-period/--cpu-rt-runtime: the budget given to containers' parent cgroups. */
  cpuRealtime?: CpuRealtime;
}

/** A started conmon: its sync pipe, and when its first process (which writes conmon.pid) is gone. */
interface Launched {
  pipe: Readable;
  firstExited: Promise<void>;
}

export interface CreateOptions {
  id: string;
  /** Holds config.json (written here) and conmon's attach socket and ctl/winsz FIFOs. */
  bundleDir: string;
  spec: OciSpec;
  runtime?: RuntimeName;
  /** conmon writes the container's output here, k8s-file format (see log-file.ts). */
  logPath: string;
  /** Keep no output at all (Docker's log driver `none`); logPath is then unused. */
  noLog?: boolean;
  /** Bytes; conmon starts the file afresh when it grows past this. */
  logSizeMax?: number;
  /** Keep a stdin pipe open for attach clients. */
  stdin: boolean;
  /** Close the container's stdin when the first attach client disconnects (Docker's StdinOnce). */
  stdinOnce?: boolean;
  tty: boolean;
}

export type ContainerStatus = 'created' | 'running' | 'paused' | 'stopped';

export interface ExitStatus extends ExitRecord {
  oomKilled: boolean;
}

export interface ContainerStats extends CgroupStats {
  /** Host CPU time since boot isn't ours to read; callers pair cpuUsageNs with their own clock. */
  readAt: Date;
}

interface ContainerMeta {
  runtime: RuntimeName;
  bundleDir: string;
  cgroupsPath: string;
  logPath: string;
}

const SAFE_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
/** How long cleanup waits for conmon to record the exit after a forced delete. */
const CLEANUP_EXIT_WAIT_MS = 5000;

function checkId(id: string, what = 'container id'): void {
  if (!SAFE_ID.test(id)) throw invalidArgument(`invalid ${what}: ${JSON.stringify(id)}`);
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

export class RuntimeDriver {
  readonly stateDir: string;
  readonly defaultRuntime: RuntimeName;
  readonly #opts: RuntimeDriverOptions;
  #conmonPath = '';
  #runtimes = new Map<RuntimeName, RuntimeBinary>();
  /** Why a runtime cannot be used here (binary missing, crun on an unfixable hybrid layout). */
  #unusable = new Map<RuntimeName, string>();
  #layout: CgroupLayout | undefined;
  #hardLimits: HardLimits = new Map();
  #capabilities: ReadonlySet<string> = new Set();
  #exits: ExitWatcher;
  #meta = new Map<string, ContainerMeta>();
  #seccompCache: SeccompBpfCache | undefined;
  /** The conmon this instance started last for each id (see #onConmonGone). */
  #conmonRuns = new Map<string, object>();
  /** Starts conmon without forking berthd; undefined: spawn() (option `launcher: false`). */
  #launcher: ConmonLauncher | undefined;
  #releaseCgroupMoves: (() => void) | undefined;

  constructor(opts: RuntimeDriverOptions) {
    this.#opts = opts;
    this.stateDir = opts.stateDir;
    this.defaultRuntime = opts.defaultRuntime;
    this.#exits = new ExitWatcher(join(opts.stateDir, 'exits'));
    if (opts.launcher !== false) this.#launcher = new ConmonLauncher();
  }

  get #exitsDir() {
    return join(this.stateDir, 'exits');
  }
  get #socketsDir() {
    return join(this.stateDir, 'sockets');
  }
  #containerDir(id: string) {
    return join(this.stateDir, 'containers', id);
  }

  /** Finds the binaries, fixes the cgroup layout for crun if needed, starts watching exits. */
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
    this.#exits.start();
  }

  /** Stops watching; containers keep running. */
  async close(): Promise<void> {
    this.#exits.close();
    this.#launcher?.close();
    const release = this.#releaseCgroupMoves;
    this.#releaseCgroupMoves = undefined;
    release?.();
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

  #binary(name: RuntimeName): RuntimeBinary {
    const why = this.#unusable.get(name);
    if (why) throw unavailable(why);
    const rt = this.#runtimes.get(name);
    if (!rt) throw invalidArgument(`unknown runtime: ${name}`);
    return rt;
  }

  async #readMeta(id: string): Promise<ContainerMeta | undefined> {
    const cached = this.#meta.get(id);
    if (cached) return cached;
    try {
      const meta = JSON.parse(await readFile(join(this.#containerDir(id), 'meta.json'), 'utf8')) as ContainerMeta;
      this.#meta.set(id, meta);
      return meta;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async #mustMeta(id: string): Promise<ContainerMeta> {
    checkId(id);
    const meta = await this.#readMeta(id);
    if (!meta) throw notFound(`No such container: ${id}`);
    return meta;
  }

  /**
   * Writes config.json and starts conmon, which runs `<runtime> create`. Resolves with the
   * container's pid once the runtime has created it (the process waits for start()).
   */
  async create(c: CreateOptions): Promise<{ pid: number }> {
    checkId(c.id);
    const runtimeName = c.runtime ?? this.defaultRuntime;
    const rt = this.#binary(runtimeName);
    const dir = this.#containerDir(c.id);
    const spec: OciSpec = { ...c.spec, process: { ...c.spec.process, terminal: c.tty } };
    if (spec.process.rlimits) spec.process.rlimits = clampRlimits(spec.process.rlimits, this.#hardLimits);
    spec.process.capabilities = clampCapabilities(spec.process.capabilities, this.#capabilities);
    const meta: ContainerMeta = {
      runtime: runtimeName,
      bundleDir: c.bundleDir,
      cgroupsPath: spec.linux.cgroupsPath ?? `/berth/${c.id}`,
      logPath: c.logPath,
    };
    spec.linux = { ...spec.linux, cgroupsPath: meta.cgroupsPath };
    const seccomp = runtimeName === 'crun' && this.#seccompCache ? this.#seccompCache.apply(spec) : { spec };

    // A late EOF of an earlier run's conmon must not settle this run's waiters (its exit file is
    // removed just below).
    this.#conmonRuns.delete(c.id);
    await mkdir(dir, { recursive: true });
    await Promise.all([
      writeBundleConfig(c.bundleDir, seccomp.spec),
      ...(this.#opts.cpuRealtime ? [initCpuRtParents(this.cgroupLayout, meta.cgroupsPath, this.#opts.cpuRealtime)] : []),
      writeJsonAtomic(join(dir, 'meta.json'), meta),
      // Leftovers of an earlier run of the same container (restart) would confuse conmon and waiters.
      removeFile(this.#exits.pathOf(c.id)),
      removeFile(join(this.#socketsDir, c.id)),
      ...['oom', 'pid', 'conmon.pid', 'sync'].map((f) => removeFile(join(dir, f))),
      ...['attach', 'ctl', 'winsz'].map((f) => removeFile(join(c.bundleDir, f))),
    ]);
    this.#meta.set(c.id, meta);

    const args = [
      '--api-version', '1',
      '-c', c.id, '-u', c.id, '-n', c.id,
      '-r', rt.path, '--runtime-arg', '--root', '--runtime-arg', rt.root,
      '-b', c.bundleDir,
      '-p', join(dir, 'pid'), '-P', join(dir, 'conmon.pid'),
      '-l', c.noLog ? 'none:' : `k8s-file:${c.logPath}`,
      '--exit-dir', this.#exitsDir,
      '--socket-dir-path', this.#socketsDir,
      '-0', dir, // persist dir: conmon writes `oom` here
    ];
    if (c.logSizeMax && c.logSizeMax > 0) args.push('--log-size-max', String(c.logSizeMax));
    if (c.stdin) args.push('-i');
    if (c.stdin && !c.stdinOnce) args.push('--leave-stdin-open');
    if (c.tty) args.push('-t');

    const syncFifo = join(dir, 'sync');
    const launched = (await this.#launchByShell(c.id, args, dir, syncFifo)) ?? this.#launchBySpawn(c.id, args, dir);
    let first;
    try {
      const sync = new SyncPipeReader(launched.pipe);
      // Both: the pid, and conmon's first process gone, so conmon.pid names the daemon (its first
      // process writes that file, unordered with the daemon's report; waitExit reads it).
      [first] = await Promise.all([sync.next(), launched.firstExited]);
      // conmon holds its end until it exits: EOF tells us conmon is gone even if it died without
      // writing an exit file (killed). Unref'd, so it never keeps berthd alive.
      if (first && first.data > 0) {
        const pipe = launched.pipe;
        (pipe as Socket).unref();
        const run = {};
        this.#conmonRuns.set(c.id, run);
        pipe.once('close', () => void this.#onConmonGone(c.id, run));
        pipe.resume();
      } else {
        launched.pipe.destroy();
      }
    } finally {
      await removeFile(syncFifo).catch(() => undefined);
    }
    if (!first || first.data <= 0) {
      const conmonLog = await readFile(join(dir, 'conmon.log'), 'utf8').catch(() => '');
      const message = cleanMessage(first?.message || conmonLog || 'conmon exited without reporting a pid');
      await this.cleanup(c.id).catch((err) => log.warn('cleanup after failed create', { id: c.id, err }));
      throw createError(message);
    }
    if (seccomp.missKey && this.#seccompCache) {
      await this.#seccompCache.remember(seccomp.missKey, rt.root, c.id).catch((err) => log.warn('seccomp filter not cached', { id: c.id, err }));
    }
    return { pid: first.data };
  }

  /**
   * conmon through the long-lived launcher shell (conmon-launcher.ts): no fork of berthd.
   * Undefined when that is not possible here (no libc for mkfifo, no shell): spawn() then.
   */
  async #launchByShell(id: string, args: string[], dir: string, syncFifo: string): Promise<Launched | undefined> {
    if (!this.#launcher || !makeFifo(syncFifo)) return undefined;
    // Non-blocking: opening a FIFO's read end does not wait for a writer then (libuv adds O_CLOEXEC).
    const fd = openSync(syncFifo, constants.O_RDONLY | constants.O_NONBLOCK);
    let status: number;
    try {
      status = await this.#launcher.launch({ conmonPath: this.#conmonPath, args, cwd: dir, stderrPath: join(dir, 'conmon.log'), syncFifo });
    } catch (err) {
      closeSync(fd);
      if (!(err instanceof LauncherError)) throw err;
      if (err.notStarted) {
        log.warn('conmon launcher unavailable, using spawn()', { err });
        this.#launcher = undefined;
        return undefined;
      }
      // The job's fate is unknown (a conmon may be running): fail this create, not guess.
      log.warn('conmon launcher failed', { id, err });
      throw internal(`OCI runtime create failed: ${err.message}`);
    }
    if (status !== 0) {
      // No conmon holds the FIFO (or none ever did, and epoll would never report the end).
      closeSync(fd);
      const empty = new PassThrough();
      empty.end();
      return { pipe: empty, firstExited: Promise.resolve() };
    }
    return { pipe: new Socket({ fd, readable: true, writable: false }), firstExited: Promise.resolve() };
  }

  /** conmon by spawn(): a fork of berthd. Its stderr goes to a file: a pipe would tie the daemonized conmon to berthd. */
  #launchBySpawn(id: string, args: string[], dir: string): Launched {
    const errFd = openSync(join(dir, 'conmon.log'), 'a');
    try {
      const child = spawn(this.#conmonPath, args, {
        stdio: ['ignore', 'ignore', errFd, 'pipe'],
        env: conmonEnv({ _OCI_SYNCPIPE: '3' }),
        detached: true,
        cwd: dir, // conmon also drops an `oom` file in its working directory
      });
      child.unref();
      const firstExited = new Promise<void>((resolve) => {
        // A spawn failure (ENOENT...) also closes the pipe: reported as "no pid".
        child.once('error', (err) => {
          log.error('conmon spawn failed', { id, err });
          resolve();
        });
        child.once('exit', () => resolve());
      });
      return { pipe: child.stdio[3] as Readable, firstExited };
    } finally {
      closeSync(errFd);
    }
  }

  async start(id: string): Promise<void> {
    const meta = await this.#mustMeta(id);
    const rt = this.#binary(meta.runtime);
    // crun's start only writes a byte to the exec FIFO the created process waits on (our specs
    // have no poststart hooks): doing that here saves a process spawn on every start. Anything
    // unexpected (no FIFO, no process reading it) falls back to `crun start` and its own errors.
    if (rt.name === 'crun' && releaseExecFifo(join(rt.root, id, 'exec.fifo'))) return;
    await runRuntime(rt, ['start', id]);
  }

  /** Sends a signal (number, or name with or without SIG) to the container's main process. */
  async kill(id: string, signal: number | string): Promise<void> {
    const meta = await this.#mustMeta(id);
    const sig = typeof signal === 'number' ? String(signal) : signal.toUpperCase().replace(/^SIG/, '');
    await runRuntime(this.#binary(meta.runtime), ['kill', id, sig]);
  }

  /** Freezes the container; resolves once the runtime reports it paused. */
  async pause(id: string): Promise<void> {
    const meta = await this.#mustMeta(id);
    const rt = this.#binary(meta.runtime);
    await runRuntime(rt, ['pause', id]);
    // The v1 freezer goes FREEZING → FROZEN on its own time and the runtime may return in between
    // (seen with crun on a loaded host). Callers expect "paused" right after pause, so wait for it,
    // briefly and with backoff: there is no change notification for v1 freezer.state. The cgroup's
    // own file says it without a `<runtime> state` process per look.
    const frozen = freezerReader(this.cgroupLayout, meta.cgroupsPath);
    for (let delay = 1; delay <= 256; delay *= 2) {
      if (frozen) {
        if ((await frozen()) !== false) return;
      } else {
        const s = await runtimeState(rt, id);
        if (!s || s.status !== 'running') return;
      }
      await new Promise((r) => setTimeout(r, delay));
    }
    log.warn('container still freezing after pause', { id });
  }

  async resume(id: string): Promise<void> {
    const meta = await this.#mustMeta(id);
    await runRuntime(this.#binary(meta.runtime), ['resume', id]);
  }

  /** `<runtime> update --resources`: new cgroup limits for a running (or paused) container, at once. */
  async update(id: string, resources: OciResources): Promise<void> {
    const meta = await this.#mustMeta(id);
    const file = join(this.stateDir, `update-${id}.json`);
    await writeFile(file, JSON.stringify(resources));
    try {
      await runRuntime(this.#binary(meta.runtime), ['update', '--resources', file, id]);
    } finally {
      await unlink(file).catch(() => undefined);
    }
  }

  /** `<runtime> delete`; with force a running container is killed first. */
  async delete(id: string, force = false): Promise<void> {
    const meta = await this.#mustMeta(id);
    await runRuntime(this.#binary(meta.runtime), ['delete', ...(force ? ['--force'] : []), id]);
  }

  /** Ids of every container this state dir holds (created and not cleaned up), e.g. after a restart. */
  async list(): Promise<string[]> {
    const entries = await readdir(join(this.stateDir, 'containers'), { withFileTypes: true });
    return entries.filter((e) => e.isDirectory() && SAFE_ID.test(e.name)).map((e) => e.name);
  }

  /** The runtime's view; undefined when the runtime does not know the container. */
  async state(id: string): Promise<{ status: ContainerStatus; pid: number } | undefined> {
    checkId(id);
    const meta = await this.#readMeta(id);
    if (!meta) return undefined;
    const s = await runtimeState(this.#binary(meta.runtime), id);
    if (!s) return undefined;
    return { status: s.status === 'creating' ? 'created' : s.status, pid: s.status === 'stopped' ? 0 : s.pid };
  }

  /** The recorded exit, if the main process has exited. */
  async exitStatus(id: string): Promise<ExitStatus | undefined> {
    checkId(id);
    const rec = await this.#exits.read(id);
    return rec ? { ...rec, oomKilled: await this.#oomKilled(id) } : undefined;
  }

  /**
   * Resolves when the container's main process has exited, with conmon's exit record. Works for
   * containers created by an earlier driver instance. If conmon is gone without writing an exit
   * file (killed), resolves at once with exit code 255.
   */
  async waitExit(id: string): Promise<ExitStatus> {
    await this.#mustMeta(id);
    const waiting = this.#exits.wait(id);
    // A conmon this instance started is followed by its sync pipe's EOF (#onConmonGone); only an
    // adopted one (daemon restart) needs the pid file and /proc.
    if (!this.#conmonRuns.has(id)) void this.#conmonAlive(id).then(async (alive) => {
      if (alive) return;
      const rec = await this.#exits.read(id);
      this.#exits.settle(id, rec ?? { exitCode: 255, exitedAt: new Date() });
      if (!rec) log.warn('conmon gone without an exit file', { id });
    });
    const rec = await waiting;
    return { ...rec, oomKilled: await this.#oomKilled(id) };
  }

  /** conmon exited: normally the exit file is there; if not, waiters must not hang forever. */
  async #onConmonGone(id: string, run: object): Promise<void> {
    // Cleaned up meanwhile, or already re-created (restart): this conmon's end means nothing now.
    if (this.#conmonRuns.get(id) !== run) return;
    const rec = await this.#exits.read(id).catch(() => undefined);
    // Checked again after the read: a cleanup meanwhile may have removed the exit file.
    if (this.#conmonRuns.get(id) !== run) return;
    this.#conmonRuns.delete(id);
    if (rec) return; // the watcher delivers it
    log.warn('conmon exited without an exit file', { id });
    this.#exits.settle(id, { exitCode: 255, exitedAt: new Date() });
  }

  async #conmonAlive(id: string): Promise<boolean> {
    const pid = await readPidFile(join(this.#containerDir(id), 'conmon.pid'));
    return pid !== undefined && (await isProcessAlive(pid, 'conmon'));
  }

  async #oomKilled(id: string): Promise<boolean> {
    try {
      await access(join(this.#containerDir(id), 'oom'));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * conmon's attach socket (SOCK_SEQPACKET) for the container's stdio; exists while the container
   * runs. Framing: README.md "Attach socket".
   */
  attachSocketPath(id: string): string {
    checkId(id);
    return join(this.#socketsDir, id, 'attach');
  }

  /** Resizes the container's tty (conmon's ctl FIFO in the bundle: "1 <height> <width>\n"). */
  async resize(id: string, height: number, width: number): Promise<void> {
    const meta = await this.#mustMeta(id);
    await writeControl(join(meta.bundleDir, 'ctl'), `1 ${height} ${width}\n`);
  }

  /** Resizes a tty exec's terminal (the ctl FIFO in the exec's directory). */
  async resizeExec(id: string, execId: string, height: number, width: number): Promise<void> {
    checkId(id);
    checkId(execId, 'exec id');
    await writeControl(join(this.stateDir, 'execs', id, execId, 'ctl'), `1 ${height} ${width}\n`);
  }

  /** Ids of the containers this driver holds state for (its containers directory). */
  async containerIds(): Promise<string[]> {
    return readdir(join(this.stateDir, 'containers')).catch(() => [] as string[]);
  }

  /**
   * Ends an exec left by a daemon that died while it ran (nobody reads its output any more): its
   * process is killed when it still runs in the container's pid namespace (a reused pid elsewhere is
   * left alone), and its directory goes.
   */
  async abandonExec(id: string, execId: string, containerPid: number): Promise<void> {
    checkId(id);
    checkId(execId, 'exec id');
    const dir = join(this.stateDir, 'execs', id, execId);
    const pid = await readPidFile(join(dir, 'pid')).catch(() => undefined);
    if (pid && containerPid > 0 && (await isProcessAlive(pid))) {
      const ns = (p: number) => readlink(`/proc/${p}/ns/pid`).catch(() => '');
      const [mine, theirs] = await Promise.all([ns(pid), ns(containerPid)]);
      if (mine && mine === theirs) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    await rm(dir, { recursive: true, force: true });
    await rm(join(this.#socketsDir, execId), { force: true });
  }

  /** Makes conmon reopen the log file (after the engine moved or truncated it): "2 0 0\n" on ctl. */
  async reopenLog(id: string): Promise<void> {
    const meta = await this.#mustMeta(id);
    await writeControl(join(meta.bundleDir, 'ctl'), '2 0 0\n');
  }

  /** Runs a process in a running container; see exec-session.ts. */
  async exec(id: string, opts: ExecOptions): Promise<ExecSession> {
    const meta = await this.#mustMeta(id);
    checkId(opts.execId, 'exec id');
    return startExec(
      {
        conmonPath: this.#conmonPath,
        runtime: this.#binary(meta.runtime),
        containerId: id,
        bundleDir: meta.bundleDir,
        execDir: join(this.stateDir, 'execs', id, opts.execId),
        socketsDir: this.#socketsDir,
        hardLimits: this.#hardLimits,
        capabilities: this.#capabilities,
      },
      opts,
    );
  }

  /** Usage from the container's cgroup; undefined when it has none (not created or cleaned up). */
  async stats(id: string): Promise<ContainerStats | undefined> {
    const meta = await this.#mustMeta(id);
    const s = await readCgroupStats(this.cgroupLayout, meta.cgroupsPath);
    return s ? { ...s, readAt: new Date() } : undefined;
  }

  /** The cgroup path (relative to each hierarchy's root) the container runs in. */
  async cgroupsPath(id: string): Promise<string> {
    return (await this.#mustMeta(id)).cgroupsPath;
  }

  /**
   * Removes every trace of the container: runtime state (killing it if still running), its
   * cgroup, conmon's files and Berth's state files. Idempotent; the log file and the bundle's
   * config.json stay (the engine owns them).
   */
  async cleanup(id: string): Promise<void> {
    checkId(id);
    const meta = await this.#readMeta(id);
    const runtimes = meta ? [meta.runtime] : [...this.#runtimes.keys()];
    // The usual case after an exit: skip `crun delete`'s spawn when nothing is left for it to do.
    const deletedHere = !!meta && (await this.#deleteExitedCrun(id, meta));
    if (deletedHere) runtimes.length = 0;
    for (const name of runtimes) {
      const rt = this.#runtimes.get(name);
      if (!rt) continue;
      // No state directory: the runtime does not know the container, so skip the delete's spawn.
      if (!(await exists(join(rt.root, id)))) continue;
      try {
        await runRuntime(rt, ['delete', '--force', id]);
      } catch (err) {
        if (!(err instanceof BerthError && err.kind === 'not-found')) throw err;
      }
    }
    // conmon writes the exit file after the process dies: let it finish so nothing reappears.
    // An exit file already there (the usual case after an exit) means there is nothing to wait for.
    if (meta && !deletedHere && !(await this.#exits.read(id).catch(() => undefined)) && (await this.#conmonAlive(id))) {
      const waited = await Promise.race([
        this.#exits.wait(id).then(() => true),
        new Promise<boolean>((r) => setTimeout(r, CLEANUP_EXIT_WAIT_MS, false).unref()),
      ]);
      if (!waited) log.warn('conmon did not record an exit after delete --force', { id });
    }
    if (meta) {
      const busy = deletedHere ? [] : await removeCgroup(this.cgroupLayout, meta.cgroupsPath);
      if (busy.length > 0) log.warn('cgroup still busy after cleanup', { id, busy });
      await Promise.all(['attach', 'ctl', 'winsz'].map((f) => removeFile(join(meta.bundleDir, f))));
    }
    // Before the exit file goes: conmon's EOF arriving after that would read "no exit file" and
    // settle 255 (#onConmonGone).
    this.#conmonRuns.delete(id);
    await Promise.all([
      removeFile(this.#exits.pathOf(id)),
      removeFile(join(this.#socketsDir, id)),
      rm(join(this.stateDir, 'execs', id), { recursive: true, force: true }),
      removeFlatDir(this.#containerDir(id)),
    ]);
    this.#meta.delete(id);
  }

  /**
   * `crun delete` of a container whose process has exited removes its cgroup and its state
   * directory, nothing more (no hooks in our specs). With conmon's exit file present the process
   * is gone, so do both here; true when done. A busy cgroup (processes left behind, e.g. with the
   * host's pid namespace) returns false: `crun delete --force` then kills them as before.
   */
  async #deleteExitedCrun(id: string, meta: ContainerMeta): Promise<boolean> {
    const rt = this.#runtimes.get(meta.runtime);
    if (!rt || rt.name !== 'crun') return false;
    if (!(await this.#exits.read(id).catch(() => undefined))) return false;
    const busy = await removeCgroup(this.cgroupLayout, meta.cgroupsPath);
    if (busy.length > 0) return false;
    await removeFlatDir(join(rt.root, id));
    return true;
  }
}

/**
 * Reads whether a cgroup is frozen: v1 freezer.state FROZEN, v2 cgroup.events "frozen 1".
 * Undefined when no freezer directory is known here; the reader gives undefined when the file
 * cannot be read (cgroup gone: the container is not running, nothing to wait for).
 */
function freezerReader(layout: CgroupLayout, cgroupsPath: string): (() => Promise<boolean | undefined>) | undefined {
  const dir = controllerDir(layout, 'freezer', cgroupsPath);
  if (!dir) return undefined;
  const v2 = layout.kind === 'v2';
  return async () => {
    try {
      const text = await readFile(join(dir, v2 ? 'cgroup.events' : 'freezer.state'), 'utf8');
      return v2 ? /^frozen 1$/m.test(text) : text.trim() === 'FROZEN';
    } catch {
      return undefined;
    }
  };
}

/**
 * One message to a conmon FIFO. Non-blocking open: with no conmon reading (container gone) it
 * fails at once with ENXIO instead of hanging.
 */
async function writeControl(fifo: string, message: string): Promise<void> {
  let fh;
  try {
    fh = await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENXIO' || code === 'ENOENT') throw conflict('container is not running');
    throw err;
  }
  try {
    await fh.write(message);
  } finally {
    await fh.close();
  }
}

/**
 * crun's start: the created container's init blocks reading `<state>/exec.fifo`; opening it for
 * writing, unlinking it (the runtime's sign that the container was started) and writing one byte
 * lets it exec the process. Non-blocking throughout, so synchronous calls cost microseconds: with
 * no reader (the process died) the open fails with ENXIO instead of waiting. False: not done.
 */
function releaseExecFifo(fifo: string): boolean {
  let fd: number;
  try {
    fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch {
    return false;
  }
  try {
    unlinkSync(fifo);
    writeSync(fd, Buffer.alloc(1));
    return true;
  } catch (err) {
    log.debug('exec fifo release failed, using the runtime', { fifo, err });
    return false;
  } finally {
    closeSync(fd);
  }
}

/** rm -f of a file or symlink: one unlink, where fs.rm adds an lstat. */
async function removeFile(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/**
 * rm -rf of a directory of plain files (the runtime's state dirs): a readdir, an unlink per file
 * side by side and an rmdir, about half of fs.rm's calls. Subdirectories: fs.rm does it.
 */
async function removeFlatDir(path: string): Promise<void> {
  let entries;
  try {
    entries = await readdir(path, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (entries.some((e) => e.isDirectory())) return rm(path, { recursive: true, force: true });
  await Promise.all(entries.map((e) => removeFile(join(path, e.name))));
  try {
    await rmdir(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    // Something appeared meanwhile (conmon writing late): remove it all.
    if (code === 'ENOTEMPTY') return rm(path, { recursive: true, force: true });
    throw err;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.tmp`;
  await writeFile(tmp, JSON.stringify(value));
  await rename(tmp, path);
}

/** A create failure: bad command or user input is the caller's fault (400), anything else internal. */
function createError(message: string): BerthError {
  // The docker CLI picks its exit code (127, 126) by matching dockerd's wording, so use it.
  const missing = /executable file `([^`]*)` not found/.exec(message);
  const text = missing
    ? `OCI runtime create failed: exec: "${missing[1]}": ${missing[1]!.includes('/') ? `stat ${missing[1]}: no such file or directory` : 'executable file not found in $PATH'}: unknown`
    : `OCI runtime create failed: ${message}`;
  if (/executable file .*not found|no such file or directory|permission denied|not a directory/i.test(message)) {
    return invalidArgument(text);
  }
  return internal(text);
}
