/**
 * Attaching to a container's stdio, and resizing its terminal.
 *
 * The stream comes from conmon's attach socket. A container that is not running yet (`docker
 * run` attaches between create and start, `docker start -a` before start) is attached through the
 * process service's beforeStart hook: the socket is connected after the runtime created the
 * process and before it starts, so not one byte of output is missed.
 *
 * Semantics follow dockerd: stdin is attached only if the container has OpenStdin; detach keys
 * work only with a tty; a container with StdinOnce (and no tty) gets stdin EOF when the client
 * that attached stdin half-closes or leaves.
 */
import { isRunningLike, type ContainerRecord } from './container-model.js';
import type { ContainerService } from './container-service.js';
import type { RuntimeProcesses } from './container-processes.js';
import type { EventBus } from '../events.js';
import { conflict, invalidArgument } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { readLogRecords } from '../../runtime/log-file.js';
import { ConmonAttach } from './conmon-attach.js';
import { LogCatchUp } from './log-catchup.js';
import { bridgeConmon, type AttachClient, type AttachEnd } from './attach-bridge.js';
import { DEFAULT_DETACH_KEYS, parseDetachKeys } from './detach-keys.js';

export interface AttachOptions {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  /** Replay the log first. */
  logs: boolean;
  /** Stream live output (else only the logs are sent). */
  stream: boolean;
  detachKeys?: string;
}

/** An attach that passed validation; run() does the streaming once the API has hijacked the connection. */
export interface PreparedAttach {
  container: ContainerRecord;
  tty: boolean;
  run(client: AttachClient): Promise<AttachEnd>;
}

const NEWLINE = Buffer.from('\n');

export class AttachService {
  constructor(
    private readonly containers: ContainerService,
    private readonly processes: RuntimeProcesses,
    private readonly events: EventBus,
  ) {}

  /** Checks what can fail before the client gets its 101; throws BerthErrors. */
  prepare(idOrName: string, opts: AttachOptions): PreparedAttach {
    const c = this.containers.get(idOrName);
    if (c.state.status === 'paused') throw conflict(`container ${c.id} is paused, unpause the container before attach`);
    if (c.state.status === 'restarting') throw conflict(`container ${c.id} is restarting, wait until the container is running`);
    const tty = !!c.config.Tty;
    const keys = parseDetachKeys(opts.detachKeys || DEFAULT_DETACH_KEYS);
    const stdin = opts.stdin && !!c.config.OpenStdin;
    return {
      container: c,
      tty,
      run: async (client) => {
        this.events.publish('container', 'attach', c.id, this.containers.attrs(c));
        // Connect (or arrange to, at start) before replaying logs: nothing falls in between.
        const sock = opts.stream ? this.#connect(c, client) : undefined;
        if (opts.logs) await this.#replayLogs(c, opts, client);
        const conn = await sock;
        if (!conn) return 'exited';
        try {
          return await bridgeConmon(conn.sock, client, {
            stdin,
            stdout: opts.stdout,
            stderr: opts.stderr,
            detachKeys: tty && stdin ? keys : undefined,
            drainAfterClient: !stdin && !tty && !!c.config.OpenStdin && !!c.config.StdinOnce,
            catchUp: conn.log,
          });
        } finally {
          await conn.log?.close();
        }
      },
    };
  }

  /**
   * The container's attach socket: now if it runs, else at its next start. Undefined when the
   * process is gone, the container is removed, or the client leaves first. The log file is
   * opened just before (see log-catchup.ts).
   */
  async #connect(c: ContainerRecord, client: AttachClient): Promise<{ sock: ConmonAttach; log?: LogCatchUp } | undefined> {
    const path = this.processes.runtime.lifecycle.attachSocketPath(c.id);
    const connect = async () => {
      const logTail = await LogCatchUp.open(c.logPath);
      try {
        return { sock: await ConmonAttach.connect(path), log: logTail };
      } catch (err) {
        await logTail?.close();
        throw err;
      }
    };
    if (isRunningLike(c.state)) {
      return connect().catch((err) => {
        log.debug('attach: container process gone', { id: c.id, err });
        return undefined;
      });
    }
    return new Promise<{ sock: ConmonAttach; log?: LogCatchUp } | undefined>((resolve) => {
      let hooks = this.processes.beforeStart.get(c.id);
      if (!hooks) this.processes.beforeStart.set(c.id, (hooks = new Set()));
      const set = hooks;
      const stop = () => {
        set.delete(hook);
        if (set.size === 0 && this.processes.beforeStart.get(c.id) === set) this.processes.beforeStart.delete(c.id);
        unsubscribe();
      };
      const hook = async () => {
        stop();
        try {
          resolve(await connect());
        } catch (err) {
          log.warn('attach at start failed', { id: c.id, err });
          resolve(undefined);
        }
      };
      set.add(hook);
      const unsubscribe = this.events.subscribe((ev) => {
        if (ev.Type === 'container' && ev.Action === 'destroy' && ev.Actor.ID === c.id) {
          stop();
          resolve(undefined);
        }
      });
      void client.gone.then(() => {
        if (!set.has(hook)) return;
        stop();
        resolve(undefined);
      });
    });
  }

  async #replayLogs(c: ContainerRecord, opts: AttachOptions, client: AttachClient): Promise<void> {
    const abort = new AbortController();
    void client.gone.then(() => abort.abort());
    try {
      for await (const rec of readLogRecords(c.logPath, { signal: abort.signal })) {
        if (!(rec.stream === 'stdout' ? opts.stdout : opts.stderr)) continue;
        const data = rec.partial ? rec.data : Buffer.concat([rec.data, NEWLINE]);
        if (!client.write(rec.stream, data)) await client.drained();
      }
    } catch (err) {
      if (!abort.signal.aborted && (err as NodeJS.ErrnoException).code !== 'ENOENT') log.warn('attach: log replay failed', { id: c.id, err });
    }
  }

  /** POST /containers/{id}/resize: conmon resizes the pty. */
  async resize(idOrName: string, height: number, width: number): Promise<void> {
    const c = this.containers.get(idOrName);
    if (!(c.state.status === 'running' || c.state.status === 'paused')) throw conflict(`Container ${c.id} is not running`);
    checkSize(height, width);
    if (c.config.Tty) await this.processes.runtime.lifecycle.resize(c.id, height, width);
    this.events.publish('container', 'resize', c.id, this.containers.attrs(c, { height: String(height), width: String(width) }));
  }
}

export function checkSize(height: number, width: number): void {
  for (const v of [height, width]) if (!Number.isInteger(v) || v < 0 || v > 65535) throw invalidArgument(`invalid terminal size: ${height}x${width}`);
}
