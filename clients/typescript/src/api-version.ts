/** API versions: what this client speaks, and how it settles on one with the daemon. */

/** The newest Engine API version this client was written against. */
export const CLIENT_API_VERSION = '1.55';
/** What a daemon that sends no Api-Version header is assumed to speak (it predates negotiation). */
export const FALLBACK_API_VERSION = '1.24';

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

/** The version to use against a daemon that announced `serverVersion` (undefined: no header). */
export function negotiatedVersion(serverVersion: string | undefined, clientVersion = CLIENT_API_VERSION): string {
  if (!serverVersion) return FALLBACK_API_VERSION;
  return compareVersions(serverVersion, clientVersion) < 0 ? serverVersion : clientVersion;
}
