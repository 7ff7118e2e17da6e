/**
 * A container's life under conmon: create (config.json, conmon, `<runtime> create`), start,
 * signals, pause, resources, its exit, and cleanup of everything the runtime and conmon left. See
 * README.md in this folder for conmon's files, log format and attach socket framing.
 *
 * Every container is supervised by its own conmon, started detached: containers, their logs and
 * their exit codes outlive berthd. All state lives in files under the state dir (runtime-host.ts),
 * so a driver started later (after a daemon restart) picks containers up by id without any
 * registration step.
 */
import { initCpuRtParents } from './cpu-rt.js';
import { closeSync, constants, openSync, unlinkSync, writeSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { BerthError, internal, invalidArgument } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { writeBundleConfig } from './bundle.js';
import { controllerDir, removeCgroup, type CgroupLayout } from './cgroups.js';
import type { ConmonLauncher } from './conmon-launcher.js';
import { reopenLog, resizeTty } from './conmon-control.js';
import { SyncPipeReader } from './conmon-sync.js';
import { checkId, SAFE_ID, type ContainerMeta } from './container-meta.js';
import type { ContainerExits, ExitStatus } from './container-exits.js';
import type { OciResources, OciSpec } from './oci-spec.js';
import { clampRlimits } from './rlimits.js';
import { clampCapabilities } from './capabilities.js';
import { cleanMessage, runRuntime, runtimeState, type RuntimeName, type RuntimeShell } from './runtime-cli.js';
import type { RuntimeHost } from './runtime-host.js';
import { exists, presentSync, removeFile, removeFilesPresent, removeFlatDir } from './state-files.js';

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

export class ContainerLifecycle {
  constructor(
    private readonly host: RuntimeHost,
    private readonly exits: ContainerExits,
    private readonly launcher: ConmonLauncher,
    /** Signals go through it (no fork of berthd per `kill`). */
    private readonly shell: RuntimeShell,
  ) {}

  /**
   * Writes config.json and starts conmon, which runs `<runtime> create`. Resolves with the
   * container's pid once the runtime has created it (the process waits for start()).
   */
  async create(c: CreateOptions): Promise<{ pid: number }> {
    checkId(c.id);
    const host = this.host;
    const runtimeName = c.runtime ?? host.defaultRuntime;
    const rt = host.binary(runtimeName);
    const dir = host.containerDir(c.id);
    const spec: OciSpec = { ...c.spec, process: { ...c.spec.process, terminal: c.tty } };
    if (spec.process.rlimits) spec.process.rlimits = clampRlimits(spec.process.rlimits, host.hardLimits);
    spec.process.capabilities = clampCapabilities(spec.process.capabilities, host.capabilities);
    const meta: ContainerMeta = {
      runtime: runtimeName,
      bundleDir: c.bundleDir,
      cgroupsPath: spec.linux.cgroupsPath ?? `/berth/${c.id}`,
      logPath: c.logPath,
    };
    spec.linux = { ...spec.linux, cgroupsPath: meta.cgroupsPath };
    const seccompCache = host.seccompCache;
    const seccomp = runtimeName === 'crun' && seccompCache ? seccompCache.apply(spec) : { spec };

    // A late EOF of an earlier run's conmon must not settle this run's waiters (its exit file is
    // removed just below).
    this.exits.forget(c.id);
    await mkdir(dir, { recursive: true });
    await Promise.all([
      writeBundleConfig(c.bundleDir, seccomp.spec),
      ...(host.cpuRealtime ? [initCpuRtParents(host.cgroupLayout, meta.cgroupsPath, host.cpuRealtime)] : []),
      host.metas.write(c.id, meta),
      // Leftovers of an earlier run of the same container (restart) would confuse conmon and waiters.
      removeFilesPresent([
        this.exits.pathOf(c.id),
        join(host.socketsDir, c.id),
        ...['oom', 'pid', 'conmon.pid', 'sync'].map((f) => join(dir, f)),
        ...['attach', 'ctl', 'winsz'].map((f) => join(c.bundleDir, f)),
      ]),
    ]);
    host.metas.remember(c.id, meta);

    const args = [
      '--api-version', '1',
      '-c', c.id, '-u', c.id, '-n', c.id,
      '-r', rt.path, '--runtime-arg', '--root', '--runtime-arg', rt.root,
      '-b', c.bundleDir,
      '-p', join(dir, 'pid'), '-P', join(dir, 'conmon.pid'),
      '-l', c.noLog ? 'none:' : `k8s-file:${c.logPath}`,
      '--exit-dir', host.exitsDir,
      '--socket-dir-path', host.socketsDir,
      '-0', dir, // persist dir: conmon writes `oom` here
    ];
    if (c.logSizeMax && c.logSizeMax > 0) args.push('--log-size-max', String(c.logSizeMax));
    if (c.stdin) args.push('-i');
    if (c.stdin && !c.stdinOnce) args.push('--leave-stdin-open');
    if (c.tty) args.push('-t');

    const syncFifo = join(dir, 'sync');
    let first;
    try {
      const launched = await this.launcher.launch(c.id, host.conmonPath, args, dir, syncFifo);
      const sync = new SyncPipeReader(launched.pipe);
      // Both: the pid, and conmon's first process gone, so conmon.pid names the daemon (its first
      // process writes that file, unordered with the daemon's report; waitExit reads it).
      [first] = await Promise.all([sync.next(), launched.firstExited]);
      // conmon holds its end until it exits: EOF tells us conmon is gone even if it died without
      // writing an exit file (killed). Unref'd, so it never keeps berthd alive.
      if (first && first.data > 0) {
        const pipe = launched.pipe;
        (pipe as Socket).unref();
        this.exits.follow(c.id, pipe);
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
    if (seccomp.missKey && seccompCache) {
      await seccompCache.remember(seccomp.missKey, rt.root, c.id).catch((err) => log.warn('seccomp filter not cached', { id: c.id, err }));
    }
    return { pid: first.data };
  }

  async start(id: string): Promise<void> {
    const meta = await this.host.metas.must(id);
    const rt = this.host.binary(meta.runtime);
    // crun's start only writes a byte to the exec FIFO the created process waits on (our specs
    // have no poststart hooks): doing that here saves a process spawn on every start. Anything
    // unexpected (no FIFO, no process reading it) falls back to `crun start` and its own errors.
    if (rt.name === 'crun' && releaseExecFifo(join(rt.root, id, 'exec.fifo'))) return;
    await runRuntime(rt, ['start', id]);
  }

  /** Sends a signal (number, or name with or without SIG) to the container's main process. */
  async kill(id: string, signal: number | string): Promise<void> {
    const meta = await this.host.metas.must(id);
    const sig = typeof signal === 'number' ? String(signal) : signal.toUpperCase().replace(/^SIG/, '');
    await this.shell.run(this.host.binary(meta.runtime), ['kill', id, sig]);
  }

  /** Freezes the container; resolves once the runtime reports it paused. */
  async pause(id: string): Promise<void> {
    const meta = await this.host.metas.must(id);
    const rt = this.host.binary(meta.runtime);
    await runRuntime(rt, ['pause', id]);
    // The v1 freezer goes FREEZING → FROZEN on its own time and the runtime may return in between
    // (seen with crun on a loaded host). Callers expect "paused" right after pause, so wait for it,
    // briefly and with backoff: there is no change notification for v1 freezer.state. The cgroup's
    // own file says it without a `<runtime> state` process per look.
    const frozen = freezerReader(this.host.cgroupLayout, meta.cgroupsPath);
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
    const meta = await this.host.metas.must(id);
    await runRuntime(this.host.binary(meta.runtime), ['resume', id]);
  }

  /** `<runtime> update --resources`: new cgroup limits for a running (or paused) container, at once. */
  async update(id: string, resources: OciResources): Promise<void> {
    const meta = await this.host.metas.must(id);
    const file = join(this.host.stateDir, `update-${id}.json`);
    await writeFile(file, JSON.stringify(resources));
    try {
      await runRuntime(this.host.binary(meta.runtime), ['update', '--resources', file, id]);
    } finally {
      await unlink(file).catch(() => undefined);
    }
  }

  /** `<runtime> delete`; with force a running container is killed first. */
  async delete(id: string, force = false): Promise<void> {
    const meta = await this.host.metas.must(id);
    await runRuntime(this.host.binary(meta.runtime), ['delete', ...(force ? ['--force'] : []), id]);
  }

  /** Ids of every container this state dir holds (created and not cleaned up), e.g. after a restart. */
  async list(): Promise<string[]> {
    const entries = await readdir(join(this.host.stateDir, 'containers'), { withFileTypes: true });
    return entries.filter((e) => e.isDirectory() && SAFE_ID.test(e.name)).map((e) => e.name);
  }

  /** Ids of the containers this driver holds state for (its containers directory). */
  async containerIds(): Promise<string[]> {
    return readdir(join(this.host.stateDir, 'containers')).catch(() => [] as string[]);
  }

  /** The runtime's view; undefined when the runtime does not know the container. */
  async state(id: string): Promise<{ status: ContainerStatus; pid: number } | undefined> {
    checkId(id);
    const meta = await this.host.metas.read(id);
    if (!meta) return undefined;
    const s = await runtimeState(this.host.binary(meta.runtime), id);
    if (!s) return undefined;
    return { status: s.status === 'creating' ? 'created' : s.status, pid: s.status === 'stopped' ? 0 : s.pid };
  }

  /** The recorded exit, if the main process has exited. */
  async exitStatus(id: string): Promise<ExitStatus | undefined> {
    checkId(id);
    return this.exits.status(id);
  }

  /** Resolves when the container's main process has exited; see ContainerExits.wait. */
  async waitExit(id: string): Promise<ExitStatus> {
    await this.host.metas.must(id);
    return this.exits.wait(id);
  }

  /**
   * conmon's attach socket (SOCK_SEQPACKET) for the container's stdio; exists while the container
   * runs. Framing: README.md "Attach socket".
   */
  attachSocketPath(id: string): string {
    checkId(id);
    return join(this.host.socketsDir, id, 'attach');
  }

  /** Resizes the container's tty (conmon's ctl FIFO in the bundle). */
  async resize(id: string, height: number, width: number): Promise<void> {
    const meta = await this.host.metas.must(id);
    await resizeTty(meta.bundleDir, height, width);
  }

  /** Makes conmon reopen the log file (after the engine moved or truncated it). */
  async reopenLog(id: string): Promise<void> {
    const meta = await this.host.metas.must(id);
    await reopenLog(meta.bundleDir);
  }

  /**
   * Removes every trace of the container: runtime state (killing it if still running), its
   * cgroup, conmon's files and Berth's state files. Idempotent; the log file and the bundle's
   * config.json stay (the engine owns them).
   */
  async cleanup(id: string): Promise<void> {
    checkId(id);
    const host = this.host;
    if (this.#nothingLeft(id)) {
      // The usual case at a first start, which cleans up first in case an earlier one was cut short.
      this.exits.forget(id);
      host.metas.forget(id);
      return;
    }
    const meta = await host.metas.read(id);
    const runtimes = meta ? [meta.runtime] : host.foundNames();
    // The usual case after an exit: skip `crun delete`'s spawn when nothing is left for it to do.
    const deletedHere = !!meta && (await this.#deleteExitedCrun(id, meta));
    if (deletedHere) runtimes.length = 0;
    for (const name of runtimes) {
      const rt = host.found(name);
      if (!rt) continue;
      // No state directory: the runtime does not know the container, so skip the delete's spawn.
      if (!(await exists(join(rt.root, id)))) continue;
      try {
        await runRuntime(rt, ['delete', '--force', id]);
      } catch (err) {
        if (!(err instanceof BerthError && err.kind === 'not-found')) throw err;
      }
    }
    if (meta && !deletedHere) await this.exits.settleAfterDelete(id);
    if (meta) {
      const busy = deletedHere ? [] : await removeCgroup(host.cgroupLayout, meta.cgroupsPath);
      if (busy.length > 0) log.warn('cgroup still busy after cleanup', { id, busy });
      await Promise.all(['attach', 'ctl', 'winsz'].map((f) => removeFile(join(meta.bundleDir, f))));
    }
    // Before the exit file goes: conmon's EOF arriving after that would read "no exit file" and
    // settle 255.
    this.exits.forget(id);
    await Promise.all([
      removeFile(this.exits.pathOf(id)),
      removeFile(join(host.socketsDir, id)),
      rm(host.execDir(id), { recursive: true, force: true }),
      removeFlatDir(host.containerDir(id)),
    ]);
    host.metas.forget(id);
  }

  /** No file or directory of the container anywhere in the state dir (a few lstats, no thread-pool round trips). */
  #nothingLeft(id: string): boolean {
    const host = this.host;
    if (host.metas.cached(id)) return false;
    const paths = [host.containerDir(id), this.exits.pathOf(id), join(host.socketsDir, id), host.execDir(id)];
    for (const name of host.foundNames()) paths.push(join(host.found(name)!.root, id));
    return !paths.some(presentSync);
  }

  /**
   * `crun delete` of a container whose process has exited removes its cgroup and its state
   * directory, nothing more (no hooks in our specs). With conmon's exit file present the process
   * is gone, so do both here; true when done. A busy cgroup (processes left behind, e.g. with the
   * host's pid namespace) returns false: `crun delete --force` then kills them as before.
   */
  async #deleteExitedCrun(id: string, meta: ContainerMeta): Promise<boolean> {
    const rt = this.host.found(meta.runtime);
    if (!rt || rt.name !== 'crun') return false;
    if (!(await this.exits.read(id).catch(() => undefined))) return false;
    const busy = await removeCgroup(this.host.cgroupLayout, meta.cgroupsPath);
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
