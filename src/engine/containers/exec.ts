/**
 * Exec instances: a process started in a running container (POST /containers/{id}/exec, then
 * /exec/{id}/start). Records live in memory only, as in dockerd; finished ones are dropped a
 * while after they exit, or with their container.
 *
 * Without a tty the process's stdio are pipes through conmon (real back-pressure both ways); with
 * a tty conmon owns the pty and the client is bridged to its attach socket, connected before the
 * process starts. The hijacked stream ends once the process has exited and its output is out, and
 * only after the exit code is recorded: the docker CLI reads it from /exec/{id}/json right then.
 */
import { randomHex } from '../../lib/random-hex.js';
import { waitAtMost } from '../../lib/deadline.js';
import { conflict, invalidArgument, notFound } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { ContainerRecord } from './container-model.js';
import type { ContainerService } from './container-service.js';
import type { RuntimeProcesses } from './container-processes.js';
import type { EventBus } from '../events.js';
import { rootfsPaths } from './rootfs-mount.js';
import { resolveUser } from './container-user.js';
import { ConmonAttach } from './conmon-attach.js';
import { bridgeConmon, bridgePipes, type AttachClient, type AttachEnd } from './attach-bridge.js';
import { DEFAULT_DETACH_KEYS, parseDetachKeys } from './detach-keys.js';
import { checkSize } from './attach.js';
import type { ExecSession } from '../../runtime/exec-session.js';
import type { ExecConfig } from '../../lib/docker-api-types.js';

export type { ExecConfig };

export interface ExecRecord {
  id: string;
  containerId: string;
  config: ExecConfig;
  running: boolean;
  /** Set once the process has exited (or could not start). */
  exitCode: number | null;
  pid: number;
  started: boolean;
  finishedAt?: number;
}

export interface ExecStartOptions {
  /** [height, width] from the start request; wins over the one given at create. */
  consoleSize?: [number, number];
}

export interface PreparedExec {
  record: ExecRecord;
  /** Streams the process to the client; resolves when the stream should close. */
  run(client: AttachClient): Promise<AttachEnd>;
}

interface LaunchOptions {
  consoleSize?: [number, number];
  stdin: boolean;
  /** No pipes for the output at all (a detached exec without a tty). */
  discardOutput?: boolean;
  /** tty: connect to conmon's attach socket before the process starts. */
  onAttachReady?: (path: string) => Promise<void>;
}

/** How long a finished exec stays inspectable. */
const KEEP_FINISHED_MS = 10 * 60 * 1000;
/** After the exit, how long output pipes held open by leftover children may keep the stream open (dockerd's wait). */
const OUTPUT_GRACE_MS = 2000;
/** How long a resize waits for the process to start (the CLI resizes right after the hijack). */
const RESIZE_WAIT_MS = 10_000;

export class ExecService {
  readonly #execs = new Map<string, ExecRecord>();
  /** Resolve when the exec has a pid (or failed to start); for resize. */
  readonly #startedSignals = new Map<string, Promise<ExecSession | undefined>>();
  /** Forgets the intent recorded for an exec whose process runs (see ContainerIntents). */
  readonly #intents = new Map<string, () => void>();

  constructor(
    private readonly containers: ContainerService,
    private readonly processes: RuntimeProcesses,
    private readonly events: EventBus,
  ) {}

  create(idOrName: string, config: ExecConfig): ExecRecord {
    const c = this.containers.get(idOrName);
    this.#checkRunning(c);
    if (config.Cmd.length === 0) throw invalidArgument('No exec command specified');
    if (config.ConsoleSize) checkSize(config.ConsoleSize[0], config.ConsoleSize[1]);
    if (config.DetachKeys) parseDetachKeys(config.DetachKeys);
    this.#prune();
    const rec: ExecRecord = { id: randomHex(32), containerId: c.id, config, running: false, exitCode: null, pid: 0, started: false };
    this.#execs.set(rec.id, rec);
    this.events.publish('container', `exec_create: ${config.Cmd.join(' ')}`, c.id, this.containers.attrs(c, { execID: rec.id }));
    return rec;
  }

  get(id: string): ExecRecord {
    const rec = this.#execs.get(id);
    if (!rec) throw notFound(`No such exec instance: ${id}`);
    return rec;
  }

  /** Exec ids of a container, for its inspect output. */
  idsFor(containerId: string): string[] {
    return [...this.#execs.values()].filter((e) => e.containerId === containerId).map((e) => e.id);
  }

  /** Checks what can fail before the client gets its 101 and claims the exec. */
  prepareStart(id: string, opts: ExecStartOptions = {}): PreparedExec {
    const rec = this.get(id);
    if (rec.running) throw conflict(`Error: Exec command ${id} is already running`);
    if (rec.started) throw conflict(`Error: Exec command ${id} has already run`);
    const c = this.containers.find(rec.containerId);
    if (!c) throw notFound(`No such container: ${rec.containerId}`);
    this.#checkRunning(c);
    rec.started = true;
    const consoleSize = opts.consoleSize ?? rec.config.ConsoleSize;
    if (consoleSize) checkSize(consoleSize[0], consoleSize[1]);
    return { record: rec, run: (client) => this.#run(c, rec, consoleSize, client) };
  }

  /** Starts without a client (Detach: true): output is dropped (a tty's goes to the exec log). */
  async startDetached(id: string, opts: ExecStartOptions = {}): Promise<void> {
    const rec = this.prepareStart(id, opts).record;
    const consoleSize = rec.config.Tty ? opts.consoleSize ?? rec.config.ConsoleSize : undefined;
    const session = await this.#launch(this.containers.get(rec.containerId), rec, { consoleSize, stdin: false, discardOutput: !rec.config.Tty });
    session.stdout?.resume();
    session.stderr?.resume();
    void this.#recordExit(rec, session);
  }

  async resize(id: string, height: number, width: number): Promise<void> {
    const rec = this.get(id);
    checkSize(height, width);
    const started = this.#startedSignals.get(id);
    if (!started) throw conflict(`Exec ${id} is not running`);
    const session = await Promise.race([started, new Promise<undefined>((r) => setTimeout(() => r(undefined), RESIZE_WAIT_MS).unref())]);
    if (!session || !rec.running) throw conflict(`Exec ${id} is not running`);
    if (rec.config.Tty) await this.processes.runtime.execs.resize(rec.containerId, id, height, width);
  }

  #checkRunning(c: ContainerRecord): void {
    if (c.state.status === 'paused') throw conflict(`container ${c.id} is paused, unpause the container before exec`);
    if (c.state.status !== 'running') throw conflict(`container ${c.id} is not running`);
  }

  async #run(c: ContainerRecord, rec: ExecRecord, consoleSize: [number, number] | undefined, client: AttachClient): Promise<AttachEnd> {
    const cfg = rec.config;
    const bridgeOpts = { stdin: cfg.AttachStdin, stdout: cfg.AttachStdout, stderr: cfg.AttachStderr };
    if (!cfg.Tty) {
      const session = await this.#launch(c, rec, { stdin: cfg.AttachStdin });
      const exited = this.#recordExit(rec, session);
      if (session.pid === 0) {
        // dockerd writes why the process could not start onto the stream.
        session.stdout?.resume();
        session.stderr?.resume();
        const result = await exited;
        client.write('stdout', failureText(result.error));
        return 'exited';
      }
      const output = bridgePipes(session, client, bridgeOpts);
      await exited;
      const cut = await Promise.race([output.done.then(() => false), client.gone.then(() => false), streamWaitOver(client)]);
      if (cut) {
        // Closed as dockerd closes an exec's streams: what a leftover child writes next fails.
        session.stdout?.destroy();
        session.stderr?.destroy();
      }
      return 'exited';
    }

    let sock: ConmonAttach | undefined;
    const session = await this.#launch(c, rec, {
      consoleSize,
      stdin: cfg.AttachStdin,
      onAttachReady: async (path) => {
        sock = await ConmonAttach.connect(path);
      },
    });
    const exited = this.#recordExit(rec, session);
    if (!sock || session.pid === 0) {
      sock?.close();
      const result = await exited;
      client.write('stdout', failureText(result.error));
      return 'exited';
    }
    const keys = parseDetachKeys(cfg.DetachKeys || DEFAULT_DETACH_KEYS);
    const end = await bridgeConmon(sock, client, { ...bridgeOpts, detachKeys: cfg.AttachStdin ? keys : undefined });
    if (end === 'exited') {
      // conmon closes the socket right after the exit; the exit code must be on record first.
      await waitAtMost(exited, OUTPUT_GRACE_MS, { unref: true });
    }
    return end;
  }

  /** Starts the process; when conmon cannot even be run, marks the exec failed and throws. */
  async #launch(c: ContainerRecord, rec: ExecRecord, o: LaunchOptions): Promise<ExecSession> {
    const cfg = rec.config;
    const consoleSize = o.consoleSize;
    let resolveStarted!: (s: ExecSession | undefined) => void;
    this.#startedSignals.set(rec.id, new Promise((r) => (resolveStarted = r)));
    try {
      const user = cfg.User ? await resolveUser(rootfsPaths(this.containers.containerDir(c.id)).merged, cfg.User, (c.hostConfig.GroupAdd as string[] | null | undefined) ?? []).catch((err: Error) => {
        throw invalidArgument(err.message);
      }) : undefined;
      // On record until the process exits: after a crash nobody reads it, and recovery ends it.
      this.#intents.set(rec.id, this.containers.intents.begin(c.id, 'exec', { execId: rec.id }));
      const session = await this.processes.runtime.execs.exec(c.id, {
        execId: rec.id,
        process: {
          args: cfg.Cmd,
          env: cfg.Env,
          cwd: cfg.WorkingDir || undefined,
          user: user ? { uid: user.uid, gid: user.gid, additionalGids: user.additionalGids } : undefined,
          terminal: cfg.Tty,
          consoleSize: consoleSize ? { height: consoleSize[0], width: consoleSize[1] } : undefined,
        },
        privileged: cfg.Privileged,
        stdin: o.stdin,
        discardOutput: o.discardOutput,
        onAttachReady: o.onAttachReady,
      });
      rec.pid = session.pid;
      rec.running = session.pid > 0;
      resolveStarted(session);
      if (rec.running) this.events.publish('container', `exec_start: ${cfg.Cmd.join(' ')}`, c.id, this.containers.attrs(c, { execID: rec.id }));
      return session;
    } catch (err) {
      resolveStarted(undefined);
      this.#endIntent(rec.id);
      rec.running = false;
      rec.exitCode = 126;
      rec.finishedAt = Date.now();
      log.warn('exec failed to start', { id: rec.id, container: c.id, err });
      throw err;
    }
  }

  async #recordExit(rec: ExecRecord, session: ExecSession): Promise<{ exitCode: number; error?: string }> {
    const result = await session.exit;
    this.#endIntent(rec.id);
    rec.exitCode = result.exitCode;
    rec.running = false;
    rec.finishedAt = Date.now();
    if (rec.config.Tty) void session.dispose().catch(() => undefined);
    const c = this.containers.find(rec.containerId);
    if (c) this.events.publish('container', 'exec_die', c.id, this.containers.attrs(c, { execID: rec.id, exitCode: String(result.exitCode) }));
    return result;
  }

  #endIntent(execId: string): void {
    this.#intents.get(execId)?.();
    this.#intents.delete(execId);
  }

  #prune(): void {
    const now = Date.now();
    for (const [id, rec] of this.#execs) {
      const gone = !this.containers.find(rec.containerId);
      if (gone || (rec.finishedAt !== undefined && now - rec.finishedAt > KEEP_FINISHED_MS)) {
        this.#execs.delete(id);
        this.#startedSignals.delete(id);
      }
    }
  }
}

/**
 * Resolves OUTPUT_GRACE_MS after the exit, once the client has taken what it was sent. dockerd
 * waits that long for an exec's streams after its exit, then closes them: pipes that children
 * the process left behind hold open (and may go on writing to) must not hold the client's stream.
 */
function streamWaitOver(client: AttachClient): Promise<true> {
  return new Promise((resolve) => {
    const check = () => (client.backlog() > 0 ? setTimeout(check, 50).unref() : resolve(true));
    setTimeout(check, OUTPUT_GRACE_MS).unref();
  });
}

/** What dockerd writes onto the stream when the runtime could not start the process. */
function failureText(error: string | undefined): Buffer {
  return Buffer.from(`OCI runtime exec failed: ${error ?? 'unknown error'}\r\n`);
}
