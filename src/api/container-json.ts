/** Docker's JSON shapes for containers: inspect and list entries, built from the engine's record. */
import type { ContainerRecord } from '../engine/containers/container-model.js';
import { configuredNetworks, endpointRequest } from '../engine/networks/container-networking.js';
import type { ImageService } from '../engine/images/image-service.js';
import { versionBefore } from './api-version.js';

export function stateJson(c: ContainerRecord): Record<string, unknown> {
  const s = c.state;
  const out: Record<string, unknown> = {
    Status: s.status,
    Running: s.status === 'running' || s.status === 'paused' || s.status === 'restarting',
    Paused: s.status === 'paused',
    Restarting: s.status === 'restarting',
    OOMKilled: s.oomKilled,
    Dead: s.status === 'dead',
    Pid: s.pid,
    ExitCode: s.exitCode,
    Error: s.error,
    StartedAt: s.startedAt,
    FinishedAt: s.finishedAt,
  };
  if (s.health) out.Health = { Status: s.health.status, FailingStreak: s.health.failingStreak, Log: s.health.log };
  return out;
}

function portsJson(c: ContainerRecord): Record<string, unknown> {
  const ports: Record<string, unknown> = {};
  for (const p of Object.keys(c.config.ExposedPorts ?? {})) ports[p] = null;
  if (c.state.status === 'running' || c.state.status === 'paused') Object.assign(ports, c.network.ports);
  return ports;
}

function networksJson(c: ContainerRecord): Record<string, unknown> {
  const nets: Record<string, unknown> = {};
  const running = c.state.status === 'running' || c.state.status === 'paused';
  if (running) Object.assign(nets, c.network.endpoints);
  if (running && Object.keys(nets).length > 0) return nets;
  // Not running (or host mode): the networks the next start joins, with what create or connect asked for.
  for (const name of configuredNetworks(c)) {
    const ep = c.network.endpoints[name];
    const req = endpointRequest(c, name);
    nets[name] = ep
      ? { ...ep, IPAddress: '', Gateway: '', MacAddress: '', IPPrefixLen: 0, EndpointID: '' }
      : { IPAMConfig: req.IPAMConfig ?? null, Links: req.Links?.length ? req.Links : null, Aliases: req.Aliases?.length ? req.Aliases : null, MacAddress: req.MacAddress ?? '', NetworkID: '', EndpointID: '', Gateway: '', IPAddress: '', IPPrefixLen: 0, IPv6Gateway: '', GlobalIPv6Address: '', GlobalIPv6PrefixLen: 0, DriverOpts: req.DriverOpts ?? null, DNSNames: null };
  }
  return nets;
}

export function networkSettingsJson(c: ContainerRecord, version: string): Record<string, unknown> {
  const networks = networksJson(c);
  const primary = (networks.bridge ?? Object.values(networks)[0] ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = {
    Bridge: '',
    SandboxID: c.network.sandboxKey ? c.id : '',
    SandboxKey: c.network.sandboxKey,
    Ports: portsJson(c),
    HairpinMode: false,
    LinkLocalIPv6Address: '',
    LinkLocalIPv6PrefixLen: 0,
    SecondaryIPAddresses: null,
    SecondaryIPv6Addresses: null,
    EndpointID: primary.EndpointID ?? '',
    Gateway: primary.Gateway ?? '',
    GlobalIPv6Address: '',
    GlobalIPv6PrefixLen: 0,
    IPAddress: primary.IPAddress ?? '',
    IPPrefixLen: primary.IPPrefixLen ?? 0,
    IPv6Gateway: '',
    MacAddress: primary.MacAddress ?? '',
    Networks: networks,
  };
  if (!versionBefore(version, '1.52')) {
    for (const k of ['Bridge', 'HairpinMode', 'LinkLocalIPv6Address', 'LinkLocalIPv6PrefixLen', 'SecondaryIPAddresses', 'SecondaryIPv6Addresses', 'EndpointID', 'Gateway', 'GlobalIPv6Address', 'GlobalIPv6PrefixLen', 'IPAddress', 'IPPrefixLen', 'IPv6Gateway', 'MacAddress']) delete out[k];
  }
  return out;
}

export function mountsJson(c: ContainerRecord): Record<string, unknown>[] {
  if (c.mountPoints) return mountPointsJson(c.mountPoints);
  const out: Record<string, unknown>[] = [];
  for (const b of c.hostConfig.Binds ?? []) {
    const [src = '', dst = '', mode = ''] = b.split(':');
    out.push({ Type: 'bind', Source: src, Destination: dst, Mode: mode, RW: !mode.split(',').includes('ro'), Propagation: 'rprivate' });
  }
  for (const m of c.hostConfig.Mounts ?? []) {
    out.push({ Type: m.Type, Source: m.Source ?? '', Destination: m.Target, Mode: '', RW: !m.ReadOnly, Propagation: m.Type === 'bind' ? 'rprivate' : '' });
  }
  for (const dst of Object.keys(c.hostConfig.Tmpfs ?? {})) out.push({ Type: 'tmpfs', Source: '', Destination: dst, Mode: '', RW: true, Propagation: '' });
  return out;
}

/** dockerd's MountPoint JSON: Name and Driver for volumes only. HostConfig.Tmpfs is not listed (as dockerd). */
function mountPointsJson(points: NonNullable<ContainerRecord['mountPoints']>): Record<string, unknown>[] {
  return points.map((m) => ({
    Type: m.Type,
    ...(m.Name ? { Name: m.Name } : {}),
    Source: m.Source,
    Destination: m.Destination,
    ...(m.Driver ? { Driver: m.Driver } : {}),
    Mode: m.Mode,
    RW: m.RW,
    Propagation: m.Propagation,
  }));
}

export function inspectContainer(c: ContainerRecord, images: ImageService, version: string, dataRoot: string, size?: { rw: number; rootFs: number }, execIds: string[] = []): Record<string, unknown> {
  const path = c.config.Entrypoint?.length ? c.config.Entrypoint[0]! : (c.config.Cmd?.[0] ?? '');
  const args = c.config.Entrypoint?.length ? [...c.config.Entrypoint.slice(1), ...(c.config.Cmd ?? [])] : (c.config.Cmd?.slice(1) ?? []);
  const lowers = images.layerDirs(c.imageId).reverse().join(':');
  const dir = `${dataRoot}/containers/${c.id}`;
  const out: Record<string, unknown> = {
    Id: c.id,
    Created: c.created,
    Path: path,
    Args: args,
    State: stateJson(c),
    Image: c.imageId,
    ResolvConfPath: c.resolvConfPath,
    HostnamePath: c.hostnamePath,
    HostsPath: c.hostsPath,
    LogPath: c.logPath,
    Name: `/${c.name}`,
    RestartCount: c.restartCount,
    Driver: 'overlay2',
    Platform: 'linux',
    MountLabel: '',
    ProcessLabel: '',
    AppArmorProfile: '',
    ExecIDs: execIds.length ? execIds : null,
    HostConfig: hostConfigJson(c),
    GraphDriver: { Name: 'overlay2', Data: { LowerDir: lowers, MergedDir: `${dir}/merged`, UpperDir: `${dir}/upper`, WorkDir: `${dir}/work` } },
    Mounts: mountsJson(c),
    Config: configJson(c),
    NetworkSettings: networkSettingsJson(c, version),
  };
  if (size) {
    out.SizeRw = size.rw;
    out.SizeRootFs = size.rootFs;
  }
  return out;
}

export function configJson(c: ContainerRecord): Record<string, unknown> {
  const cfg = c.config;
  return {
    Hostname: cfg.Hostname ?? '',
    Domainname: cfg.Domainname ?? '',
    User: cfg.User ?? '',
    AttachStdin: cfg.AttachStdin ?? false,
    AttachStdout: cfg.AttachStdout ?? false,
    AttachStderr: cfg.AttachStderr ?? false,
    ExposedPorts: cfg.ExposedPorts,
    Tty: cfg.Tty ?? false,
    OpenStdin: cfg.OpenStdin ?? false,
    StdinOnce: cfg.StdinOnce ?? false,
    Env: cfg.Env ?? null,
    Cmd: cfg.Cmd ?? null,
    Healthcheck: cfg.Healthcheck,
    Image: cfg.Image ?? '',
    Volumes: cfg.Volumes ?? null,
    WorkingDir: cfg.WorkingDir ?? '',
    Entrypoint: cfg.Entrypoint ?? null,
    OnBuild: cfg.OnBuild ?? null,
    Labels: cfg.Labels ?? {},
    StopSignal: cfg.StopSignal,
    StopTimeout: cfg.StopTimeout ?? undefined,
  };
}

function hostConfigJson(c: ContainerRecord): Record<string, unknown> {
  const h = c.hostConfig;
  return {
    Binds: h.Binds ?? null,
    ContainerIDFile: '',
    // Clients (docker-py's run) read logs back only from drivers they know; ours serve the same API.
    LogConfig: { Type: h.LogConfig?.Type === 'none' || h.LogConfig?.Type === 'local' ? h.LogConfig.Type : 'json-file', Config: h.LogConfig?.Config ?? {} },
    NetworkMode: h.NetworkMode ?? 'bridge',
    PortBindings: h.PortBindings ?? {},
    RestartPolicy: { Name: h.RestartPolicy?.Name || 'no', MaximumRetryCount: h.RestartPolicy?.MaximumRetryCount ?? 0 },
    AutoRemove: h.AutoRemove ?? false,
    VolumeDriver: h.VolumeDriver ?? '',
    VolumesFrom: (h.VolumesFrom as string[] | undefined) ?? null,
    ConsoleSize: h.ConsoleSize ?? [0, 0],
    CapAdd: h.CapAdd ?? null,
    CapDrop: h.CapDrop ?? null,
    CgroupnsMode: h.CgroupnsMode || 'private',
    Dns: h.Dns ?? [],
    DnsOptions: h.DnsOptions ?? [],
    DnsSearch: h.DnsSearch ?? [],
    ExtraHosts: h.ExtraHosts ?? null,
    GroupAdd: h.GroupAdd ?? null,
    IpcMode: h.IpcMode || 'private',
    Cgroup: h.Cgroup ?? '',
    Links: h.Links ?? null,
    OomScoreAdj: 0,
    PidMode: h.PidMode ?? '',
    Privileged: h.Privileged ?? false,
    PublishAllPorts: h.PublishAllPorts ?? false,
    ReadonlyRootfs: h.ReadonlyRootfs ?? false,
    SecurityOpt: h.SecurityOpt ?? null,
    Tmpfs: h.Tmpfs ?? undefined,
    UTSMode: h.UTSMode ?? '',
    UsernsMode: h.UsernsMode ?? '',
    ShmSize: h.ShmSize || 67108864,
    Sysctls: h.Sysctls ?? undefined,
    StorageOpt: h.StorageOpt || undefined,
    Runtime: c.runtime,
    Isolation: h.Isolation ?? '',
    CpuShares: h.CpuShares ?? 0,
    Memory: h.Memory ?? 0,
    NanoCpus: h.NanoCpus ?? 0,
    CgroupParent: h.CgroupParent ?? '',
    BlkioWeight: h.BlkioWeight ?? 0,
    BlkioWeightDevice: h.BlkioWeightDevice ?? [],
    BlkioDeviceReadBps: h.BlkioDeviceReadBps ?? [],
    BlkioDeviceWriteBps: h.BlkioDeviceWriteBps ?? [],
    BlkioDeviceReadIOps: h.BlkioDeviceReadIOps ?? [],
    BlkioDeviceWriteIOps: h.BlkioDeviceWriteIOps ?? [],
    CpuPeriod: h.CpuPeriod ?? 0,
    CpuQuota: h.CpuQuota ?? 0,
    CpuRealtimePeriod: h.CpuRealtimePeriod ?? 0,
    CpuRealtimeRuntime: h.CpuRealtimeRuntime ?? 0,
    CpusetCpus: h.CpusetCpus ?? '',
    CpusetMems: h.CpusetMems ?? '',
    Devices: h.Devices ?? [],
    DeviceCgroupRules: h.DeviceCgroupRules ?? null,
    DeviceRequests: h.DeviceRequests ?? null,
    KernelMemory: h.KernelMemory || undefined,
    KernelMemoryTCP: h.KernelMemoryTCP || undefined,
    MemoryReservation: h.MemoryReservation ?? 0,
    MemorySwap: h.MemorySwap ?? 0,
    MemorySwappiness: h.MemorySwappiness ?? null,
    OomKillDisable: h.OomKillDisable ?? null,
    PidsLimit: h.PidsLimit ?? null,
    Ulimits: h.Ulimits ?? [],
    CpuCount: h.CpuCount ?? 0,
    CpuPercent: h.CpuPercent ?? 0,
    IOMaximumIOps: 0,
    IOMaximumBandwidth: 0,
    Mounts: h.Mounts ?? undefined,
    Init: h.Init ?? null,
    MaskedPaths: h.Privileged ? null : DEFAULT_MASKED,
    ReadonlyPaths: h.Privileged ? null : DEFAULT_READONLY,
  };
}

const DEFAULT_MASKED = ['/proc/asound', '/proc/acpi', '/proc/interrupts', '/proc/kcore', '/proc/keys', '/proc/latency_stats', '/proc/timer_list', '/proc/timer_stats', '/proc/sched_debug', '/proc/scsi', '/sys/firmware', '/sys/devices/virtual/powercap'];
const DEFAULT_READONLY = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

/**
 * A `GET /containers/json` entry in two halves, the fields before State and those after Status:
 * those two move with time and are joined in between by the list.
 */
export function listEntryHalves(c: ContainerRecord): { head: Record<string, unknown>; tail: Record<string, unknown> } {
  const cmd = [...(c.config.Entrypoint ?? []), ...(c.config.Cmd ?? [])].join(' ');
  const ports: Record<string, unknown>[] = [];
  const running = c.state.status === 'running' || c.state.status === 'paused';
  for (const [key, bindings] of Object.entries({ ...Object.fromEntries(Object.keys(c.config.ExposedPorts ?? {}).map((k) => [k, null])), ...(running ? c.network.ports : {}) })) {
    const [port, proto = 'tcp'] = key.split('/');
    if (!bindings?.length) ports.push({ PrivatePort: Number(port), Type: proto });
    else for (const b of bindings) ports.push({ IP: b.HostIp, PrivatePort: Number(port), PublicPort: Number(b.HostPort), Type: proto });
  }
  return {
    head: {
      Id: c.id,
      Names: [`/${c.name}`],
      Image: c.config.Image ?? '',
      ImageID: c.imageId,
      Command: cmd,
      Created: Math.floor(Date.parse(c.created) / 1000),
      Ports: ports,
      Labels: c.config.Labels ?? {},
    },
    tail: {
      HostConfig: { NetworkMode: c.hostConfig.NetworkMode ?? 'bridge' },
      NetworkSettings: { Networks: networksJson(c) },
      Mounts: mountsJson(c),
    },
  };
}

/** "Up 3 seconds", "Exited (0) 2 minutes ago", as `docker ps` shows. */
export function statusText(c: ContainerRecord, now = Date.now()): string {
  return status(c, now).text;
}

/**
 * The Status text and the time (epoch ms) until which it stays the same: the elapsed part moves in
 * whole seconds and mostly much slower ("Up 5 minutes"), so a cached text is good until then.
 */
export function status(c: ContainerRecord, now = Date.now()): { text: string; until: number } {
  const s = c.state;
  switch (s.status) {
    case 'created':
      return forever('Created');
    case 'running':
    case 'paused': {
      const d = since(s.startedAt, now);
      let t = `Up ${d.text}`;
      if (s.health && s.health.status !== 'none') t += s.health.status === 'starting' ? ' (health: starting)' : ` (${s.health.status})`;
      return { text: s.status === 'paused' ? `${t} (Paused)` : t, until: d.until };
    }
    case 'restarting': {
      const d = since(s.finishedAt, now);
      return { text: `Restarting (${s.exitCode}) ${d.text} ago`, until: d.until };
    }
    case 'removing':
      return forever('Removal In Progress');
    case 'dead':
      return forever('Dead');
    default: {
      if (s.finishedAt === '0001-01-01T00:00:00Z') return forever('Created');
      const d = since(s.finishedAt, now);
      return { text: `Exited (${s.exitCode}) ${d.text} ago`, until: d.until };
    }
  }
}

const forever = (text: string) => ({ text, until: Infinity });

function since(iso: string, now: number): { text: string; until: number } {
  const from = Date.parse(iso);
  const secs = Math.round((now - from) / 1000);
  const text = humanSeconds(secs);
  if (Number.isNaN(secs)) return { text, until: Infinity };
  // Math.round moves to the next whole second at the half: the wording changes (secs' - 0.5) s after `from`.
  return { text, until: from + (nextWording(secs, text) - 0.5) * 1000 };
}

/** The first whole second after `secs` worded differently: the wording is a step function of it. */
function nextWording(secs: number, text: string): number {
  let lo = secs;
  let step = 1;
  while (humanSeconds(lo + step) === text) {
    lo += step;
    step *= 2;
  }
  let hi = lo + step;
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (humanSeconds(mid) === text) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** Go's units.HumanDuration wording. */
export function humanDuration(ms: number): string {
  return humanSeconds(Math.round(ms / 1000));
}

function humanSeconds(s: number): string {
  if (s < 1) return 'Less than a second';
  if (s === 1) return '1 second';
  if (s < 60) return `${s} seconds`;
  const m = Math.round(s / 60);
  if (m === 1) return 'About a minute';
  if (m < 60) return `${m} minutes`;
  const h = Math.round(s / 3600);
  if (h === 1) return 'About an hour';
  if (h < 48) return `${h} hours`;
  if (h < 24 * 7 * 2) return `${Math.round(h / 24)} days`;
  if (h < 24 * 30 * 2) return `${Math.round(h / 24 / 7)} weeks`;
  if (h < 24 * 365 * 2) return `${Math.round(h / 24 / 30)} months`;
  return `${Math.round(h / 24 / 365)} years`;
}
