/**
 * The container record. `config` and `hostConfig` keep the create request in the Engine API's own
 * shape (after merging the image config): it is the user's stated intent, shown back by inspect.
 * Everything Berth derives or observes lives in camelCase fields beside it.
 */
import type { ContainerConfig } from '../../lib/oci.js';
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

/** The create request's Config, with the image config merged in. */
export interface CreateConfig extends ContainerConfig {
  Hostname?: string;
  Domainname?: string;
  AttachStdin?: boolean;
  AttachStdout?: boolean;
  AttachStderr?: boolean;
  Tty?: boolean;
  OpenStdin?: boolean;
  StdinOnce?: boolean;
  Image?: string;
  StopTimeout?: number | null;
  NetworkDisabled?: boolean;
  MacAddress?: string;
}

export type HostConfig = Record<string, unknown> & {
  Binds?: string[] | null;
  Mounts?: MountSpec[] | null;
  Tmpfs?: Record<string, string> | null;
  AutoRemove?: boolean;
  RestartPolicy?: { Name?: string; MaximumRetryCount?: number };
  NetworkMode?: string;
  PortBindings?: Record<string, { HostIp?: string; HostPort?: string }[] | null> | null;
  PublishAllPorts?: boolean;
  Privileged?: boolean;
  ReadonlyRootfs?: boolean;
  CapAdd?: string[] | null;
  CapDrop?: string[] | null;
  SecurityOpt?: string[] | null;
  Init?: boolean | null;
  ShmSize?: number;
  Sysctls?: Record<string, string> | null;
  Devices?: { PathOnHost: string; PathInContainer?: string; CgroupPermissions?: string }[] | null;
  ExtraHosts?: string[] | null;
  Dns?: string[] | null;
  DnsOptions?: string[] | null;
  DnsSearch?: string[] | null;
  Runtime?: string;
  Memory?: number;
  MemorySwap?: number;
  NanoCpus?: number;
  CpuShares?: number;
  CpuQuota?: number;
  CpuPeriod?: number;
  CpusetCpus?: string;
  PidsLimit?: number | null;
  Ulimits?: { Name: string; Soft: number; Hard: number }[] | null;
  LogConfig?: { Type?: string; Config?: Record<string, string> };
};

export interface MountSpec {
  Type?: 'bind' | 'volume' | 'tmpfs' | 'npipe' | 'cluster' | 'image';
  Source?: string;
  Target?: string;
  ReadOnly?: boolean;
  Consistency?: string;
  BindOptions?: { Propagation?: string; NonRecursive?: boolean; CreateMountpoint?: boolean };
  TmpfsOptions?: { SizeBytes?: number; Mode?: number };
  VolumeOptions?: unknown;
}

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

export function isRunningLike(s: ContainerState): boolean {
  return s.status === 'running' || s.status === 'paused' || s.status === 'restarting';
}
