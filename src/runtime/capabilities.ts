/**
 * Capabilities a container can get are bounded by berthd's own: asking the runtime for one we
 * lack (CAP_SYS_RESOURCE on hosts like this one) fails every container with "capset: Operation
 * not permitted". Privileged means "everything berthd has", as with rootless engines.
 */
import { readFileSync } from 'node:fs';
import { ALL_CAPABILITIES } from './build-spec.js';
import type { OciProcess } from './oci-spec.js';

/** Capability names in a /proc/<pid>/status Cap* hex mask (bit n = capability n). */
export function capabilitiesInMask(hex: string): Set<string> {
  const mask = BigInt('0x' + hex.trim());
  const out = new Set<string>();
  ALL_CAPABILITIES.forEach((name, bit) => {
    if ((mask >> BigInt(bit)) & 1n) out.add(name);
  });
  return out;
}

/** Effective ∩ bounding capabilities of this process (what the runtime can hand out). */
export function ownCapabilities(status = readFileSync('/proc/self/status', 'utf8')): Set<string> {
  const field = (name: string) => new RegExp(`^${name}:\\s*([0-9a-f]+)$`, 'm').exec(status)?.[1] ?? '0';
  const eff = capabilitiesInMask(field('CapEff'));
  const bnd = capabilitiesInMask(field('CapBnd'));
  return new Set([...eff].filter((c) => bnd.has(c)));
}

/** The process's capability sets without what `allowed` lacks. */
export function clampCapabilities(caps: OciProcess['capabilities'], allowed: ReadonlySet<string>): OciProcess['capabilities'] {
  if (!caps) return caps;
  const keep = (list?: string[]) => list?.filter((c) => allowed.has(c));
  const out: NonNullable<OciProcess['capabilities']> = {};
  for (const key of ['bounding', 'effective', 'inheritable', 'permitted', 'ambient'] as const) {
    const list = keep(caps[key]);
    if (list) out[key] = list;
  }
  return out;
}
