/**
 * HostConfig options dockerd takes that need a check at create and a small translation at start:
 * GroupAdd, MemorySwappiness, DeviceCgroupRules, VolumeDriver, Isolation and the log drivers.
 * Texts and status codes are dockerd's.
 */
import { existsSync } from 'node:fs';
import { invalidArgument, notFound } from '../../lib/errors.js';
import type { HostConfig } from './container-model.js';
import type { OciDeviceCgroupRule } from '../../runtime/oci-spec.js';

/** Log drivers Berth keeps: all three write the runtime's log file; `none` keeps nothing. */
export const LOG_DRIVERS = ['json-file', 'k8s-file', 'local', 'none'];

const DEVICE_RULE_RE = /^([acb]) ([0-9]+|\*):([0-9]+|\*) ([rwm]{1,3})$/;

let swappinessSupported: boolean | undefined;
/** As dockerd's sysinfo: the memory controller's swappiness file exists only on cgroup v1. */
function memorySwappinessSupported(): boolean {
  swappinessSupported ??= existsSync('/sys/fs/cgroup/memory/memory.swappiness');
  return swappinessSupported;
}

/** Checks (and normalises in place) the options above; returns dockerd's warnings. */
export function validateOptionFields(hc: HostConfig): string[] {
  const warnings: string[] = [];
  const swappiness = hc.MemorySwappiness;
  // The CLI sends -1 for "unset"; dockerd stores that as unset.
  if (swappiness === -1 || swappiness === null) delete hc.MemorySwappiness;
  else if (swappiness !== undefined) {
    if (typeof swappiness !== 'number' || !Number.isInteger(swappiness)) throw invalidArgument('invalid value for HostConfig.MemorySwappiness: must be an integer');
    if (!memorySwappinessSupported()) {
      warnings.push('Your kernel does not support memory swappiness capabilities or the cgroup is not mounted. Memory swappiness discarded.');
      delete hc.MemorySwappiness;
    } else if (swappiness < 0 || swappiness > 100) {
      throw invalidArgument(`Invalid value: ${swappiness}, valid memory swappiness range is 0-100`);
    }
  }
  for (const g of (hc.GroupAdd as unknown[] | null | undefined) ?? []) {
    if (typeof g !== 'string' || g === '') throw invalidArgument(`invalid GroupAdd entry: ${JSON.stringify(g)}`);
  }
  deviceCgroupRules(hc);
  const driver = hc.VolumeDriver;
  if (driver !== undefined && driver !== null && driver !== '' && driver !== 'local') {
    throw notFound(`error looking up volume plugin ${String(driver)}: plugin "${String(driver)}" not found`);
  }
  const isolation = hc.Isolation;
  if (isolation !== undefined && isolation !== null && isolation !== '' && String(isolation).toLowerCase() !== 'default') {
    throw invalidArgument(`invalid isolation (${String(isolation)}): linux only supports 'default'`);
  }
  return warnings;
}

/** DeviceCgroupRules ("c 1:3 rwm", `*` for any number) as OCI device rules. */
export function deviceCgroupRules(hc: HostConfig): OciDeviceCgroupRule[] {
  const out: OciDeviceCgroupRule[] = [];
  for (const rule of (hc.DeviceCgroupRules as unknown[] | null | undefined) ?? []) {
    const m = typeof rule === 'string' ? DEVICE_RULE_RE.exec(rule) : null;
    if (!m) throw invalidArgument(`invalid device cgroup rule format: '${String(rule)}'`);
    const r: OciDeviceCgroupRule = { allow: true, type: m[1] as 'a' | 'b' | 'c', access: m[4]! };
    if (m[2] !== '*') r.major = Number(m[2]);
    if (m[3] !== '*') r.minor = Number(m[3]);
    out.push(r);
  }
  return out;
}
