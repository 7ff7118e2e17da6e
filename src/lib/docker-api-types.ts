/**
 * Docker's Engine API types: the vocabulary api/ and engine/ share (dockerd's engine speaks them
 * too). Declared here once, in wire names; the engine modules that produce them re-export them.
 * What differs between API versions is api/'s business, not these types'.
 */
import type { ContainerConfig } from './oci.js';

// Containers: the create request (Config, HostConfig and its Mounts)
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

// GET /containers/{id}/stats
export interface CpuStats {
  cpu_usage: { total_usage: number; percpu_usage?: number[]; usage_in_kernelmode: number; usage_in_usermode: number };
  system_cpu_usage?: number;
  online_cpus?: number;
  throttling_data: { periods: number; throttled_periods: number; throttled_time: number };
}

export interface StatsJson {
  read: string;
  preread: string;
  pids_stats: { current?: number; limit?: number };
  blkio_stats: Record<string, BlkioEntry[] | null>;
  num_procs: number;
  storage_stats: Record<string, never>;
  cpu_stats: CpuStats;
  precpu_stats: CpuStats;
  memory_stats: { usage?: number; max_usage?: number; stats?: Record<string, number>; failcnt?: number; limit?: number };
  name: string;
  id: string;
  networks?: Record<string, NetStats>;
}

export interface BlkioEntry {
  major: number;
  minor: number;
  op: string;
  value: number;
}

export interface NetStats {
  rx_bytes: number;
  rx_packets: number;
  rx_errors: number;
  rx_dropped: number;
  tx_bytes: number;
  tx_packets: number;
  tx_errors: number;
  tx_dropped: number;
}

// GET /containers/{id}/top
export interface TopResult {
  Titles: string[];
  Processes: string[][];
}

// GET /containers/{id}/changes
export const enum ChangeKind {
  Modified = 0,
  Added = 1,
  Deleted = 2,
}

export interface Change {
  Path: string;
  Kind: ChangeKind;
}

// POST /containers/{id}/exec (the body, defaults filled in)
export interface ExecConfig {
  Cmd: string[];
  Env: string[];
  User: string;
  WorkingDir: string;
  Tty: boolean;
  AttachStdin: boolean;
  AttachStdout: boolean;
  AttachStderr: boolean;
  Privileged: boolean;
  DetachKeys: string;
  ConsoleSize?: [number, number];
}

// POST /containers/{id}/wait?condition=
export type WaitCondition = 'not-running' | 'next-exit' | 'removed';

// docker cp: X-Docker-Container-Path-Stat
/** What X-Docker-Container-Path-Stat carries (dockerd's PathStat; mode in Go's os.FileMode bits). */
export interface PathStat {
  name: string;
  size: number;
  mode: number;
  mtime: string;
  linkTarget: string;
}

// DELETE /images/{name}, POST /images/prune
export interface DeleteResponseItem {
  Untagged?: string;
  Deleted?: string;
}

// GET /events
export interface EngineEvent {
  Type: 'container' | 'image' | 'network' | 'volume' | 'daemon' | 'service' | 'node';
  Action: string;
  Actor: { ID: string; Attributes: Record<string, string> };
  scope: 'local' | 'swarm';
  time: number;
  timeNano: number;
}
