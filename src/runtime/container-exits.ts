/**
 * When a container's main process exited: conmon's exit files (one inotify watch, exit-watcher.ts)
 * and, for conmons this driver instance started, the EOF of their sync pipe, so waiters never hang
 * on a conmon that died without writing an exit file (killed): they get exit code 255.
 */
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { waitAtMost } from '../lib/deadline.js';
import { log } from '../lib/log.js';
import { ExitWatcher, type ExitRecord } from './exit-watcher.js';
import { isProcessAlive, readPidFile } from './pid-file.js';

export interface ExitStatus extends ExitRecord {
  oomKilled: boolean;
}

/** How long cleanup waits for conmon to record the exit after a forced delete. */
const CLEANUP_EXIT_WAIT_MS = 5000;

/** A conmon's end of the sync pipe, which berthd keeps open (unref'd) until conmon exits. */
interface ConmonPipe {
  once(event: 'close', listener: () => void): unknown;
}

export class ContainerExits {
  readonly #watcher: ExitWatcher;
  /** The conmon this instance started last for each id (see #onConmonGone). */
  readonly #conmonRuns = new Map<string, object>();

  /** `containerDir(id)`: where conmon.pid and conmon's `oom` marker are. */
  constructor(
    exitsDir: string,
    private readonly containerDir: (id: string) => string,
  ) {
    this.#watcher = new ExitWatcher(exitsDir);
  }

  start(): void {
    this.#watcher.start();
  }

  close(): void {
    this.#watcher.close();
  }

  pathOf(id: string): string {
    return this.#watcher.pathOf(id);
  }

  /** The exit file's record; undefined while the process runs. */
  read(id: string): Promise<ExitRecord | undefined> {
    return this.#watcher.read(id);
  }

  /** Follows a conmon this instance just started, by its sync pipe's end. */
  follow(id: string, pipe: ConmonPipe): void {
    const run = {};
    this.#conmonRuns.set(id, run);
    pipe.once('close', () => void this.#onConmonGone(id, run));
  }

  /**
   * Forgets the conmon followed for `id`: before a re-create (a late EOF of the earlier run must
   * not settle this run's waiters) and before cleanup removes the exit file (an EOF after that
   * would read "no exit file" and settle 255).
   */
  forget(id: string): void {
    this.#conmonRuns.delete(id);
  }

  /** The recorded exit, if the main process has exited. */
  async status(id: string): Promise<ExitStatus | undefined> {
    const rec = await this.#watcher.read(id);
    return rec ? { ...rec, oomKilled: await this.#oomKilled(id) } : undefined;
  }

  /**
   * Resolves when the container's main process has exited, with conmon's exit record. Works for
   * containers created by an earlier driver instance. If conmon is gone without writing an exit
   * file (killed), resolves at once with exit code 255.
   */
  async wait(id: string): Promise<ExitStatus> {
    const waiting = this.#watcher.wait(id);
    // A conmon this instance started is followed by its sync pipe's EOF (#onConmonGone); only an
    // adopted one (daemon restart) needs the pid file and /proc.
    if (!this.#conmonRuns.has(id)) void this.conmonAlive(id).then(async (alive) => {
      if (alive) return;
      const rec = await this.#watcher.read(id);
      this.#watcher.settle(id, rec ?? { exitCode: 255, exitedAt: new Date() });
      if (!rec) log.warn('conmon gone without an exit file', { id });
    });
    const rec = await waiting;
    return { ...rec, oomKilled: await this.#oomKilled(id) };
  }

  /**
   * After a forced delete: conmon writes the exit file after the process dies, so let it finish
   * (briefly) so nothing reappears once cleanup removed it. An exit file already there (the usual
   * case after an exit) means there is nothing to wait for.
   */
  async settleAfterDelete(id: string): Promise<void> {
    if ((await this.#watcher.read(id).catch(() => undefined)) || !(await this.conmonAlive(id))) return;
    if (!(await waitAtMost(this.#watcher.wait(id), CLEANUP_EXIT_WAIT_MS, { unref: true }))) log.warn('conmon did not record an exit after delete --force', { id });
  }

  async conmonAlive(id: string): Promise<boolean> {
    const pid = await readPidFile(join(this.containerDir(id), 'conmon.pid'));
    return pid !== undefined && (await isProcessAlive(pid, 'conmon'));
  }

  /** conmon exited: normally the exit file is there; if not, waiters must not hang forever. */
  async #onConmonGone(id: string, run: object): Promise<void> {
    // Cleaned up meanwhile, or already re-created (restart): this conmon's end means nothing now.
    if (this.#conmonRuns.get(id) !== run) return;
    const rec = await this.#watcher.read(id).catch(() => undefined);
    // Checked again after the read: a cleanup meanwhile may have removed the exit file.
    if (this.#conmonRuns.get(id) !== run) return;
    this.#conmonRuns.delete(id);
    if (rec) return; // the watcher delivers it
    log.warn('conmon exited without an exit file', { id });
    this.#watcher.settle(id, { exitCode: 255, exitedAt: new Date() });
  }

  async #oomKilled(id: string): Promise<boolean> {
    try {
      await access(join(this.containerDir(id), 'oom'));
      return true;
    } catch {
      return false;
    }
  }
}
