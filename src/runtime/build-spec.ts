/**
 * Turns Berth's typed container description into an OCI config.json with dockerd's defaults
 * (capabilities, mounts, masked paths, device rules, env). Pure: no file system access, so the
 * engine can build and inspect a spec without touching the host. Host-dependent facts (cgroup
 * version, device numbers) come in through the input.
 */
import type { OciBlockIO, OciDevice, OciDeviceCgroupRule, OciLinux, OciMount, OciNamespace, OciResources, OciSpec } from './oci-spec.js';
import { defaultSeccompProfile } from './seccomp-default.js';

export interface ContainerProcessSpec {
  args: string[];
  env: string[];
  cwd: string;
  user: { uid: number; gid: number; additionalGids?: number[]; umask?: number };
  terminal: boolean;
  /** CAP_* names; default: dockerd's 14 (privileged: all). */
  capabilities?: string[];
  noNewPrivileges?: boolean;
  rlimits?: { type: string; hard: number; soft: number }[];
  consoleSize?: { height: number; width: number };
}

export interface ContainerMount {
  destination: string;
  type: string;
  source: string;
  options: string[];
}

/** A device node to create in the container; see devices.ts for resolving host paths. */
export interface ContainerDevice {
  pathInContainer: string;
  type: 'c' | 'b';
  major: number;
  minor: number;
  fileMode: number;
  uid: number;
  gid: number;
  /** Device cgroup access: some of "rwm". */
  cgroupPermissions: string;
}

export interface ContainerResources {
  /** Bytes; 0/undefined = unlimited. */
  memory?: number;
  /** Memory + swap in bytes (Docker meaning); -1 = unlimited swap; undefined with memory set = 2 × memory. */
  memorySwap?: number;
  memoryReservation?: number;
  /** 0-100; cgroup v1 only. */
  memorySwappiness?: number;
  nanoCpus?: number;
  cpuShares?: number;
  cpuPeriod?: number;
  cpuQuota?: number;
  cpusetCpus?: string;
  cpusetMems?: string;
  /** 0, -1 or undefined = unlimited. */
  pidsLimit?: number;
  oomKillDisable?: boolean;
  blkioWeight?: number;
  /** Weights and throttles by device (with the weight); replaces blkioWeight when set. */
  blockIO?: OciBlockIO;
  /** Microseconds; cgroup v1's cpu.rt_period_us and cpu.rt_runtime_us. */
  cpuRealtimePeriod?: number;
  cpuRealtimeRuntime?: number;
  /** Bytes; cgroup v1 only. */
  kernelMemory?: number;
  kernelMemoryTCP?: number;
}

export interface RuntimeSpecInput {
  id: string;
  /** The mounted root file system (overlay merged dir). */
  rootfs: string;
  readonlyRootfs: boolean;
  hostname: string;
  domainname?: string;
  process: ContainerProcessSpec;
  /** Extra mounts (binds, tmpfs, volumes, /etc/hosts...). One at a default mount's destination replaces it. */
  mounts: ContainerMount[];
  privileged: boolean;
  /** /dev/shm size in bytes; 0 = 64 MiB. */
  shmSize: number;
  /** Leave out /dev/shm (Docker's --ipc=none). */
  omitShm?: boolean;
  /** Namespaces to create (no path) or join (path). mount is always added. */
  namespaces: { type: string; path?: string }[];
  resources: ContainerResources;
  sysctls?: Record<string, string>;
  devices?: ContainerDevice[];
  /** Extra device cgroup rules ("c 1:3 rwm" style already parsed). */
  deviceCgroupRules?: OciDeviceCgroupRule[];
  seccomp: 'default' | 'unconfined';
  /** Replace the default masked/readonly paths (Docker's --security-opt systempaths=unconfined gives []). */
  maskedPaths?: string[];
  readonlyPaths?: string[];
  /** Run catatonit as pid 1 (Docker's --init). */
  init?: boolean;
  /** Host path of the init binary; default /usr/bin/catatonit. */
  initPath?: string;
  /** 2 on a unified hierarchy (adds a private cgroup namespace, like dockerd); 1 on v1 and hybrid. Default 2. */
  cgroupVersion?: 1 | 2;
  /** A private cgroup namespace (CgroupnsMode private); default: on a unified hierarchy only. */
  cgroupNamespace?: boolean;
  /** Parent of the container's cgroup; default /berth. */
  cgroupParent?: string;
  annotations?: Record<string, string>;
}

export const DEFAULT_CAPABILITIES: readonly string[] = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD', 'CAP_NET_RAW', 'CAP_SETGID',
  'CAP_SETUID', 'CAP_SETFCAP', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE',
];

/** Every capability up to Linux 5.9 (CAP_CHECKPOINT_RESTORE = 40), in kernel order. */
export const ALL_CAPABILITIES: readonly string[] = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL', 'CAP_SETGID',
  'CAP_SETUID', 'CAP_SETPCAP', 'CAP_LINUX_IMMUTABLE', 'CAP_NET_BIND_SERVICE', 'CAP_NET_BROADCAST', 'CAP_NET_ADMIN',
  'CAP_NET_RAW', 'CAP_IPC_LOCK', 'CAP_IPC_OWNER', 'CAP_SYS_MODULE', 'CAP_SYS_RAWIO', 'CAP_SYS_CHROOT', 'CAP_SYS_PTRACE',
  'CAP_SYS_PACCT', 'CAP_SYS_ADMIN', 'CAP_SYS_BOOT', 'CAP_SYS_NICE', 'CAP_SYS_RESOURCE', 'CAP_SYS_TIME',
  'CAP_SYS_TTY_CONFIG', 'CAP_MKNOD', 'CAP_LEASE', 'CAP_AUDIT_WRITE', 'CAP_AUDIT_CONTROL', 'CAP_SETFCAP',
  'CAP_MAC_OVERRIDE', 'CAP_MAC_ADMIN', 'CAP_SYSLOG', 'CAP_WAKE_ALARM', 'CAP_BLOCK_SUSPEND', 'CAP_AUDIT_READ',
  'CAP_PERFMON', 'CAP_BPF', 'CAP_CHECKPOINT_RESTORE',
];

export const DEFAULT_MASKED_PATHS: readonly string[] = [
  '/proc/acpi', '/proc/asound', '/proc/interrupts', '/proc/kcore', '/proc/keys', '/proc/latency_stats',
  '/proc/sched_debug', '/proc/scsi', '/proc/timer_list', '/proc/timer_stats', '/sys/devices/virtual/powercap',
  '/sys/firmware',
];

export const DEFAULT_READONLY_PATHS: readonly string[] = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

export const DEFAULT_PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
export const DEFAULT_SHM_SIZE = 64 * 1024 * 1024;
export const INIT_PATH_IN_CONTAINER = '/dev/init';
const DEFAULT_INIT_PATH = '/usr/bin/catatonit';

/** Character devices every container may use (dockerd's basics) plus mknod of anything. */
const DEFAULT_DEVICE_RULES: OciDeviceCgroupRule[] = [
  { allow: false, access: 'rwm' },
  { allow: true, type: 'c', access: 'm' },
  { allow: true, type: 'b', access: 'm' },
  { allow: true, type: 'c', major: 1, minor: 3, access: 'rwm' }, // null
  { allow: true, type: 'c', major: 1, minor: 5, access: 'rwm' }, // zero
  { allow: true, type: 'c', major: 1, minor: 7, access: 'rwm' }, // full
  { allow: true, type: 'c', major: 1, minor: 8, access: 'rwm' }, // random
  { allow: true, type: 'c', major: 1, minor: 9, access: 'rwm' }, // urandom
  { allow: true, type: 'c', major: 5, minor: 0, access: 'rwm' }, // tty
  { allow: true, type: 'c', major: 5, minor: 1, access: 'rwm' }, // console
  { allow: true, type: 'c', major: 5, minor: 2, access: 'rwm' }, // ptmx
  { allow: true, type: 'c', major: 136, access: 'rwm' }, // pts/*
];

function defaultMounts(input: RuntimeSpecInput): OciMount[] {
  const roSys = input.privileged ? [] : ['ro'];
  const mounts: OciMount[] = [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
    {
      destination: '/dev/pts',
      type: 'devpts',
      source: 'devpts',
      options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'],
    },
    { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', ...roSys] },
    { destination: '/sys/fs/cgroup', type: 'cgroup', source: 'cgroup', options: ['nosuid', 'noexec', 'nodev', 'relatime', ...roSys] },
    { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
  ];
  if (!input.omitShm) {
    const size = input.shmSize > 0 ? input.shmSize : DEFAULT_SHM_SIZE;
    mounts.push({
      destination: '/dev/shm',
      type: 'tmpfs',
      source: 'shm',
      options: ['nosuid', 'noexec', 'nodev', 'mode=1777', `size=${size}`],
    });
  }
  return mounts;
}

function depth(path: string): number {
  return path.split('/').filter(Boolean).length;
}

/** Defaults first, replaced by user mounts at the same path; parents before children. */
function buildMounts(input: RuntimeSpecInput): OciMount[] {
  const user = input.mounts.map((m) => ({ ...m, destination: normalizeDestination(m.destination) }));
  const taken = new Set(user.map((m) => m.destination));
  const defaults = defaultMounts(input).filter((m) => !taken.has(m.destination));
  const extra: OciMount[] = user.map((m) => ({ destination: m.destination, type: m.type, source: m.source, options: [...m.options] }));
  if (input.init) {
    extra.push({
      destination: INIT_PATH_IN_CONTAINER,
      type: 'bind',
      source: input.initPath ?? DEFAULT_INIT_PATH,
      options: ['bind', 'ro', 'nosuid', 'nodev'],
    });
  }
  // Stable sort: a mount must come after the mount that holds its destination.
  extra.sort((a, b) => depth(a.destination) - depth(b.destination));
  return [...defaults, ...extra];
}

function normalizeDestination(path: string): string {
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  return '/' + parts.join('/');
}

/** Docker's env defaults: PATH when absent, HOSTNAME, TERM=xterm with a tty; given entries win by key. */
export function buildEnv(env: readonly string[], hostname: string, terminal: boolean): string[] {
  const keyOf = (e: string) => (e.includes('=') ? e.slice(0, e.indexOf('=')) : e);
  const given = new Set(env.map(keyOf));
  const out: string[] = [];
  if (!given.has('PATH')) out.push(DEFAULT_PATH);
  if (!given.has('HOSTNAME')) out.push(`HOSTNAME=${hostname}`);
  if (terminal && !given.has('TERM')) out.push('TERM=xterm');
  // Later duplicates of a key win, as with Docker's merge of image env and user env.
  const last = new Map<string, string>();
  for (const e of env) last.set(keyOf(e), e);
  return [...out, ...last.values()];
}

function buildResources(input: RuntimeSpecInput): OciResources {
  const r = input.resources;
  const res: OciResources = {};
  if (input.privileged) {
    res.devices = [{ allow: true, access: 'rwm' }];
  } else {
    res.devices = [
      ...DEFAULT_DEVICE_RULES,
      ...(input.devices ?? []).map((d) => ({
        allow: true,
        type: d.type,
        major: d.major,
        minor: d.minor,
        access: d.cgroupPermissions,
      })),
      ...(input.deviceCgroupRules ?? []),
    ];
  }
  const memory: NonNullable<OciResources['memory']> = {};
  if (r.memory && r.memory > 0) {
    memory.limit = r.memory;
    if (r.memorySwap === undefined || r.memorySwap === 0) memory.swap = r.memory * 2;
    else memory.swap = r.memorySwap; // -1 = unlimited
  }
  if (r.memoryReservation && r.memoryReservation > 0) memory.reservation = r.memoryReservation;
  if (r.memorySwappiness !== undefined) memory.swappiness = r.memorySwappiness;
  if (r.oomKillDisable) memory.disableOOMKiller = true;
  if (r.kernelMemory && r.kernelMemory > 0) memory.kernel = r.kernelMemory;
  if (r.kernelMemoryTCP && r.kernelMemoryTCP > 0) memory.kernelTCP = r.kernelMemoryTCP;
  if (Object.keys(memory).length > 0) res.memory = memory;

  const cpu: NonNullable<OciResources['cpu']> = {};
  if (r.cpuShares && r.cpuShares > 0) cpu.shares = r.cpuShares;
  if (r.nanoCpus && r.nanoCpus > 0) {
    cpu.period = 100_000;
    cpu.quota = Math.round((r.nanoCpus * cpu.period) / 1e9);
  } else {
    if (r.cpuPeriod && r.cpuPeriod > 0) cpu.period = r.cpuPeriod;
    if (r.cpuQuota && r.cpuQuota > 0) cpu.quota = r.cpuQuota;
  }
  if (r.cpusetCpus) cpu.cpus = r.cpusetCpus;
  if (r.cpusetMems) cpu.mems = r.cpusetMems;
  if (r.cpuRealtimePeriod) cpu.realtimePeriod = r.cpuRealtimePeriod;
  if (r.cpuRealtimeRuntime) cpu.realtimeRuntime = r.cpuRealtimeRuntime;
  if (Object.keys(cpu).length > 0) res.cpu = cpu;

  if (r.pidsLimit && r.pidsLimit > 0) res.pids = { limit: r.pidsLimit };
  if (r.blockIO) res.blockIO = { ...r.blockIO };
  else if (r.blkioWeight && r.blkioWeight > 0) res.blockIO = { weight: r.blkioWeight };
  return res;
}

const NAMESPACE_TYPES = new Set(['pid', 'network', 'mount', 'ipc', 'uts', 'user', 'cgroup', 'time']);

function buildNamespaces(input: RuntimeSpecInput): OciNamespace[] {
  const out: OciNamespace[] = [];
  const seen = new Set<string>();
  for (const ns of input.namespaces) {
    const type = ns.type === 'net' ? 'network' : ns.type;
    if (!NAMESPACE_TYPES.has(type)) throw new Error(`unknown namespace type: ${ns.type}`);
    if (seen.has(type)) continue;
    seen.add(type);
    out.push(ns.path ? { type: type as OciNamespace['type'], path: ns.path } : { type: type as OciNamespace['type'] });
  }
  if (!seen.has('mount')) out.push({ type: 'mount' });
  if ((input.cgroupNamespace ?? (input.cgroupVersion ?? 2) === 2) && !seen.has('cgroup')) out.push({ type: 'cgroup' });
  return out;
}

function buildDevices(input: RuntimeSpecInput): OciDevice[] | undefined {
  if (!input.devices || input.devices.length === 0) return undefined;
  return input.devices.map((d) => ({
    type: d.type,
    path: d.pathInContainer,
    major: d.major,
    minor: d.minor,
    fileMode: d.fileMode,
    uid: d.uid,
    gid: d.gid,
  }));
}

/** The OCI spec for one container, with dockerd's defaults filled in. */
export function buildSpec(input: RuntimeSpecInput): OciSpec {
  const p = input.process;
  const caps = input.privileged ? [...ALL_CAPABILITIES] : [...(p.capabilities ?? DEFAULT_CAPABILITIES)];
  const args = input.init ? [INIT_PATH_IN_CONTAINER, '--', ...p.args] : [...p.args];

  const linux: OciLinux = {
    namespaces: buildNamespaces(input),
    cgroupsPath: `${input.cgroupParent ?? '/berth'}/${input.id}`,
    resources: buildResources(input),
  };
  const devices = buildDevices(input);
  if (devices) linux.devices = devices;
  if (input.sysctls && Object.keys(input.sysctls).length > 0) linux.sysctl = { ...input.sysctls };
  if (!input.privileged) {
    linux.maskedPaths = [...(input.maskedPaths ?? DEFAULT_MASKED_PATHS)];
    linux.readonlyPaths = [...(input.readonlyPaths ?? DEFAULT_READONLY_PATHS)];
  }
  if (input.seccomp === 'default' && !input.privileged) linux.seccomp = defaultSeccompProfile({ capabilities: caps });

  const spec: OciSpec = {
    ociVersion: '1.0.2',
    process: {
      terminal: p.terminal,
      user: {
        uid: p.user.uid,
        gid: p.user.gid,
        ...(p.user.umask !== undefined ? { umask: p.user.umask } : {}),
        ...(p.user.additionalGids && p.user.additionalGids.length > 0 ? { additionalGids: [...p.user.additionalGids] } : {}),
      },
      args,
      env: buildEnv(p.env, input.hostname, p.terminal),
      cwd: p.cwd || '/',
      capabilities: { bounding: caps, effective: caps, permitted: caps, inheritable: [], ambient: [] },
      noNewPrivileges: p.noNewPrivileges ?? false,
    },
    root: { path: input.rootfs, readonly: input.readonlyRootfs },
    mounts: buildMounts(input),
    linux,
  };
  // Without a UTS namespace of its own (UTSMode host) the runtime may not set a name.
  if (linux.namespaces!.some((n) => n.type === 'uts')) {
    spec.hostname = input.hostname;
    if (input.domainname) spec.domainname = input.domainname;
  }
  if (p.terminal && p.consoleSize) spec.process.consoleSize = { ...p.consoleSize };
  if (p.rlimits && p.rlimits.length > 0) spec.process.rlimits = p.rlimits.map((r) => ({ ...r }));
  if (input.annotations) spec.annotations = { ...input.annotations };
  return spec;
}
