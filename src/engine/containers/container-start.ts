/**
 * The start path of a container's process, shared by `docker start`, a restart policy and
 * recovery after a daemon restart; the caller holds the container's lock.
 */
import { mkdir } from 'node:fs/promises';
import { BerthError } from '../../lib/errors.js';
import type { EventBus } from '../events.js';
import type { ImageService } from '../images/image-service.js';
import type { VolumeService } from '../volumes/volume-service.js';
import { eventAttrs, ZERO_TIME, type ContainerRecord } from './container-model.js';
import type { RuntimeProcesses } from './container-processes.js';
import type { ContainerTable } from './container-table.js';
import { mountRootfs, rootfsPaths, unmountRootfs } from './rootfs-mount.js';

export interface ContainerStarterDeps {
  table: ContainerTable;
  images: ImageService;
  volumes: VolumeService;
  processes: RuntimeProcesses;
  events: EventBus;
  containerDir: (id: string) => string;
}

export class ContainerStarter {
  readonly #d: ContainerStarterDeps;

  constructor(deps: ContainerStarterDeps) {
    this.#d = deps;
  }

  /**
   * In order: the overlay is mounted here (rootfs-mount.ts), volumes once it is there;
   * RuntimeProcesses.start (container-processes.ts) meanwhile prepares the network and, after the
   * mount, the spec input (user and working dir: container-user.ts), writes the /etc files
   * (container-rootfs.ts), builds the spec and has the runtime create and start the process.
   * This method then records the start, or the failure.
   */
  async startProcess(c: ContainerRecord): Promise<void> {
    const { images, volumes, processes, table } = this.#d;
    const image = images.records.getImage(c.imageId);
    if (!image) throw new BerthError('internal', `image ${c.imageId} of container ${c.name} is gone`);
    const paths = rootfsPaths(this.#d.containerDir(c.id));
    await mkdir(paths.dir, { recursive: true });
    const lowers = [...image.chainIds].reverse().map((id) => images.layers.diffDir(id as `sha256:${string}`));
    // The mount runs alongside the network set-up inside processes.start.
    let mountFailed = false;
    const mounted = mountRootfs(paths, lowers, { volatile: !!c.hostConfig.AutoRemove });
    mounted.catch(() => (mountFailed = true));
    // Volumes mount (and copy up the image's content) once the rootfs is there, alongside the network set-up.
    const ready = c.mountPoints?.some((m) => m.Type === 'volume') ? mounted.then(() => volumes.mountFor(c, paths.merged)).then(() => undefined) : mounted;
    try {
      const { pid } = await processes.start(c, paths.merged, ready);
      c.state = { ...c.state, status: 'running', pid, exitCode: 0, error: '', oomKilled: false, startedAt: new Date().toISOString(), finishedAt: ZERO_TIME };
      if (c.state.health) c.state.health = { status: 'starting', failingStreak: 0, log: [] };
      table.save(c);
      this.#d.events.publish('container', 'start', c.id, eventAttrs(c));
    } catch (err) {
      await volumes.unmountFor(c).catch(() => undefined);
      if (mountFailed) {
        // As before the mount ran in parallel: a failed mount leaves the record as it was.
        await processes.cleanup(c).catch(() => undefined);
        throw err;
      }
      c.state = { ...c.state, status: c.state.status === 'restarting' ? 'exited' : c.state.status, exitCode: 127, error: (err as Error).message, pid: 0 };
      table.save(c);
      await processes.cleanup(c).catch(() => undefined);
      await unmountRootfs(paths).catch(() => undefined);
      throw err;
    }
  }
}
