/** The Engine API versions Berth speaks, and the rule for the /vX.Y prefix. */
export const API_VERSION = '1.55';
export const MIN_API_VERSION = '1.24';

/** Compares dotted versions numerically: -1, 0 or 1. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? 0;
    const y = pb[i] ?? 0;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

export const versionAtLeast = (v: string, min: string) => compareVersions(v, min) >= 0;
export const versionBefore = (v: string, than: string) => compareVersions(v, than) < 0;

/** Splits `/v1.44/containers/json` into the version and the rest; unversioned paths get the default. */
export function splitVersion(path: string): { version: string | undefined; path: string } {
  const m = /^\/v([0-9][0-9.]*)(\/.*)?$/.exec(path);
  if (!m) return { version: undefined, path };
  return { version: m[1]!, path: m[2] ?? '/' };
}
