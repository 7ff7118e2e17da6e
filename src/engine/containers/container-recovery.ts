/**
 * Start-up after a daemon restart (or a kill -9): containers whose process still runs are watched
 * again, exits that happened meanwhile are recorded (restart policies apply), containers between
 * restarts are started, cut-off removals finished, rootfs mounts of exited containers undone; then
 * what no record knows is swept off the host and the intents of cut-off operations are settled.
 */
import { join } from 'node:path';
import { log } from '../../lib/log.js';
import type { ContainerIntents } from '../intents/container-intents.js';
import { sweepOrphans } from '../intents/orphans.js';
import type { ExitHandling } from './exit-handling.js';
import type { ContainerLocks } from './container-locks.js';
import type { RuntimeProcesses } from './container-processes.js';
import type { ContainerRemoval } from './container-removal.js';
import type { ContainerStarter } from './container-start.js';
import type { ContainerTable } from './container-table.js';
import type { Trash } from './container-trash.js';
import { rootfsPaths, unmountRootfs } from './rootfs-mount.js';

export interface RecoveryDeps {
  table: ContainerTable;
  locks: ContainerLocks;
  processes: RuntimeProcesses;
  starter: ContainerStarter;
  exits: ExitHandling;
  removal: ContainerRemoval;
  intents: ContainerIntents;
  trash: Trash;
  dataRoot: string;
  containerDir: (id: string) => string;
  /** The facade's own `docker start` and `docker unpause`, which finish a restart or a commit's pause. */
  start: (id: string) => Promise<void>;
  unpause: (id: string) => Promise<void>;
}

export async function recoverContainers(d: RecoveryDeps): Promise<void> {
  const runtime = d.processes.runtime.lifecycle;
  await Promise.all(
    d.table.all().map(async (c) => {
      try {
        if (c.state.status === 'running' || c.state.status === 'paused') {
          const st = await runtime.state(c.id).catch(() => undefined);
          if (st && (st.status === 'running' || st.status === 'paused')) {
            if (st.status !== c.state.status) {
              c.state.status = st.status;
              d.table.save(c);
            }
            d.processes.watch(c);
            return;
          }
          const exit = (await runtime.exitStatus(c.id).catch(() => undefined)) ?? { exitCode: 255, exitedAt: new Date(), oomKilled: false };
          await d.exits.handleExit(c.id, exit);
        } else if (c.state.status === 'restarting' && !c.manuallyStopped) {
          await d.locks.withLock(c.id, () => d.starter.startProcess(c));
        } else if (c.state.status === 'removing') {
          await d.removal.remove(c.id, { force: true, volumes: false });
        } else {
          // Exited while the previous daemon still meant to unmount its rootfs (exit-handling.ts): do it now.
          await unmountRootfs(rootfsPaths(d.containerDir(c.id)));
        }
      } catch (err) {
        log.warn('container recovery failed', { id: c.id, err });
      }
    }),
  );
  await sweepOrphans({
    known: (id) => d.table.has(id),
    containersDir: join(d.dataRoot, 'containers'),
    runtimeIds: () => runtime.containerIds(),
    runtimeCleanup: (id) => runtime.cleanup(id),
    discard: (dir) => d.trash.discard(dir),
  });
  await d.intents.recover({
    status: (id) => d.table.find(id)?.state.status,
    unpause: (id) => d.unpause(id),
    start: (id) => d.start(id),
    remove: (id) => d.removal.remove(id, { force: true, volumes: false }),
    abandonExec: (id, execId) => d.processes.runtime.execs.abandon(id, execId, d.table.find(id)?.state.pid ?? 0),
  });
}
