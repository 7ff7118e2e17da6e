/**
 * The part of the OCI runtime spec (config.json, version 1.0.x) that Berth writes.
 * Field names follow the spec exactly, since this object is serialized as-is for crun/runc.
 */
export interface OciSpec {
  ociVersion: string;
  process: OciProcess;
  root: { path: string; readonly?: boolean };
  hostname?: string;
  domainname?: string;
  mounts: OciMount[];
  annotations?: Record<string, string>;
  linux: OciLinux;
}

export interface OciProcess {
  terminal?: boolean;
  consoleSize?: { height: number; width: number };
  user: { uid: number; gid: number; umask?: number; additionalGids?: number[] };
  args: string[];
  env: string[];
  cwd: string;
  capabilities?: {
    bounding?: string[];
    effective?: string[];
    inheritable?: string[];
    permitted?: string[];
    ambient?: string[];
  };
  rlimits?: OciRlimit[];
  noNewPrivileges?: boolean;
  oomScoreAdj?: number;
  apparmorProfile?: string;
  selinuxLabel?: string;
}

export interface OciRlimit {
  type: string; // RLIMIT_NOFILE, ...
  hard: number;
  soft: number;
}

export interface OciMount {
  destination: string;
  type?: string;
  source?: string;
  options?: string[];
}

export interface OciNamespace {
  type: 'pid' | 'network' | 'mount' | 'ipc' | 'uts' | 'user' | 'cgroup' | 'time';
  path?: string;
}

export interface OciDevice {
  type: 'c' | 'b' | 'u' | 'p';
  path: string;
  major?: number;
  minor?: number;
  fileMode?: number;
  uid?: number;
  gid?: number;
}

export interface OciDeviceCgroupRule {
  allow: boolean;
  type?: 'a' | 'c' | 'b';
  major?: number;
  minor?: number;
  access?: string;
}

export interface OciResources {
  devices?: OciDeviceCgroupRule[];
  memory?: { limit?: number; reservation?: number; swap?: number; swappiness?: number; disableOOMKiller?: boolean; kernel?: number; kernelTCP?: number };
  cpu?: { shares?: number; quota?: number; period?: number; cpus?: string; mems?: string; realtimePeriod?: number; realtimeRuntime?: number };
  pids?: { limit: number };
  blockIO?: OciBlockIO;
  unified?: Record<string, string>;
}

export interface OciThrottleDevice {
  major: number;
  minor: number;
  rate: number;
}

export interface OciBlockIO {
  weight?: number;
  weightDevice?: { major: number; minor: number; weight?: number }[];
  throttleReadBpsDevice?: OciThrottleDevice[];
  throttleWriteBpsDevice?: OciThrottleDevice[];
  throttleReadIOPSDevice?: OciThrottleDevice[];
  throttleWriteIOPSDevice?: OciThrottleDevice[];
}

export interface OciSeccompArg {
  index: number;
  value: number;
  valueTwo?: number;
  op: 'SCMP_CMP_NE' | 'SCMP_CMP_LT' | 'SCMP_CMP_LE' | 'SCMP_CMP_EQ' | 'SCMP_CMP_GE' | 'SCMP_CMP_GT' | 'SCMP_CMP_MASKED_EQ';
}

export interface OciSeccompRule {
  names: string[];
  action: 'SCMP_ACT_ALLOW' | 'SCMP_ACT_ERRNO' | 'SCMP_ACT_KILL' | 'SCMP_ACT_TRAP' | 'SCMP_ACT_TRACE' | 'SCMP_ACT_LOG' | 'SCMP_ACT_KILL_PROCESS';
  errnoRet?: number;
  args?: OciSeccompArg[];
}

export interface OciSeccomp {
  defaultAction: OciSeccompRule['action'];
  defaultErrnoRet?: number;
  architectures?: string[];
  flags?: string[];
  syscalls?: OciSeccompRule[];
}

export interface OciLinux {
  namespaces: OciNamespace[];
  devices?: OciDevice[];
  cgroupsPath?: string;
  resources?: OciResources;
  sysctl?: Record<string, string>;
  seccomp?: OciSeccomp;
  maskedPaths?: string[];
  readonlyPaths?: string[];
  rootfsPropagation?: string;
}
