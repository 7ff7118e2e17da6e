/**
 * Turns a create request into a container's stored config: validates what Berth supports, refuses
 * with a 400 what it does not, merges the image config in as dockerd does, and makes the new record.
 */
import { join } from 'node:path';
import { invalidArgument } from '../../lib/errors.js';
import type { ImageConfig } from '../../lib/oci.js';
import type { MountPointRecord } from '../volumes/volume-model.js';
import { ZERO_TIME, type ContainerRecord, type CreateConfig, type HostConfig } from './container-model.js';
import { LOG_DRIVERS, validateOptionFields } from './container-options.js';
import { validateCgroupOptions } from './cgroup-options.js';

const DEFAULT_PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** dockerd's merge of the image's config into the user's (daemon/commit.go semantics). */
export function mergeImageConfig(user: CreateConfig, image: ImageConfig): CreateConfig {
  const ic = image.config ?? {};
  const out: CreateConfig = { ...user };
  if (!out.User) out.User = ic.User ?? '';
  if (ic.ExposedPorts) out.ExposedPorts = { ...ic.ExposedPorts, ...(out.ExposedPorts ?? {}) };
  if (!out.Env?.length) {
    out.Env = ic.Env ? [...ic.Env] : [];
  } else {
    const keys = new Set(out.Env.map(envKey));
    out.Env = [...out.Env, ...(ic.Env ?? []).filter((e) => !keys.has(envKey(e)))];
  }
  if (!out.Env.some((e) => envKey(e) === 'PATH')) out.Env = [DEFAULT_PATH, ...out.Env];
  if (ic.Labels) out.Labels = { ...ic.Labels, ...(out.Labels ?? {}) };
  // An explicit empty entrypoint ([""] from `--entrypoint ""`) clears the image's.
  const clearedEntrypoint = Array.isArray(out.Entrypoint) && out.Entrypoint.length === 1 && out.Entrypoint[0] === '';
  if (clearedEntrypoint) out.Entrypoint = null;
  if (!out.Entrypoint?.length) {
    if (!out.Cmd?.length) out.Cmd = ic.Cmd ?? null;
    if (out.Entrypoint === undefined || (out.Entrypoint === null && !clearedEntrypoint)) out.Entrypoint = ic.Entrypoint ?? null;
  }
  if (!out.Healthcheck) {
    if (ic.Healthcheck) out.Healthcheck = { ...ic.Healthcheck };
  } else if (ic.Healthcheck) {
    const h = { ...out.Healthcheck };
    if (!h.Test?.length) h.Test = ic.Healthcheck.Test;
    for (const k of ['Interval', 'Timeout', 'StartPeriod', 'StartInterval', 'Retries'] as const) if (!h[k]) h[k] = ic.Healthcheck[k];
    out.Healthcheck = h;
  }
  if (!out.WorkingDir) out.WorkingDir = ic.WorkingDir ?? '';
  if (ic.Volumes) out.Volumes = { ...ic.Volumes, ...(out.Volumes ?? {}) };
  if (!out.StopSignal && ic.StopSignal) out.StopSignal = ic.StopSignal;
  if (!out.OnBuild && ic.OnBuild) out.OnBuild = ic.OnBuild;
  if (!out.Entrypoint?.length && !out.Cmd?.length) throw invalidArgument('no command specified');
  return out;
}

const envKey = (e: string) => {
  const eq = e.indexOf('=');
  return eq < 0 ? e : e.slice(0, eq);
};

/** Checks a create request's HostConfig; returns dockerd's warnings for what it discards. */
export function validateHostConfig(hc: HostConfig): string[] {
  const warnings = [...validateOptionFields(hc), ...validateCgroupOptions(hc)];
  const rp = hc.RestartPolicy;
  if (rp) {
    const name = rp.Name ?? '';
    if (!['', 'no', 'always', 'on-failure', 'unless-stopped'].includes(name)) throw invalidArgument(`invalid restart policy '${name}'`);
    if ((rp.MaximumRetryCount ?? 0) < 0) throw invalidArgument('invalid value for MaximumRetryCount: must be a positive integer');
    if (name !== 'on-failure' && (rp.MaximumRetryCount ?? 0) > 0) throw invalidArgument(`invalid restart policy: maximum retry count can only be used with 'on-failure'`);
    if (hc.AutoRemove && name !== '' && name !== 'no') throw invalidArgument("can't create 'AutoRemove' container with restart policy");
  }
  if (hc.Runtime && hc.Runtime !== 'crun' && hc.Runtime !== 'runc') throw invalidArgument(`unknown or invalid runtime name: ${hc.Runtime}`);
  for (const opt of hc.SecurityOpt ?? []) {
    const o = opt.replace('=', ':');
    if (o === 'no-new-privileges' || o === 'no-new-privileges:true' || o === 'no-new-privileges:false' || o === 'seccomp:unconfined' || o === 'label:disable' || o === 'apparmor:unconfined') continue;
    throw invalidArgument(`security option ${JSON.stringify(opt)} is not supported by Berth yet (supported: no-new-privileges, seccomp=unconfined)`);
  }
  const log = hc.LogConfig;
  if (log?.Type && !LOG_DRIVERS.includes(log.Type)) throw invalidArgument(`logging driver ${log.Type} is not supported by Berth`);
  for (const k of ['Memory', 'MemorySwap', 'NanoCpus', 'CpuShares', 'CpuQuota', 'CpuPeriod', 'ShmSize'] as const) {
    const v = hc[k];
    if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isInteger(v))) throw invalidArgument(`invalid value for HostConfig.${k}: must be an integer`);
  }
  if (hc.Memory && hc.Memory > 0 && hc.Memory < 6 * 1024 * 1024) throw invalidArgument('Minimum memory limit allowed is 6MB');
  if (hc.MemorySwap && hc.MemorySwap > 0 && hc.Memory && hc.MemorySwap < hc.Memory) throw invalidArgument('Minimum memoryswap limit should be larger than memory limit, see usage');
  if (hc.NanoCpus && (hc.CpuQuota || hc.CpuPeriod)) throw invalidArgument('Conflicting options: Nano CPUs and CPU Period cannot both be set');
  if (hc.ShmSize !== undefined && hc.ShmSize < 0) throw invalidArgument('SHM size can not be less than 0');
  return warnings;
}

export const NAME_RE = /^\/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;

export function validateName(name: string): string {
  if (!NAME_RE.test(name)) throw invalidArgument(`Invalid container name (${name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed`);
  return name.startsWith('/') ? name.slice(1) : name;
}

const ADJECTIVES = ['brisk', 'calm', 'clever', 'eager', 'fond', 'gentle', 'hardy', 'keen', 'lucid', 'merry', 'nimble', 'placid', 'quiet', 'rapid', 'sturdy', 'tidy', 'upbeat', 'vivid', 'wise', 'zesty', 'bold', 'cosy', 'deft', 'frank'];
const NOUNS = ['anchor', 'beacon', 'buoy', 'capstan', 'cove', 'dinghy', 'ferry', 'galley', 'harbor', 'jetty', 'keel', 'lagoon', 'mooring', 'pier', 'quay', 'rudder', 'schooner', 'skiff', 'tender', 'wharf', 'yawl', 'bollard', 'cutter', 'dory'];

/** A random `adjective_noun` name, like dockerd's generated names. */
export function generateName(taken: (n: string) => boolean): string {
  for (let i = 0; i < 20; i++) {
    const n = `${ADJECTIVES[Math.floor(Math.random() * ADJECTIVES.length)]}_${NOUNS[Math.floor(Math.random() * NOUNS.length)]}`;
    const name = i < 5 ? n : `${n}${Math.floor(Math.random() * 1000)}`;
    if (!taken(name)) return name;
  }
  return `berth_${Date.now().toString(36)}${Math.floor(Math.random() * 1e6)}`;
}

/** A new container's record, `created`, with its files in `dir`; `config` and `hostConfig` as merged and normalized. */
export function newContainerRecord(f: {
  id: string;
  name: string;
  imageId: string;
  config: CreateConfig;
  hostConfig: HostConfig;
  networkingConfig: Record<string, unknown>;
  mountPoints: MountPointRecord[];
  dir: string;
  defaultRuntime: 'crun' | 'runc';
}): ContainerRecord {
  const c: ContainerRecord = {
    id: f.id,
    name: f.name,
    created: new Date().toISOString(),
    imageId: f.imageId,
    config: f.config,
    hostConfig: f.hostConfig,
    networkingConfig: f.networkingConfig,
    state: { status: 'created', pid: 0, exitCode: 0, error: '', oomKilled: false, startedAt: ZERO_TIME, finishedAt: ZERO_TIME },
    runtime: (f.hostConfig.Runtime as 'crun' | 'runc' | undefined) || f.defaultRuntime,
    restartCount: 0,
    manuallyStopped: false,
    network: { endpoints: {}, ports: {}, sandboxKey: '' },
    logPath: join(f.dir, 'ctr.log'),
    hostnamePath: join(f.dir, 'hostname'),
    hostsPath: join(f.dir, 'hosts'),
    resolvConfPath: join(f.dir, 'resolv.conf'),
    mountPoints: f.mountPoints,
  };
  if (f.config.Healthcheck?.Test?.length && f.config.Healthcheck.Test[0] !== 'NONE') {
    c.state.health = { status: 'starting', failingStreak: 0, log: [] };
  }
  return c;
}
