/**
 * The `filters` query parameter: JSON `{"label":["a=b"]}` or the legacy `{"label":{"a=b":true}}`.
 */
import { invalidArgument } from '../lib/errors.js';

export type Filters = Map<string, string[]>;

export function parseFilters(raw: string | null, allowed: readonly string[]): Filters {
  const out: Filters = new Map();
  if (raw === null || raw.trim() === '') return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw invalidArgument(`invalid filter: ${raw}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw invalidArgument(`invalid filter: ${raw}`);
  for (const [key, value] of Object.entries(parsed)) {
    if (!allowed.includes(key)) throw invalidArgument(`invalid filter '${key}'`);
    let values: string[];
    if (Array.isArray(value)) values = value.map(String);
    else if (value && typeof value === 'object') values = Object.entries(value).filter(([, on]) => on).map(([k]) => k);
    else throw invalidArgument(`invalid filter: ${raw}`);
    out.set(key, values);
  }
  return out;
}

/** Exact `key` or `key=value` match for every label filter (AND). */
export function matchLabels(filterValues: string[] | undefined, labels: Record<string, string> | undefined | null): boolean {
  if (!filterValues?.length) return true;
  const l = labels ?? {};
  return filterValues.every((f) => {
    const eq = f.indexOf('=');
    if (eq < 0) return Object.hasOwn(l, f);
    const key = f.slice(0, eq);
    const val = f.slice(eq + 1);
    return Object.hasOwn(l, key) && l[key] === val;
  });
}

/** Boolean filters ("dangling"): "true"/"1" or "false"/"0". */
export function filterBool(values: string[] | undefined, name: string): boolean | undefined {
  if (!values?.length) return undefined;
  const v = values[values.length - 1]!.toLowerCase();
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  throw invalidArgument(`Invalid filter '${name}=${values[values.length - 1]}'`);
}

const DURATION_UNITS: Record<string, number> = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, us: 1e-3, µs: 1e-3, ns: 1e-6 };

/**
 * `until`: Unix seconds (with a fraction), an RFC 3339 date or a plain date, or a Go duration
 * (`24h`, `1h30m`, `90s`) counted back from now, as dockerd reads it. Returns epoch milliseconds.
 */
export function parseUntil(v: string): number {
  const s = v.trim();
  if (/^\d+(\.\d+)?$/.test(s)) return Number(s) * 1000;
  if (/^(\d+(\.\d+)?(h|ms|m|s|us|µs|ns))+$/.test(s)) {
    let ms = 0;
    for (const m of s.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g)) ms += Number(m[1]) * DURATION_UNITS[m[2]!]!;
    return Date.now() - ms;
  }
  const t = Date.parse(s);
  if (Number.isNaN(t)) throw invalidArgument(`invalid filter 'until=${v}'`);
  return t;
}
