/**
 * `docker rm` (and auto-remove, and a remove a crash cut off): kills a running container when
 * forced, then under its lock releases the runtime state and the rootfs, deletes the record, moves
 * the directory to the trash, releases the volumes and wakes the waiters for the removal.
 */
import { waitAtMost } from '../../lib/deadline.js';
import { conflict } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { EventBus } from '../events.js';
import type { ContainerIntents } from '../intents/container-intents.js';
import type { VolumeService } from '../volumes/volume-service.js';
import type { ContainerLocks } from './container-locks.js';
import { eventAttrs, isRunningLike, type ContainerRecord } from './container-model.js';
import type { RuntimeProcesses } from './container-processes.js';
import type { ContainerTable } from './container-table.js';
import type { Trash } from './container-trash.js';
import type { Waiters } from './container-waiters.js';
import { forgetRootfs, rootfsPaths, unmountRootfs } from './rootfs-mount.js';

export interface ContainerRemovalDeps {
  table: ContainerTable;
  locks: ContainerLocks;
  waiters: Waiters;
  processes: RuntimeProcesses;
  volumes: VolumeService;
  events: EventBus;
  intents: ContainerIntents;
  trash: Trash;
  containerDir: (id: string) => string;
}

export interface RemoveOptions {
  force: boolean;
  volumes: boolean;
}

export class ContainerRemoval {
  readonly #d: ContainerRemovalDeps;

  constructor(deps: ContainerRemovalDeps) {
    this.#d = deps;
  }

  async remove(idOrName: string, opts: RemoveOptions): Promise<void> {
    const c = this.#d.table.get(idOrName);
    // A container between restarts counts as running, as in dockerd: no removal without force.
    if (isRunningLike(c.state) && !opts.force) {
      if (c.state.status === 'paused') throw conflict(`cannot remove container "${idOrName}": container is paused and must be unpaused first`);
      throw conflict(`cannot remove container "${idOrName}": container is ${c.state.status}: stop the container before removing or force remove`);
    }
    // A remove cut off by a crash (container killed, record still there) is finished on restart.
    await this.#d.intents.around(c.id, 'remove', () => this.#remove(c, opts));
  }

  async #remove(c: ContainerRecord, opts: RemoveOptions): Promise<void> {
    const { table, processes, waiters } = this.#d;
    c.manuallyStopped = true;
    // The restart policy's start, if already under way, holds the lock: after it the container runs.
    if (c.state.status === 'restarting') await this.#d.locks.withLock(c.id, async () => undefined);
    if (isRunningLike(c.state) && c.state.status !== 'restarting') {
      const exited = waiters.add(c.id, 'next-exit');
      if (c.state.status === 'paused') await processes.resume(c).catch(() => undefined);
      await processes.kill(c, 'SIGKILL').catch(() => undefined);
      await waitAtMost(exited, 15_000, { unref: true });
    }
    await this.#d.locks.withLock(c.id, async () => {
      if (!table.has(c.id)) return;
      c.manuallyStopped = true;
      await processes.cleanup(c).catch(() => undefined);
      const paths = rootfsPaths(this.#d.containerDir(c.id));
      await unmountRootfs(paths);
      table.delete(c);
      await this.#d.trash.discard(paths.dir);
      forgetRootfs(paths);
      await this.#d.volumes.containerRemoved(c, { anonymous: opts.volumes }).catch((err) => log.warn('releasing volumes failed', { id: c.id, err }));
      this.#d.events.publish('container', 'destroy', c.id, eventAttrs(c));
      waiters.removed(c.id, { StatusCode: c.state.exitCode });
    });
  }
}
