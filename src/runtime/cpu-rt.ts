/**
 * CPU real-time budgets of a container's parent cgroups (cgroup v1's cpu.rt_period_us and
 * cpu.rt_runtime_us). A child's real-time runtime must fit in its parent's, and new groups start
 * with none, so dockerd's `--cpu-rt-period`/`--cpu-rt-runtime` write the daemon's values into every
 * level above each container before it starts; this does the same.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { CgroupLayout } from './cgroups.js';

export interface CpuRealtime {
  /** Microseconds; 0 leaves the kernel's value. */
  period: number;
  runtime: number;
}

/** Gives each parent of `cgroupsPath` (from the top down) the budget; a no-op without a v1 cpu hierarchy. */
export async function initCpuRtParents(layout: CgroupLayout, cgroupsPath: string, rt: CpuRealtime): Promise<void> {
  if (!rt.period && !rt.runtime) return;
  const mount = [...layout.v1].find(([, cs]) => cs.includes('cpu'))?.[0];
  if (!mount) return;
  const parts = posix.normalize(posix.join('/', cgroupsPath)).split('/').filter(Boolean).slice(0, -1);
  for (let i = 1; i <= parts.length; i++) {
    const dir = join(mount, ...parts.slice(0, i));
    await mkdir(dir, { recursive: true });
    // Period first: a runtime longer than the current period would be refused.
    if (rt.period) await writeFile(join(dir, 'cpu.rt_period_us'), String(rt.period));
    if (rt.runtime) await writeFile(join(dir, 'cpu.rt_runtime_us'), String(rt.runtime));
  }
}
