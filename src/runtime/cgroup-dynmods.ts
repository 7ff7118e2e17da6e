/**
 * Makes moving a process into a cgroup cheap, for as long as berthd runs.
 *
 * Every container start moves its first process into new cgroups (the runtime writes its pid to
 * cgroup.procs). By default the kernel guards those moves with a lock whose writer waits for an RCU
 * grace period: 5-15 ms on an idle 2-CPU host, paid once per start and measured as the largest
 * single cost of `crun create` here (a 13 ms stall in the first cgroup.procs write, of ~15 ms).
 * The kernel's `favordynmods` cgroup mount option (Linux 6.0+) keeps that lock ready for writers
 * instead, at the price of slightly dearer fork and exit, the trade its documentation recommends
 * for hosts that create cgroups often, as a container host does.
 *
 * The option belongs to a hierarchy but acts on the whole kernel while any hierarchy holds it. We
 * mount a small named v1 hierarchy with it (no controllers, so it changes no limits and runtimes
 * create nothing in it), keep a descriptor of its root open and detach the mount at once: nothing
 * shows in the host's mount table, and the hierarchy lives exactly as long as berthd's descriptor,
 * so even a berthd killed with SIGKILL leaves no mount behind. On Linux 6.18 the first such mount
 * switches cgroup.procs writes to a per-process lock for good; on older kernels the gain lasts
 * while the hierarchy does. Where the kernel refuses (no v1 support, no `favordynmods`), starts
 * just stay as they were.
 */
import { closeSync, constants, openSync } from 'node:fs';
import { mkdir, rmdir } from 'node:fs/promises';
import { log } from '../lib/log.js';
import { mount, unmount } from './mount-syscall.js';

/** Shared by every berthd on the host: a second mount with the same options reuses the hierarchy. */
const HIERARCHY = 'none,name=berth-dynmods,favordynmods';

/**
 * Mounts the hierarchy at the scratch dir `dir` (gone again on return) and holds it by a
 * descriptor; resolves with the function that lets it go, or undefined where not possible.
 */
export async function favorCgroupMoves(dir: string): Promise<(() => void) | undefined> {
  let fd: number | undefined;
  try {
    await mkdir(dir, { recursive: true });
    // A mount an older berthd left here.
    await unmount(dir, { lazy: true }).catch(() => undefined);
    await mount('cgroup', dir, 'cgroup', HIERARCHY);
    // Node opens with O_CLOEXEC: conmon and the runtimes never inherit the descriptor.
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    await unmount(dir, { lazy: true });
  } catch (err) {
    log.debug('cgroup favordynmods not available; container starts pay the cgroup move lock', { err });
    if (fd !== undefined) closeSync(fd);
    fd = undefined;
    await unmount(dir, { lazy: true }).catch(() => undefined);
  }
  await rmdir(dir).catch(() => undefined);
  if (fd === undefined) return undefined;
  const held = fd;
  return () => closeSync(held);
}
