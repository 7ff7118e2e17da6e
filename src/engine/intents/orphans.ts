/**
 * After a kill -9, host resources may outlive the records that named them (a record restored from an
 * older copy, a crash inside an operation no intent covers). At start-up, what this daemon made under
 * its own data root and state dirs is reconciled against its container records: runtime state
 * (conmon, the container process, its cgroup) and rootfs overlays of containers no record knows go.
 * Only ids found under this daemon's own directories are touched, never other daemons' resources.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { log } from '../../lib/log.js';
import { errorMessage } from '../../lib/errors.js';
import { rootfsPaths, unmountRootfs } from '../containers/rootfs-mount.js';

export interface OrphanSweepDeps {
  known: (id: string) => boolean;
  /** The data root's containers directory: one directory per container. */
  containersDir: string;
  /** Ids the runtime holds state for, and its cleanup (kills what runs, removes the cgroup). */
  runtimeIds: () => Promise<string[]>;
  runtimeCleanup: (id: string) => Promise<void>;
  /** Moves a directory out of the way for deletion. */
  discard: (dir: string) => Promise<void>;
}

const ID_RE = /^[0-9a-f]{64}$/;

export async function sweepOrphans(d: OrphanSweepDeps): Promise<string[]> {
  const swept: string[] = [];
  for (const id of await d.runtimeIds()) {
    if (!ID_RE.test(id) || d.known(id)) continue;
    await d.runtimeCleanup(id).then(
      () => swept.push(`runtime:${id}`),
      (err) => log.warn('removing runtime state of an unknown container failed', { id, err: errorMessage(err) }),
    );
  }
  for (const id of await readdir(d.containersDir).catch(() => [] as string[])) {
    if (!ID_RE.test(id) || d.known(id)) continue;
    const dir = join(d.containersDir, id);
    try {
      await unmountRootfs(rootfsPaths(dir));
      await d.discard(dir);
      swept.push(`rootfs:${id}`);
    } catch (err) {
      log.warn('removing the rootfs of an unknown container failed', { id, err: errorMessage(err) });
    }
  }
  if (swept.length) log.info('removed what containers no record knows left on the host', { swept });
  return swept;
}
