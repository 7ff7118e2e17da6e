/** Writing an OCI bundle's config.json. */
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { OciSpec } from './oci-spec.js';

const RLIM_INFINITY = '18446744073709551615';
const INFINITY_MARK = '\u0000rlim-infinity\u0000';

/**
 * JSON text of a spec. Rlimits may hold Infinity ("unlimited"), which JSON cannot express and
 * which is 2^64-1 in the spec: it is written as that exact integer.
 */
export function serializeSpec(spec: OciSpec): string {
  const text = JSON.stringify(spec, (key, value) => {
    if ((key === 'hard' || key === 'soft') && value === Infinity) return INFINITY_MARK;
    return value as unknown;
  });
  return text.split(JSON.stringify(INFINITY_MARK)).join(RLIM_INFINITY);
}

/** Writes <bundleDir>/config.json atomically (temp file + rename). */
export async function writeBundleConfig(bundleDir: string, spec: OciSpec): Promise<string> {
  const path = join(bundleDir, 'config.json');
  const tmp = `${path}.tmp`;
  await writeFile(tmp, serializeSpec(spec), { mode: 0o600 });
  await rename(tmp, path);
  return path;
}
