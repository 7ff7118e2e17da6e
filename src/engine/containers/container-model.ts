/**
 * The container record. `config` and `hostConfig` keep the create request in the Engine API's own
 * shape (after merging the image config): it is the user's stated intent, shown back by inspect.
 * Everything Berth derives or observes lives in camelCase fields beside it.
 */
import type { CreateConfig, HostConfig } from '../../lib/docker-api-types.js';
import type { MountPointRecord } from '../volumes/volume-model.js';

export interface HealthState {
  status: 'starting' | 'healthy' | 'unhealthy' | 'none';
  failingStreak: number;
  log: { Start: string; End: string; ExitCode: number; Output: string }[];
}

export interface ContainerState {
  status: 'created' | 'running' | 'paused' | 'restarting' | 'removing' | 'exited' | 'dead';
  pid: number;
  exitCode: number;
  error: string;
  oomKilled: boolean;
  startedAt: string;
  finishedAt: string;
  health?: HealthState;
}

export type { CreateConfig, HostConfig, MountSpec } from '../../lib/docker-api-types.js';

export interface ContainerRecord {
  id: string;
  name: string; // without the leading slash
  created: string;
  imageId: string;
  config: CreateConfig;
  hostConfig: HostConfig;
  /** Endpoint settings requested at create, by network name. */
  networkingConfig: Record<string, unknown>;
  state: ContainerState;
  runtime: 'crun' | 'runc';
  restartCount: number;
  /** Set by `docker stop`/`kill` so restart policies know the stop was asked for. */
  manuallyStopped: boolean;
  /** What the runtime and network reported at the last start (inspect's NetworkSettings). */
  network: { endpoints: Record<string, Record<string, unknown>>; ports: Record<string, { HostIp: string; HostPort: string }[] | null>; sandboxKey: string };
  /**
   * Set when the NetworkMode network was disconnected: NetworkMode stays as it was (as in dockerd) but
   * the next start joins only networkingConfig's networks, until that network is connected again.
   */
  modeDisconnected?: boolean;
  /** Resolved at start from the image's /etc/passwd and /etc/group. */
  logPath: string;
  hostnamePath: string;
  hostsPath: string;
  resolvConfPath: string;
  /** Volumes, binds and Mounts resolved at create (dockerd's MountPoints); absent in older records. */
  mountPoints?: MountPointRecord[];
}

export const shortId = (id: string) => id.slice(0, 12);

/** Go's zero time, as dockerd shows a time never set (StartedAt before a start, FinishedAt while running). */
export const ZERO_TIME = '0001-01-01T00:00:00Z';

/** Event attributes dockerd sends for a container: image, name and labels. */
export function eventAttrs(c: ContainerRecord, extra: Record<string, string> = {}): Record<string, string> {
  return { ...(c.config.Labels ?? {}), image: c.config.Image ?? '', name: c.name, ...extra };
}

export function isRunningLike(s: ContainerState): boolean {
  return s.status === 'running' || s.status === 'paused' || s.status === 'restarting';
}
