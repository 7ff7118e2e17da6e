/**
 * Translates a container record (Docker's create request, merged with the image) into the runtime
 * driver's typed spec input. Everything that needs the host (user lookup in the image's passwd,
 * device numbers) is resolved here; the spec builder in runtime/ stays pure.
 */
import { stat } from 'node:fs/promises';
import { invalidArgument } from '../../lib/errors.js';
import type { ContainerRecord, MountSpec } from './container-model.js';
import type { ContainerDevice, ContainerMount, RuntimeSpecInput } from '../../runtime/build-spec.js';
import { DEFAULT_CAPABILITIES, ALL_CAPABILITIES } from '../../runtime/build-spec.js';
import { prepareWorkingDir, resolveUser } from './container-user.js';
import { specMounts } from '../volumes/spec-mounts.js';
import { namespacePlan, type ContainerLookup } from './container-namespaces.js';
import { deviceCgroupRules } from './container-options.js';
import { shmPath } from './container-shm.js';
import { cgroupSpecInput } from './cgroup-options.js';

const ULIMIT_NAMES: Record<string, string> = {
  core: 'RLIMIT_CORE', cpu: 'RLIMIT_CPU', data: 'RLIMIT_DATA', fsize: 'RLIMIT_FSIZE', locks: 'RLIMIT_LOCKS',
  memlock: 'RLIMIT_MEMLOCK', msgqueue: 'RLIMIT_MSGQUEUE', nice: 'RLIMIT_NICE', nofile: 'RLIMIT_NOFILE',
  nproc: 'RLIMIT_NPROC', rss: 'RLIMIT_RSS', rtprio: 'RLIMIT_RTPRIO', rttime: 'RLIMIT_RTTIME',
  sigpending: 'RLIMIT_SIGPENDING', stack: 'RLIMIT_STACK', as: 'RLIMIT_AS',
};

export interface SpecContext {
  rootfs: string;
  /** Network namespace to join (a netns file or /proc/<pid>/ns/net); undefined = host network. */
  netnsPath?: string | 'new';
  cgroupVersion: 1 | 2;
  /** Finds the containers whose namespaces PidMode/IpcMode join. */
  lookup?: ContainerLookup;
  /** A container's dir (for the /dev/shm of shareable IPC). */
  containerDir?: (id: string) => string;
}

/**
 * The input with the network namespace the network set-up chose: lets the rest of the input be
 * built while the network is still being set up.
 */
export function withNetworkNamespace(input: RuntimeSpecInput, netnsPath: string | 'new' | undefined): RuntimeSpecInput {
  const namespaces = (input.namespaces ?? []).filter((n) => n.type !== 'network');
  if (netnsPath === 'new') namespaces.push({ type: 'network' });
  else if (netnsPath) namespaces.push({ type: 'network', path: netnsPath });
  return { ...input, namespaces };
}

export async function specInputFor(c: ContainerRecord, ctx: SpecContext): Promise<RuntimeSpecInput> {
  const cfg = c.config;
  const hc = c.hostConfig;
  const [user] = await Promise.all([
    resolveUser(ctx.rootfs, cfg.User ?? '', (hc.GroupAdd as string[] | null | undefined) ?? []).catch((err: Error) => {
      throw invalidArgument(err.message);
    }),
    prepareWorkingDir(ctx.rootfs, cfg.WorkingDir ?? '').catch((err: Error) => {
      throw invalidArgument(err.message);
    }),
  ]);
  const args = [...(cfg.Entrypoint ?? []), ...(cfg.Cmd ?? [])];
  if (args.length === 0) throw invalidArgument('no command specified');
  const env = [...(cfg.Env ?? [])];
  if (!env.some((e) => e.startsWith('HOME='))) env.push(`HOME=${user.home}`);

  const plan = namespacePlan(c, ctx.lookup ?? (() => undefined), (id) => shmPath(ctx.containerDir?.(id) ?? ''));
  const namespaces = plan.namespaces;
  if (ctx.netnsPath === 'new') namespaces.push({ type: 'network' });
  else if (ctx.netnsPath) namespaces.push({ type: 'network', path: ctx.netnsPath });

  const mounts: ContainerMount[] = [];
  if (c.mountPoints) mounts.push(...(await specMounts(c.mountPoints)));
  else {
    for (const b of hc.Binds ?? []) mounts.push(parseBind(b));
    for (const m of hc.Mounts ?? []) mounts.push(mountFromSpec(m));
  }
  for (const [dst, opts] of Object.entries(hc.Tmpfs ?? {})) {
    mounts.push({ destination: dst, type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'noexec', ...(opts ? opts.split(',') : [])] });
  }
  const taken = new Set(mounts.map((m) => m.destination));
  const etc = (dst: string, src: string) => {
    if (!taken.has(dst)) mounts.push({ destination: dst, type: 'bind', source: src, options: ['rbind', 'rprivate', hc.ReadonlyRootfs ? 'ro' : 'rw'] });
  };
  etc('/etc/hostname', c.hostnamePath);
  etc('/etc/hosts', c.hostsPath);
  etc('/etc/resolv.conf', c.resolvConfPath);
  if (plan.shmSource && !taken.has('/dev/shm')) mounts.push({ destination: '/dev/shm', type: 'bind', source: plan.shmSource, options: ['rbind', 'rprivate', 'rw', 'nosuid', 'nodev', 'noexec'] });

  const secOpts = (hc.SecurityOpt ?? []).map((o) => o.replace('=', ':'));
  const devices: ContainerDevice[] = [];
  for (const d of hc.Devices ?? []) devices.push(await deviceFromHost(d.PathOnHost, d.PathInContainer || d.PathOnHost, d.CgroupPermissions || 'rwm'));
  const cgroups = await cgroupSpecInput(hc, ctx.cgroupVersion);

  return {
    id: c.id,
    rootfs: ctx.rootfs,
    readonlyRootfs: !!hc.ReadonlyRootfs,
    hostname: cfg.Hostname ?? c.id.slice(0, 12),
    domainname: cfg.Domainname || undefined,
    process: {
      args,
      env,
      cwd: cfg.WorkingDir || '/',
      user: { uid: user.uid, gid: user.gid, additionalGids: user.additionalGids },
      terminal: !!cfg.Tty,
      capabilities: capabilities(hc.Privileged ? [...ALL_CAPABILITIES] : [...DEFAULT_CAPABILITIES], hc.CapAdd ?? [], hc.CapDrop ?? []),
      noNewPrivileges: secOpts.includes('no-new-privileges') || secOpts.includes('no-new-privileges:true'),
      rlimits: (hc.Ulimits ?? []).map((u) => {
        const type = ULIMIT_NAMES[u.Name];
        if (!type) throw invalidArgument(`invalid ulimit type: ${u.Name}`);
        return { type, soft: u.Soft, hard: u.Hard };
      }),
      consoleSize: Array.isArray(hc.ConsoleSize) && (hc.ConsoleSize as number[])[0] ? { height: (hc.ConsoleSize as number[])[0]!, width: (hc.ConsoleSize as number[])[1]! } : undefined,
    },
    mounts,
    privileged: !!hc.Privileged,
    shmSize: hc.ShmSize || 0,
    omitShm: plan.omitShm,
    namespaces,
    resources: {
      memory: hc.Memory || undefined,
      memorySwap: hc.MemorySwap || undefined,
      memorySwappiness: typeof hc.MemorySwappiness === 'number' && hc.MemorySwappiness >= 0 && ctx.cgroupVersion === 1 ? hc.MemorySwappiness : undefined,
      nanoCpus: hc.NanoCpus || undefined,
      cpuShares: hc.CpuShares || undefined,
      cpuPeriod: hc.CpuPeriod || undefined,
      cpuQuota: hc.CpuQuota || undefined,
      cpusetCpus: hc.CpusetCpus || undefined,
      pidsLimit: hc.PidsLimit && hc.PidsLimit > 0 ? hc.PidsLimit : undefined,
      // Set by `docker update` (create still refuses them): kept for later starts.
      memoryReservation: (hc.MemoryReservation as number | undefined) || undefined,
      cpusetMems: (hc.CpusetMems as string | undefined) || undefined,
      blkioWeight: (hc.BlkioWeight as number | undefined) || undefined,
      ...cgroups.resources,
    },
    sysctls: hc.Sysctls ?? undefined,
    devices,
    deviceCgroupRules: deviceCgroupRules(hc),
    seccomp: secOpts.includes('seccomp:unconfined') || hc.Privileged ? 'unconfined' : 'default',
    init: !!hc.Init,
    cgroupVersion: ctx.cgroupVersion,
    cgroupParent: cgroups.cgroupParent,
    cgroupNamespace: cgroups.cgroupNamespace,
  };
}

function capabilities(base: string[], add: string[], drop: string[]): string[] {
  const norm = (c: string) => {
    const u = c.toUpperCase();
    return u === 'ALL' ? 'ALL' : u.startsWith('CAP_') ? u : `CAP_${u}`;
  };
  for (const c of [...add, ...drop]) {
    const n = norm(c);
    if (n !== 'ALL' && !ALL_CAPABILITIES.includes(n)) throw invalidArgument(`unknown capability: "${c}"`);
  }
  let caps = new Set(base);
  if (drop.map(norm).includes('ALL')) caps = new Set();
  for (const c of drop.map(norm)) caps.delete(c);
  if (add.map(norm).includes('ALL')) caps = new Set(ALL_CAPABILITIES);
  for (const c of add.map(norm)) if (c !== 'ALL') caps.add(c);
  return [...caps];
}

/** `src:dst[:opts]` as in `-v /host:/ctr:ro`. Named volumes are not supported yet. */
function parseBind(b: string): ContainerMount {
  const parts = b.split(':');
  if (parts.length < 2 || parts.length > 3) throw invalidArgument(`invalid volume specification: '${b}'`);
  const [src, dst, mode = ''] = parts as [string, string, string?];
  if (!src.startsWith('/')) throw invalidArgument(`named volumes are not supported by Berth yet: '${b}'`);
  if (!dst.startsWith('/')) throw invalidArgument(`invalid volume specification: '${b}': destination must be an absolute path`);
  const modes = mode ? mode.split(',') : [];
  for (const m of modes) if (!['ro', 'rw', 'z', 'Z', 'private', 'rprivate', 'shared', 'rshared', 'slave', 'rslave', 'nocopy'].includes(m)) throw invalidArgument(`invalid mode: ${m}`);
  const propagation = modes.find((m) => m.includes('private') || m.includes('shared') || m.includes('slave')) ?? 'rprivate';
  return { destination: dst, type: 'bind', source: src, options: ['rbind', propagation, modes.includes('ro') ? 'ro' : 'rw'] };
}

function mountFromSpec(m: MountSpec): ContainerMount {
  if (!m.Target?.startsWith('/')) throw invalidArgument('invalid mount config: Target must be an absolute path');
  if (m.Type === 'bind') {
    if (!m.Source?.startsWith('/')) throw invalidArgument('invalid mount config for type "bind": invalid mount path: Source must be an absolute path');
    const propagation = m.BindOptions?.Propagation || 'rprivate';
    return { destination: m.Target, type: 'bind', source: m.Source, options: [m.BindOptions?.NonRecursive ? 'bind' : 'rbind', propagation, m.ReadOnly ? 'ro' : 'rw'] };
  }
  if (m.Type === 'tmpfs') {
    const opts = ['nosuid', 'nodev', 'noexec'];
    if (m.TmpfsOptions?.SizeBytes) opts.push(`size=${m.TmpfsOptions.SizeBytes}`);
    if (m.TmpfsOptions?.Mode) opts.push(`mode=${m.TmpfsOptions.Mode.toString(8)}`);
    if (m.ReadOnly) opts.push('ro');
    return { destination: m.Target, type: 'tmpfs', source: 'tmpfs', options: opts };
  }
  throw invalidArgument(`mount type "${m.Type}" is not supported by Berth yet`);
}

async function deviceFromHost(hostPath: string, ctrPath: string, perms: string): Promise<ContainerDevice> {
  const st = await stat(hostPath).catch(() => {
    throw invalidArgument(`error gathering device information while adding custom device "${hostPath}": no such file or directory`);
  });
  if (!st.isCharacterDevice() && !st.isBlockDevice()) throw invalidArgument(`error gathering device information while adding custom device "${hostPath}": not a device node`);
  const rdev = st.rdev;
  const major = Number((BigInt(rdev) >> 8n) & 0xfffn) | Number((BigInt(rdev) >> 32n) & ~0xfffn);
  const minor = Number(BigInt(rdev) & 0xffn) | Number((BigInt(rdev) >> 12n) & ~0xffn);
  return { pathInContainer: ctrPath, type: st.isCharacterDevice() ? 'c' : 'b', major, minor, fileMode: st.mode & 0o7777, uid: st.uid, gid: st.gid, cgroupPermissions: perms };
}
