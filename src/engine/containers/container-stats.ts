/**
 * `docker stats`: resource usage samples of a running container in dockerd's JSON shape, from its
 * cgroup (v1 or v2 file names), /proc/stat (the host's CPU time, the denominator of CPU %) and
 * /proc/<pid>/net/dev (the container's network namespace as seen by its init process).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cpus, totalmem } from 'node:os';
import { controllerDir } from '../../runtime/cgroups.js';
import type { RuntimeDriver } from '../../runtime/runtime-driver.js';
import { ZERO_TIME, type ContainerRecord } from './container-model.js';
import type { BlkioEntry, CpuStats, NetStats, StatsJson } from '../../lib/docker-api-types.js';

/** USER_HZ, the unit of /proc/stat and cpuacct.stat: 100 on every Linux port Berth runs on. */
const CLOCK_TICKS = 100;
const NS_PER_TICK = 1e9 / CLOCK_TICKS;

export type { CpuStats, StatsJson } from '../../lib/docker-api-types.js';

const BLKIO_KEYS = ['io_service_bytes_recursive', 'io_serviced_recursive', 'io_queue_recursive', 'io_service_time_recursive', 'io_wait_time_recursive', 'io_merged_recursive', 'io_time_recursive', 'sectors_recursive'];

function emptyCpu(): CpuStats {
  return { cpu_usage: { total_usage: 0, usage_in_kernelmode: 0, usage_in_usermode: 0 }, throttling_data: { periods: 0, throttled_periods: 0, throttled_time: 0 } };
}

/** What dockerd sends for a container that is not running: names and zeros. */
export function emptyStats(c: ContainerRecord): StatsJson {
  return {
    read: ZERO_TIME,
    preread: ZERO_TIME,
    pids_stats: {},
    blkio_stats: Object.fromEntries(BLKIO_KEYS.map((k) => [k, null])),
    num_procs: 0,
    storage_stats: {},
    cpu_stats: emptyCpu(),
    precpu_stats: emptyCpu(),
    memory_stats: {},
    name: `/${c.name}`,
    id: c.id,
  };
}

/**
 * One sample; `previous` (the sample before, if any) becomes precpu_stats and preread. Undefined
 * when the container has no cgroup any more (it just exited).
 */
export async function sampleStats(runtime: RuntimeDriver, c: ContainerRecord, previous?: StatsJson): Promise<StatsJson | undefined> {
  const base = await runtime.stats.read(c.id).catch(() => undefined);
  if (!base) return undefined;
  const layout = runtime.stats.cgroupLayout;
  const path = await runtime.stats.cgroupsPath(c.id);
  const [cpu, systemCpu, networks, blkio] = await Promise.all([
    cpuDetails(layout, path, base.cpuUsageNs),
    systemCpuUsage(),
    c.state.pid ? networkStats(c.state.pid) : Promise.resolve(undefined),
    blkioStats(layout, path),
  ]);
  cpu.system_cpu_usage = systemCpu;
  cpu.online_cpus = cpu.cpu_usage.percpu_usage?.filter((n) => n > 0).length || cpus().length;
  const v1 = layout.kind !== 'v2';
  const memDir = controllerDir(layout, 'memory', path);
  const [maxUsage, failcnt] = v1 && memDir ? await Promise.all([readNumber(join(memDir, 'memory.max_usage_in_bytes')), readNumber(join(memDir, 'memory.failcnt'))]) : [undefined, undefined];
  const out: StatsJson = {
    read: base.readAt.toISOString(),
    preread: previous?.read ?? ZERO_TIME,
    pids_stats: { current: base.pids, ...(base.pidsLimit !== undefined ? { limit: base.pidsLimit } : {}) },
    blkio_stats: blkio,
    num_procs: 0,
    storage_stats: {},
    cpu_stats: cpu,
    precpu_stats: previous?.cpu_stats ?? emptyCpu(),
    memory_stats: {
      usage: base.memoryUsage,
      ...(maxUsage !== undefined ? { max_usage: maxUsage } : {}),
      stats: base.memoryStat,
      ...(failcnt !== undefined ? { failcnt } : {}),
      // An unlimited container may use the whole host.
      limit: base.memoryLimit ?? totalmem(),
    },
    name: `/${c.name}`,
    id: c.id,
  };
  if (networks && Object.keys(networks).length > 0) out.networks = networks;
  return out;
}

type Layout = RuntimeDriver['stats']['cgroupLayout'];

async function cpuDetails(layout: Layout, path: string, totalNs: number): Promise<CpuStats> {
  const cpu = emptyCpu();
  cpu.cpu_usage.total_usage = totalNs;
  if (layout.kind === 'v2') {
    const dir = controllerDir(layout, 'cpu', path)!;
    const stat = flatKeyed(await readText(join(dir, 'cpu.stat')));
    cpu.cpu_usage.usage_in_usermode = (stat.user_usec ?? 0) * 1000;
    cpu.cpu_usage.usage_in_kernelmode = (stat.system_usec ?? 0) * 1000;
    cpu.throttling_data = { periods: stat.nr_periods ?? 0, throttled_periods: stat.nr_throttled ?? 0, throttled_time: (stat.throttled_usec ?? 0) * 1000 };
    return cpu;
  }
  const acct = controllerDir(layout, 'cpuacct', path);
  if (acct) {
    const [stat, percpu] = await Promise.all([readText(join(acct, 'cpuacct.stat')), readText(join(acct, 'cpuacct.usage_percpu'))]);
    const s = flatKeyed(stat);
    cpu.cpu_usage.usage_in_usermode = (s.user ?? 0) * NS_PER_TICK;
    cpu.cpu_usage.usage_in_kernelmode = (s.system ?? 0) * NS_PER_TICK;
    const per = (percpu ?? '').trim().split(/\s+/).filter(Boolean).map(Number);
    if (per.length) cpu.cpu_usage.percpu_usage = per;
  }
  const cpuDir = controllerDir(layout, 'cpu', path);
  if (cpuDir) {
    const s = flatKeyed(await readText(join(cpuDir, 'cpu.stat')));
    cpu.throttling_data = { periods: s.nr_periods ?? 0, throttled_periods: s.nr_throttled ?? 0, throttled_time: s.throttled_time ?? 0 };
  }
  return cpu;
}

/** The host's CPU time in ns: user, nice, system, idle, iowait, irq and softirq of /proc/stat's "cpu" line. */
export async function systemCpuUsage(): Promise<number> {
  const text = (await readText('/proc/stat')) ?? '';
  const line = text.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return 0;
  const ticks = line.trim().split(/\s+/).slice(1, 8).reduce((n, f) => n + Number(f), 0);
  return ticks * NS_PER_TICK;
}

/** Interfaces of the process's network namespace, loopback left out. */
export async function networkStats(pid: number): Promise<Record<string, NetStats> | undefined> {
  const text = await readText(`/proc/${pid}/net/dev`);
  if (!text) return undefined;
  const out: Record<string, NetStats> = {};
  for (const line of text.split('\n').slice(2)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    if (name === 'lo') continue;
    const f = line.slice(colon + 1).trim().split(/\s+/).map(Number);
    out[name] = { rx_bytes: f[0]!, rx_packets: f[1]!, rx_errors: f[2]!, rx_dropped: f[3]!, tx_bytes: f[8]!, tx_packets: f[9]!, tx_errors: f[10]!, tx_dropped: f[11]! };
  }
  return out;
}

async function blkioStats(layout: Layout, path: string): Promise<Record<string, BlkioEntry[] | null>> {
  const out: Record<string, BlkioEntry[] | null> = Object.fromEntries(BLKIO_KEYS.map((k) => [k, null]));
  if (layout.kind === 'v2') {
    const text = await readText(join(controllerDir(layout, 'io', path)!, 'io.stat'));
    const bytes: BlkioEntry[] = [];
    const ios: BlkioEntry[] = [];
    for (const line of (text ?? '').split('\n')) {
      const [dev, ...kv] = line.trim().split(/\s+/);
      const m = /^(\d+):(\d+)$/.exec(dev ?? '');
      if (!m) continue;
      const v = Object.fromEntries(kv.map((p) => p.split('=')).map(([k, n]) => [k, Number(n)]));
      const major = Number(m[1]);
      const minor = Number(m[2]);
      bytes.push({ major, minor, op: 'read', value: v.rbytes ?? 0 }, { major, minor, op: 'write', value: v.wbytes ?? 0 });
      ios.push({ major, minor, op: 'read', value: v.rios ?? 0 }, { major, minor, op: 'write', value: v.wios ?? 0 });
    }
    if (bytes.length) {
      out.io_service_bytes_recursive = bytes;
      out.io_serviced_recursive = ios;
    }
    return out;
  }
  const dir = controllerDir(layout, 'blkio', path);
  if (!dir) return out;
  const parse = (text: string | undefined): BlkioEntry[] | null => {
    const entries: BlkioEntry[] = [];
    for (const line of (text ?? '').split('\n')) {
      const m = /^(\d+):(\d+) (\w+) (\d+)$/.exec(line.trim());
      if (m) entries.push({ major: Number(m[1]), minor: Number(m[2]), op: m[3]!, value: Number(m[4]) });
    }
    return entries.length ? entries : null;
  };
  const [bytes, ios] = await Promise.all([
    readText(join(dir, 'blkio.throttle.io_service_bytes_recursive')),
    readText(join(dir, 'blkio.throttle.io_serviced_recursive')),
  ]);
  out.io_service_bytes_recursive = parse(bytes);
  out.io_serviced_recursive = parse(ios);
  return out;
}

function flatKeyed(text: string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of (text ?? '').split('\n')) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined) out[k] = Number(v);
  }
  return out;
}

async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}

async function readNumber(path: string): Promise<number | undefined> {
  const t = (await readText(path))?.trim();
  return t ? Number(t) : undefined;
}
