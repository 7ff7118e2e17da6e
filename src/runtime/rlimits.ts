/**
 * Resource limits in a spec must fit under berthd's own hard limits: without CAP_SYS_RESOURCE the
 * runtime cannot raise a hard limit, and the container then fails to start.
 */
import { readFileSync } from 'node:fs';
import type { OciRlimit } from './oci-spec.js';

/** /proc/<pid>/limits row names → RLIMIT_* names. */
const LIMIT_NAMES: Record<string, string> = {
  'Max cpu time': 'RLIMIT_CPU',
  'Max file size': 'RLIMIT_FSIZE',
  'Max data size': 'RLIMIT_DATA',
  'Max stack size': 'RLIMIT_STACK',
  'Max core file size': 'RLIMIT_CORE',
  'Max resident set': 'RLIMIT_RSS',
  'Max processes': 'RLIMIT_NPROC',
  'Max open files': 'RLIMIT_NOFILE',
  'Max locked memory': 'RLIMIT_MEMLOCK',
  'Max address space': 'RLIMIT_AS',
  'Max file locks': 'RLIMIT_LOCKS',
  'Max pending signals': 'RLIMIT_SIGPENDING',
  'Max msgqueue size': 'RLIMIT_MSGQUEUE',
  'Max nice priority': 'RLIMIT_NICE',
  'Max realtime priority': 'RLIMIT_RTPRIO',
  'Max realtime timeout': 'RLIMIT_RTTIME',
};

/** Hard limits by RLIMIT_* name; "unlimited" is Infinity. */
export type HardLimits = ReadonlyMap<string, number>;

/** Parses the text of /proc/<pid>/limits. */
export function parseProcLimits(text: string): HardLimits {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    for (const [label, name] of Object.entries(LIMIT_NAMES)) {
      if (!line.startsWith(label + ' ')) continue;
      // Columns: name, soft, hard, units; the name itself contains spaces.
      const fields = line.slice(label.length).trim().split(/\s+/);
      const hard = fields[1];
      if (hard !== undefined) out.set(name, hard === 'unlimited' ? Infinity : Number(hard));
    }
  }
  return out;
}

/** This process's hard limits (berthd's, which conmon and the runtime inherit). */
export function ownHardLimits(): HardLimits {
  return parseProcLimits(readFileSync('/proc/self/limits', 'utf8'));
}

/** Docker passes -1 for "unlimited"; Berth uses Infinity (written as RLIM_INFINITY in config.json). */
function asLimit(v: number): number {
  return v < 0 ? Infinity : v;
}

/**
 * Both soft and hard lowered to what the caller may set; types we have no hard limit for pass
 * through. Values may be Infinity ("unlimited"): see serializeSpec in bundle.ts.
 */
export function clampRlimits(rlimits: readonly OciRlimit[], hard: HardLimits): OciRlimit[] {
  return rlimits.map((r) => {
    const max = hard.get(r.type.toUpperCase()) ?? Infinity;
    const h = Math.min(asLimit(r.hard), max);
    return { type: r.type, hard: h, soft: Math.min(asLimit(r.soft), h) };
  });
}
