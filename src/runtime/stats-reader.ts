/** A container's resource usage, read from its cgroup (cgroups.ts knows v1, hybrid and v2). */
import { readCgroupStats, type CgroupLayout, type CgroupStats } from './cgroups.js';
import type { RuntimeHost } from './runtime-host.js';

export interface ContainerStats extends CgroupStats {
  /** Host CPU time since boot isn't ours to read; callers pair cpuUsageNs with their own clock. */
  readAt: Date;
}

export class StatsReader {
  constructor(private readonly host: RuntimeHost) {}

  /** This host's cgroup layout, for readers of further cgroup files. */
  get cgroupLayout(): CgroupLayout {
    return this.host.cgroupLayout;
  }

  /** Usage from the container's cgroup; undefined when it has none (not created or cleaned up). */
  async read(id: string): Promise<ContainerStats | undefined> {
    const meta = await this.host.metas.must(id);
    const s = await readCgroupStats(this.host.cgroupLayout, meta.cgroupsPath);
    return s ? { ...s, readAt: new Date() } : undefined;
  }

  /** The cgroup path (relative to each hierarchy's root) the container runs in. */
  async cgroupsPath(id: string): Promise<string> {
    return (await this.host.metas.must(id)).cgroupsPath;
  }
}
