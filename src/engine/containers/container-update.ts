/**
 * `docker update`: the resource fields and restart policy a running or stopped container may change,
 * merged into its HostConfig as dockerd merges them (a zero value leaves a field as it was), and the
 * cgroup limits the runtime's `update` applies to a running container.
 */
import { conflict, invalidArgument } from '../../lib/errors.js';
import type { OciResources } from '../../runtime/oci-spec.js';
import type { HostConfig } from './container-model.js';

export interface UpdateRequest {
  Memory?: number;
  MemorySwap?: number;
  MemoryReservation?: number;
  NanoCpus?: number;
  CpuShares?: number;
  CpuPeriod?: number;
  CpuQuota?: number;
  CpusetCpus?: string;
  CpusetMems?: string;
  PidsLimit?: number | null;
  BlkioWeight?: number;
  RestartPolicy?: { Name?: string; MaximumRetryCount?: number };
}

const MIN_MEMORY = 6 * 1024 * 1024;
const NUMBER_FIELDS = ['Memory', 'MemorySwap', 'MemoryReservation', 'NanoCpus', 'CpuShares', 'CpuPeriod', 'CpuQuota', 'BlkioWeight'] as const;

/** Reads the request body's fields; wrong types are a 400, unknown fields are ignored. */
export function parseUpdate(body: Record<string, unknown>): UpdateRequest {
  const out: UpdateRequest = {};
  for (const k of NUMBER_FIELDS) {
    const v = body[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isInteger(v)) throw invalidArgument(`invalid JSON: ${k} must be an integer`);
    out[k] = v;
  }
  for (const k of ['CpusetCpus', 'CpusetMems'] as const) {
    const v = body[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') throw invalidArgument(`invalid JSON: ${k} must be a string`);
    out[k] = v;
  }
  if (body.PidsLimit !== undefined && body.PidsLimit !== null) {
    if (typeof body.PidsLimit !== 'number' || !Number.isInteger(body.PidsLimit)) throw invalidArgument('invalid JSON: PidsLimit must be an integer');
    out.PidsLimit = body.PidsLimit;
  }
  const rp = body.RestartPolicy;
  if (rp !== undefined && rp !== null) {
    if (typeof rp !== 'object' || Array.isArray(rp)) throw invalidArgument('invalid JSON: RestartPolicy must be an object');
    out.RestartPolicy = rp as UpdateRequest['RestartPolicy'];
  }
  return out;
}

/** dockerd's checks of the request alone (verifyContainerSettings with update=true). */
function verify(r: UpdateRequest): void {
  if (r.Memory && r.Memory < MIN_MEMORY) throw invalidArgument('Minimum memory limit allowed is 6MB');
  if (r.Memory && r.Memory > 0 && r.MemorySwap && r.MemorySwap > 0 && r.MemorySwap < r.Memory) throw invalidArgument('Minimum memoryswap limit should be larger than memory limit, see usage');
  if (r.MemoryReservation && r.MemoryReservation > 0 && r.MemoryReservation < MIN_MEMORY) throw invalidArgument('Minimum memory reservation allowed is 6MB');
  if (r.Memory && r.MemoryReservation && r.Memory > 0 && r.MemoryReservation > 0 && r.Memory < r.MemoryReservation) throw invalidArgument('Minimum memory limit can not be less than memory reservation limit, see usage');
  if (r.NanoCpus && (r.CpuPeriod || r.CpuQuota)) throw invalidArgument('Conflicting options: Nano CPUs and CPU Period cannot both be set');
  if (r.BlkioWeight && (r.BlkioWeight < 10 || r.BlkioWeight > 1000)) throw invalidArgument('Range of blkio weight is from 10 to 1000');
  if (r.CpuPeriod && (r.CpuPeriod < 1000 || r.CpuPeriod > 1_000_000)) throw invalidArgument('CPU cfs period can not be less than 1ms (i.e. 1000) or larger than 1s (i.e. 1000000)');
  if (r.CpuQuota && r.CpuQuota > 0 && r.CpuQuota < 1000) throw invalidArgument('CPU cfs quota can not be less than 1ms (i.e. 1000)');
  const rp = r.RestartPolicy;
  if (rp?.Name && !['no', 'always', 'unless-stopped', 'on-failure'].includes(rp.Name)) throw invalidArgument(`invalid restart policy '${rp.Name}'`);
  if (rp?.MaximumRetryCount && rp.Name !== 'on-failure') throw invalidArgument(`invalid restart policy: maximum retry count can only be used with 'on-failure'`);
  if (rp?.MaximumRetryCount && rp.MaximumRetryCount < 0) throw invalidArgument('invalid restart policy: maximum retry count cannot be negative');
}

/**
 * The container's HostConfig after the update (a new object; the caller keeps the old one until the
 * runtime accepted the change). Conflicts with what is set already are a 409, as dockerd.
 */
export function mergeUpdate(id: string, hc: HostConfig, r: UpdateRequest): HostConfig {
  verify(r);
  const cur = hc as HostConfig & Record<string, number | string | undefined>;
  const fail = (msg: string) => conflict(`Cannot update container ${id}: ${msg}`);
  if (r.NanoCpus && r.NanoCpus > 0 && (cur.CpuPeriod ?? 0) > 0) throw fail('Conflicting options: Nano CPUs cannot be updated as CPU Period has already been set');
  if (r.NanoCpus && r.NanoCpus > 0 && (cur.CpuQuota ?? 0) > 0) throw fail('Conflicting options: Nano CPUs cannot be updated as CPU Quota has already been set');
  if (r.CpuPeriod && r.CpuPeriod > 0 && (cur.NanoCpus ?? 0) > 0) throw fail('Conflicting options: CPU Period cannot be updated as NanoCPUs has already been set');
  if (r.CpuQuota && r.CpuQuota > 0 && (cur.NanoCpus ?? 0) > 0) throw fail('Conflicting options: CPU Quota cannot be updated as NanoCPUs has already been set');
  if (r.Memory && r.Memory > ((cur.MemorySwap as number | undefined) ?? 0) && !r.MemorySwap && (cur.MemorySwap ?? 0) !== 0 && cur.MemorySwap !== -1) {
    throw fail('Memory limit should be smaller than already set memoryswap limit, update the memoryswap at the same time');
  }
  const next: Record<string, unknown> = { ...hc };
  for (const k of [...NUMBER_FIELDS, 'CpusetCpus', 'CpusetMems'] as const) if (r[k]) next[k] = r[k];
  if (r.PidsLimit !== undefined && r.PidsLimit !== null) next.PidsLimit = r.PidsLimit;
  if (r.RestartPolicy?.Name) {
    if (hc.AutoRemove && r.RestartPolicy.Name !== 'no') throw fail('Restart policy cannot be updated because AutoRemove is enabled for the container');
    next.RestartPolicy = { Name: r.RestartPolicy.Name, MaximumRetryCount: r.RestartPolicy.MaximumRetryCount ?? 0 };
  }
  return next as HostConfig;
}

/** The cgroup limits of a HostConfig, as the runtime's `update --resources` takes them. */
export function updateResources(hc: HostConfig): OciResources {
  const h = hc as HostConfig & Record<string, number | string | undefined>;
  const n = (k: string) => (typeof h[k] === 'number' ? (h[k] as number) : 0);
  const res: OciResources = {};
  const memory: NonNullable<OciResources['memory']> = {};
  if (n('Memory') > 0) {
    memory.limit = n('Memory');
    memory.swap = n('MemorySwap') === 0 ? n('Memory') * 2 : n('MemorySwap');
  }
  if (n('MemoryReservation') > 0) memory.reservation = n('MemoryReservation');
  if (Object.keys(memory).length) res.memory = memory;
  const cpu: NonNullable<OciResources['cpu']> = {};
  if (n('CpuShares') > 0) cpu.shares = n('CpuShares');
  if (n('NanoCpus') > 0) {
    cpu.period = 100_000;
    cpu.quota = Math.round((n('NanoCpus') * cpu.period) / 1e9);
  } else {
    if (n('CpuPeriod') > 0) cpu.period = n('CpuPeriod');
    if (n('CpuQuota') !== 0) cpu.quota = n('CpuQuota');
  }
  if (h.CpusetCpus) cpu.cpus = String(h.CpusetCpus);
  if (h.CpusetMems) cpu.mems = String(h.CpusetMems);
  if (Object.keys(cpu).length) res.cpu = cpu;
  // 0 and -1 mean unlimited; the runtime takes -1 for "max".
  if (h.PidsLimit !== undefined && h.PidsLimit !== null) res.pids = { limit: n('PidsLimit') > 0 ? n('PidsLimit') : -1 };
  if (n('BlkioWeight') > 0) res.blockIO = { weight: n('BlkioWeight') };
  return res;
}
