/**
 * Platforms: the host's own, `os[/arch[/variant]]` strings, and picking one entry of an image
 * index. Architecture names are normalized (x86_64 → amd64, aarch64 → arm64) and default
 * variants filled in (arm64 → v8, arm → v7) so that equal platforms compare equal.
 */
import { invalidArgument, notFound } from './errors.js';
import type { Descriptor, Platform } from './oci.js';

const NODE_ARCH: Record<string, string> = {
  x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64',
  loong64: 'loong64', mips: 'mips', mipsel: 'mipsle',
};

/** The platform this daemon runs on (images default to it). */
export function hostPlatform(): Platform {
  const architecture = NODE_ARCH[process.arch] ?? process.arch;
  const p: Platform = { os: 'linux', architecture };
  if (architecture === 'arm64') p.variant = 'v8';
  if (architecture === 'arm') p.variant = 'v7';
  return p;
}

/** Architecture spellings normalized as containerd's platforms package does (uname and Debian names). */
const ARCH_ALIASES: Record<string, { architecture: string; variant?: string }> = {
  x86_64: { architecture: 'amd64' },
  'x86-64': { architecture: 'amd64' },
  aarch64: { architecture: 'arm64' },
  armhf: { architecture: 'arm', variant: 'v7' },
  armel: { architecture: 'arm', variant: 'v6' },
  i386: { architecture: '386' },
  i686: { architecture: '386' },
};

/**
 * The one parser of platform strings (the `platform` query of pull, import and build, and
 * `FROM --platform=`): `os[/arch[/variant]]`; a missing architecture is this host's, as with
 * dockerd; empty means none.
 */
export function parsePlatform(s: string | undefined): Platform | undefined {
  if (!s || s.trim() === '') return undefined;
  const parts = s.trim().toLowerCase().split('/');
  const [os, arch, variant] = parts;
  if (parts.length > 3 || !os || arch === '' || variant === '') throw invalidArgument(`invalid platform: ${s}`);
  const host = hostPlatform();
  const alias = arch ? ARCH_ALIASES[arch] : undefined;
  const p: Platform = { os, architecture: alias?.architecture ?? arch ?? host.architecture };
  const v = variant ?? alias?.variant ?? (arch === undefined ? host.variant : undefined);
  if (v) p.variant = v;
  return p;
}

export function formatPlatform(p: Platform): string {
  return [p.os, p.architecture, p.variant].filter((x) => x !== undefined && x !== '').join('/');
}

/** Canonical names and default variants, so that comparing fields is enough. */
export function normalizePlatform(p: Platform): Platform {
  let arch = p.architecture.toLowerCase();
  let variant = (p.variant ?? '').toLowerCase();
  switch (arch) {
    case 'x86_64': case 'x86-64': case 'amd64':
      arch = 'amd64';
      if (variant === 'v1') variant = '';
      break;
    case 'aarch64': case 'arm64':
      arch = 'arm64';
      if (variant === '' || variant === '8' || variant === 'v8.0') variant = 'v8';
      break;
    case 'armhf':
      arch = 'arm';
      variant = 'v7';
      break;
    case 'armel':
      arch = 'arm';
      variant = 'v6';
      break;
    case 'arm':
      if (variant === '') variant = 'v7';
      else if (/^[5-8]$/.test(variant)) variant = `v${variant}`;
      break;
    case 'i386': case 'i686': case '386':
      arch = '386';
      break;
  }
  const out: Platform = { os: p.os.toLowerCase(), architecture: arch };
  if (variant !== '') out.variant = variant;
  return out;
}

/** Variants a wanted platform can run, best first (an arm/v7 host runs v6 and v5 images too). */
function acceptableVariants(want: Platform): string[] {
  const v = want.variant ?? '';
  if (want.architecture === 'arm') {
    const n = Number(v.slice(1));
    if (n >= 5 && n <= 8) return ['v8', 'v7', 'v6', 'v5'].filter((x) => Number(x.slice(1)) <= n);
  }
  return [v];
}

/**
 * Picks the manifest for `wanted` from an index's entries. Throws not-found with dockerd's
 * message when none fits.
 */
export function selectManifest(entries: Descriptor[], wanted: Platform): Descriptor {
  const want = normalizePlatform(wanted);
  const variants = acceptableVariants(want);
  let best: Descriptor | undefined;
  let bestRank = Infinity;
  for (const d of entries) {
    if (!d.platform) continue;
    const have = normalizePlatform(d.platform);
    if (have.os !== want.os || have.architecture !== want.architecture) continue;
    const rank = variants.indexOf(have.variant ?? '');
    if (rank >= 0 && rank < bestRank) {
      best = d;
      bestRank = rank;
    }
  }
  if (!best) throw notFound(`no matching manifest for ${formatPlatform(wanted)} in the manifest list entries`);
  return best;
}
