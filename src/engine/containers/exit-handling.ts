/**
 * What happens when a container's process exits: the exit is recorded and published, waiters
 * wake, what the container held is released, then its restart policy restarts it (with backoff)
 * or auto-remove removes it.
 */
import { log } from '../../lib/log.js';
import type { ExitStatus } from '../../runtime/container-exits.js';
import type { EventBus } from '../events.js';
import type { VolumeService } from '../volumes/volume-service.js';
import type { ContainerLocks, Release } from './container-locks.js';
import { eventAttrs, type ContainerRecord } from './container-model.js';
import type { RuntimeProcesses } from './container-processes.js';
import type { ContainerRemoval } from './container-removal.js';
import type { ContainerStarter } from './container-start.js';
import type { ContainerTable } from './container-table.js';
import type { Waiters } from './container-waiters.js';
import { rootfsPaths, unmountRootfs } from './rootfs-mount.js';

/** How long an exited container's rootfs stays mounted when nothing asks for its unmount (#release). */
const UNMOUNT_GRACE_MS = 2_000;

export interface ExitHandlingDeps {
  table: ContainerTable;
  locks: ContainerLocks;
  waiters: Waiters;
  events: EventBus;
  processes: RuntimeProcesses;
  volumes: VolumeService;
  starter: ContainerStarter;
  removal: ContainerRemoval;
  containerDir: (id: string) => string;
}

export class ExitHandling {
  readonly #d: ExitHandlingDeps;

  constructor(deps: ExitHandlingDeps) {
    this.#d = deps;
  }

  /** Called by the process watcher (and recovery) when a container's process has exited. */
  async handleExit(id: string, exit: ExitStatus): Promise<void> {
    const { table, locks } = this.#d;
    const c = table.byId(id);
    if (!c) return;
    const finished = { ...c.state, status: 'exited' as const, pid: 0, exitCode: exit.exitCode, oomKilled: exit.oomKilled, finishedAt: exit.exitedAt.toISOString() };
    c.state = finished;
    if (c.state.health) c.state.health.status = 'unhealthy';
    const restart = shouldRestart(c);
    const autoRemove = !!c.hostConfig.AutoRemove && !restart;
    if (restart) {
      c.state.status = 'restarting';
      c.restartCount++;
    }
    table.save(c);
    this.#d.events.publish('container', 'die', c.id, eventAttrs(c, { exitCode: String(exit.exitCode) }));
    // Waiters hear of the exit at once; releasing the runtime state and the mount follows.
    this.#d.waiters.exited(id, { StatusCode: exit.exitCode });
    const release = await locks.withLock(id, async () => {
      const r = this.#release(c);
      locks.releasing(id, r);
      return r; // not a promise: the lock is not held until the release ends
    });
    // A restart or a removal needs the mount gone; otherwise the unmount follows on its own.
    if (!restart && !autoRemove) return;
    await release.now();
    if (restart) {
      const delay = Math.min(100 * 2 ** Math.min(c.restartCount - 1, 10), 60_000);
      setTimeout(() => {
        locks.withLock(c.id, async () => {
          if (c.state.status !== 'restarting' || c.manuallyStopped || !table.has(c.id)) return;
          await this.#d.starter.startProcess(c);
        }).catch((err) => log.warn('restart failed', { id, err }));
      }, delay).unref();
    } else if (autoRemove) {
      await this.#d.removal.remove(id, { force: true, volumes: true }).catch((err) => log.warn('auto-remove failed', { id, err }));
    }
  }

  /**
   * Releases what an exited container held: its runtime state and network at once, its rootfs
   * mount after UNMOUNT_GRACE_MS unless an operation on the container asks for it sooner (now()).
   * Unmounting an overlay syncs the whole upper file system (~100 ms after a container wrote 50
   * MiB); a commit of a container that just exited then runs without that flush competing for
   * the disk.
   */
  #release(c: ContainerRecord): Release {
    const id = c.id;
    let unmountNow = (): void => undefined;
    let unmounted: Promise<void> | undefined;
    // Unless started again meanwhile (a start queued before this exit's turn): the mount is in use.
    if (c.state.status !== 'running') {
      const asked = new Promise<void>((resolve) => (unmountNow = resolve));
      const timer = setTimeout(unmountNow, UNMOUNT_GRACE_MS).unref();
      unmounted = asked.then(() => {
        clearTimeout(timer);
        return unmountRootfs(rootfsPaths(this.#d.containerDir(id))).catch((err) => log.warn('unmount failed', { id, err }));
      });
    }
    const done = Promise.all([this.#d.processes.cleanup(c).catch((err) => log.warn('container cleanup failed', { id, err })), unmounted, this.#d.volumes.unmountFor(c)]).then(() => undefined);
    return {
      done,
      now: () => {
        unmountNow();
        return done;
      },
    };
  }
}

/** Whether a restart policy restarts the container after this exit (not after a `docker stop`). */
export function shouldRestart(c: ContainerRecord): boolean {
  const p = c.hostConfig.RestartPolicy ?? {};
  if (c.manuallyStopped) return false;
  switch (p.Name) {
    case 'always':
    case 'unless-stopped':
      return true;
    case 'on-failure':
      return c.state.exitCode !== 0 && (!p.MaximumRetryCount || c.restartCount < p.MaximumRetryCount);
    default:
      return false;
  }
}
