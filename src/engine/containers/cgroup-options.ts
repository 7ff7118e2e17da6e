/**
 * HostConfig options about cgroups and the kernel: block I/O weight and throttles, CPU real-time,
 * the OOM killer, kernel memory, CgroupParent, CgroupnsMode, and the fields dockerd takes on Linux
 * only to ignore or refuse (Cgroup, UsernsMode without a remap, CpuCount, CpuPercent, IOMaximum*,
 * StorageOpt, DeviceRequests). What the host supports is read from its cgroup files, as dockerd's
 * sysinfo does; unsupported settings are discarded with dockerd's warning, invalid ones are refused
 * with its error text.
 */
import { existsSync, readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { invalidArgument, internal } from '../../lib/errors.js';
import { detectCgroupLayout, type CgroupLayout } from '../../runtime/cgroups.js';
import { splitDev } from '../../runtime/devices.js';
import type { OciBlockIO, OciThrottleDevice } from '../../runtime/oci-spec.js';
import type { ContainerResources } from '../../runtime/build-spec.js';
import type { HostConfig } from './container-model.js';

/** What this host's cgroups can do (dockerd's SysInfo, the parts these options need). */
export interface CgroupSupport {
  version: 1 | 2;
  blkioWeight: boolean;
  blkioWeightDevice: boolean;
  readBps: boolean;
  writeBps: boolean;
  readIOps: boolean;
  writeIOps: boolean;
  cpuRealtime: boolean;
  oomKillDisable: boolean;
  kernelMemory: boolean;
  kernelMemoryTCP: boolean;
  cgroupNamespaces: boolean;
}

/** Reads support from the layout's files (exported for tests with a fake root). */
export function cgroupSupport(layout: CgroupLayout, has: (path: string) => boolean = existsSync): CgroupSupport {
  const cgroupNamespaces = has('/proc/self/ns/cgroup');
  if (layout.kind === 'v2') {
    const root = layout.unified ?? '/sys/fs/cgroup';
    let controllers: string[] = [];
    try {
      controllers = readFileSync(join(root, 'cgroup.controllers'), 'utf8').split(/\s+/);
    } catch {
      // No controllers file: nothing is supported.
    }
    const io = controllers.includes('io');
    return { version: 2, blkioWeight: io, blkioWeightDevice: io, readBps: io, writeBps: io, readIOps: io, writeIOps: io, cpuRealtime: false, oomKillDisable: false, kernelMemory: false, kernelMemoryTCP: false, cgroupNamespaces };
  }
  const mountOf = (controller: string) => [...layout.v1].find(([, cs]) => cs.includes(controller))?.[0];
  const file = (controller: string, name: string) => {
    const m = mountOf(controller);
    return m !== undefined && has(join(m, name));
  };
  return {
    version: 1,
    blkioWeight: file('blkio', 'blkio.weight'),
    blkioWeightDevice: file('blkio', 'blkio.weight_device'),
    readBps: file('blkio', 'blkio.throttle.read_bps_device'),
    writeBps: file('blkio', 'blkio.throttle.write_bps_device'),
    readIOps: file('blkio', 'blkio.throttle.read_iops_device'),
    writeIOps: file('blkio', 'blkio.throttle.write_iops_device'),
    cpuRealtime: file('cpu', 'cpu.rt_period_us'),
    oomKillDisable: file('memory', 'memory.oom_control'),
    kernelMemory: file('memory', 'memory.kmem.limit_in_bytes'),
    kernelMemoryTCP: file('memory', 'memory.kmem.tcp.limit_in_bytes'),
    cgroupNamespaces,
  };
}

let hostSupport: CgroupSupport | undefined;
/** This host's support, read once (after the runtime driver fixed a hybrid layout at start-up). */
export function hostCgroupSupport(): CgroupSupport {
  hostSupport ??= cgroupSupport(detectCgroupLayout());
  return hostSupport;
}

/** dockerd's `docker info` warnings for the options above that this host lacks. */
export function infoWarnings(support: CgroupSupport = hostCgroupSupport()): string[] {
  const out: string[] = [];
  const v2 = support.version === 2;
  if (!support.oomKillDisable && !v2) out.push('WARNING: No oom kill disable support');
  // As dockerd: no blkio weight warning on v1, where kernels since 5.0 have none and nothing can be done.
  if (v2 && !support.blkioWeight) out.push('WARNING: No io.weight support');
  if (v2 && !support.blkioWeightDevice) out.push('WARNING: No io.weight (per device) support');
  const throttles = [['readBps', 'io.max (rbps)', 'blkio throttle.read_bps_device'], ['writeBps', 'io.max (wbps)', 'blkio throttle.write_bps_device'], ['readIOps', 'io.max (riops)', 'blkio throttle.read_iops_device'], ['writeIOps', 'io.max (wiops)', 'blkio throttle.write_iops_device']] as const;
  for (const [key, onV2, onV1] of throttles) if (!support[key]) out.push(`WARNING: No ${v2 ? onV2 : onV1} support`);
  return out;
}

const MIN_MEMORY = 6 * 1024 * 1024;
const THROTTLES = [
  ['BlkioDeviceReadBps', 'readBps', 'Your kernel does not support BPS Block I/O read limit or the cgroup is not mounted. Block I/O BPS read limit discarded.'],
  ['BlkioDeviceWriteBps', 'writeBps', 'Your kernel does not support BPS Block I/O write limit or the cgroup is not mounted. Block I/O BPS write limit discarded.'],
  ['BlkioDeviceReadIOps', 'readIOps', 'Your kernel does not support IOPS Block read limit or the cgroup is not mounted. Block I/O IOPS read limit discarded.'],
  ['BlkioDeviceWriteIOps', 'writeIOps', 'Your kernel does not support IOPS Block write limit or the cgroup is not mounted. Block I/O IOPS write limit discarded.'],
] as const;

const num = (v: unknown) => (typeof v === 'number' ? v : 0);
const list = (v: unknown) => (Array.isArray(v) ? (v as unknown[]) : []);

/** dockerd's blkio weight check, shared by create and update; discards it (with the warning) where unsupported. */
export function checkBlkioWeight(r: { BlkioWeight?: number }, support: CgroupSupport, warnings: string[]): void {
  if (num(r.BlkioWeight) > 0 && !support.blkioWeight) {
    warnings.push('Your kernel does not support Block I/O weight or the cgroup is not mounted. Weight discarded.');
    r.BlkioWeight = 0;
  }
  const w = num(r.BlkioWeight);
  if (w > 0 && (w < 10 || w > 1000)) throw invalidArgument('Range of blkio weight is from 10 to 1000');
}

/**
 * Checks the options above at create, normalising `hc` in place as dockerd stores it (discarded
 * settings zeroed, the cgroup namespace mode defaulted); returns dockerd's warnings.
 */
export function validateCgroupOptions(hc: HostConfig, support: CgroupSupport = hostCgroupSupport()): string[] {
  const warnings: string[] = [];
  // runconfig's checks, made while decoding the request.
  if (num(hc.IOMaximumBandwidth) !== 0) throw invalidArgument('invalid option: QoS maximum bandwidth configuration is not supported on linux');
  if (num(hc.IOMaximumIOps) !== 0) throw invalidArgument('invalid option: QoS maximum IOPs configuration is not supported on linux');
  const rtPeriod = num(hc.CpuRealtimePeriod);
  const rtRuntime = num(hc.CpuRealtimeRuntime);
  if ((rtPeriod !== 0 || rtRuntime !== 0) && !support.cpuRealtime) throw invalidArgument('kernel does not support CPU real-time scheduler');
  if (rtPeriod !== 0 && rtRuntime !== 0 && rtRuntime > rtPeriod) throw invalidArgument('cpu real-time runtime cannot be higher than cpu real-time period');

  // verifyPlatformContainerResources.
  const kmem = num(hc.KernelMemory);
  if (kmem > 0) {
    if (!support.kernelMemory) {
      warnings.push('Your kernel does not support kernel memory limit capabilities or the cgroup is not mounted. Limitation discarded.');
      hc.KernelMemory = 0;
    } else if (kmem < MIN_MEMORY) {
      throw invalidArgument('Minimum kernel memory limit allowed is 6MB');
    }
  }
  if (typeof hc.OomKillDisable === 'boolean' && !support.oomKillDisable) {
    if (hc.OomKillDisable) warnings.push('Your kernel does not support OomKillDisable. OomKillDisable discarded.');
    delete hc.OomKillDisable;
  }
  if (hc.OomKillDisable === true && !num(hc.Memory)) {
    warnings.push('OOM killer is disabled for the container, but no memory limit is set, this can result in the system running out of resources.');
  }
  if (num(hc.CpuPercent) > 0) {
    warnings.push('linux does not support CPU percent. Percent discarded.');
    hc.CpuPercent = 0;
  }
  checkBlkioWeight(hc as { BlkioWeight?: number }, support, warnings);
  if (list(hc.BlkioWeightDevice).length && !support.blkioWeightDevice) {
    warnings.push('Your kernel does not support Block I/O weight_device or the cgroup is not mounted. Weight-device discarded.');
    hc.BlkioWeightDevice = [];
  }
  for (const [field, key, text] of THROTTLES) {
    if (list(hc[field]).length && !support[key]) {
      warnings.push(text);
      hc[field] = [];
    }
  }

  // verifyPlatformContainerSettings and adaptContainerSettings.
  const ns = hc.CgroupnsMode ?? '';
  if (ns !== '' && ns !== 'private' && ns !== 'host') throw invalidArgument(`invalid cgroup namespace mode: ${String(ns)}`);
  if (ns === '') hc.CgroupnsMode = support.version === 2 ? 'private' : 'host';
  if (hc.CgroupnsMode === 'private' && !support.cgroupNamespaces) warnings.push('Your kernel does not support cgroup namespaces.  Cgroup namespace setting discarded.');
  hc.OomKillDisable ??= false;

  // The storage driver's check when it makes the container's layer (a 500 in dockerd too).
  for (const key of Object.keys((hc.StorageOpt as Record<string, string> | null | undefined) ?? {})) {
    if (key === 'size') throw internal("--storage-opt is supported only for overlay over xfs with 'pquota' mount option");
    throw internal(`Unknown option ${key.toLowerCase()}`);
  }
  return warnings;
}

interface DeviceRate {
  Path?: string;
  Rate?: number;
  Weight?: number;
}

async function deviceNumbers(path: string): Promise<{ major: number; minor: number }> {
  const st = await stat(path).catch((err: NodeJS.ErrnoException) => {
    throw invalidArgument(`stat ${path}: ${err.code === 'ENOENT' ? 'no such file or directory' : err.message}`);
  });
  return splitDev(st.rdev);
}

async function throttles(v: unknown): Promise<OciThrottleDevice[] | undefined> {
  const devs = list(v) as DeviceRate[];
  if (!devs.length) return undefined;
  return Promise.all(devs.map(async (d) => ({ ...(await deviceNumbers(d.Path ?? '')), rate: num(d.Rate) })));
}

/** dockerd's `could not select device driver` for requests no registered driver takes (Berth has none). */
function checkDeviceRequests(hc: HostConfig): void {
  for (const r of list(hc.DeviceRequests) as { Driver?: string; Capabilities?: string[][] | null }[]) {
    const caps = (r.Capabilities ?? []).map((c) => `[${c.join(' ')}]`).join(' ');
    throw invalidArgument(`could not select device driver ${JSON.stringify(r.Driver ?? '')} with capabilities: [${caps}]`);
  }
}

/** The parent as the cgroupfs driver joins it: rooted, with `..` unable to climb out. */
function cgroupParent(parent: unknown): string | undefined {
  if (typeof parent !== 'string' || !parent) return undefined;
  return posix.normalize(posix.join('/', parent)).replace(/\/+$/, '') || undefined;
}

/**
 * The spec input these options give, resolved at start as dockerd does (device paths are looked up
 * on the host then, so a missing device fails the start).
 */
export async function cgroupSpecInput(hc: HostConfig, cgroupVersion: 1 | 2): Promise<{ resources: ContainerResources; cgroupParent?: string; cgroupNamespace: boolean }> {
  checkDeviceRequests(hc);
  const blockIO: OciBlockIO = {};
  if (num(hc.BlkioWeight) > 0) blockIO.weight = num(hc.BlkioWeight);
  const weights = list(hc.BlkioWeightDevice) as DeviceRate[];
  if (weights.length) blockIO.weightDevice = await Promise.all(weights.map(async (d) => ({ ...(await deviceNumbers(d.Path ?? '')), weight: num(d.Weight) })));
  const [rb, wb, ri, wi] = await Promise.all([hc.BlkioDeviceReadBps, hc.BlkioDeviceWriteBps, hc.BlkioDeviceReadIOps, hc.BlkioDeviceWriteIOps].map(throttles));
  if (rb) blockIO.throttleReadBpsDevice = rb;
  if (wb) blockIO.throttleWriteBpsDevice = wb;
  if (ri) blockIO.throttleReadIOPSDevice = ri;
  if (wi) blockIO.throttleWriteIOPSDevice = wi;
  const resources: ContainerResources = {};
  if (Object.keys(blockIO).length) resources.blockIO = blockIO;
  if (num(hc.CpuRealtimePeriod) > 0) resources.cpuRealtimePeriod = num(hc.CpuRealtimePeriod);
  if (num(hc.CpuRealtimeRuntime) !== 0) resources.cpuRealtimeRuntime = num(hc.CpuRealtimeRuntime);
  if (hc.OomKillDisable === true) resources.oomKillDisable = true;
  if (num(hc.KernelMemory) > 0) resources.kernelMemory = num(hc.KernelMemory);
  if (num(hc.KernelMemoryTCP) > 0 && cgroupVersion === 1) resources.kernelMemoryTCP = num(hc.KernelMemoryTCP);
  const mode = hc.CgroupnsMode || (cgroupVersion === 2 ? 'private' : 'host');
  return { resources, cgroupParent: cgroupParent(hc.CgroupParent), cgroupNamespace: mode === 'private' };
}
