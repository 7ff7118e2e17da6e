/**
 * The classic builder's reading of instruction arguments: flags, modes, ports, durations and the
 * HEALTHCHECK config, and the Go-formatted texts dockerd's history shows for them.
 */
import type { ContainerConfig } from '../../lib/oci.js';
import { BuildError } from './build-step.js';
import type { DockerfileNode } from './dockerfile/parser.js';

export function triples(args: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < args.length; i += 3) out.push([args[i]!, args[i + 1]!]);
  return out;
}

/** BuildKit's flags, refused by name so the user knows which builder has them. */
const BUILDKIT_FLAGS = new Set(['link', 'parents', 'exclude', 'checksum', 'keep-git-dir', 'mount', 'network', 'security', 'start-interval-only']);

export function parseFlags(flags: string[], allowed: string[]): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const f of flags) {
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(f);
    const name = m?.[1] ?? f.replace(/^--/, '').split('=')[0]!;
    if (!m || !allowed.includes(name)) {
      throw new BuildError(BUILDKIT_FLAGS.has(name) ? `the --${name} option requires BuildKit: unknown flag: ${name}` : `Unknown flag: ${name}`);
    }
    out[name] = m[2] ?? 'true';
  }
  return out;
}

export function parseMode(s: string): number {
  if (!/^[0-7]{1,4}$/.test(s)) throw new BuildError(`invalid chmod parameter ${s}`);
  return parseInt(s, 8);
}

export function expandPort(p: string): string[] {
  const [ports = '', proto = 'tcp'] = p.split('/');
  const m = /^(\d+)(?:-(\d+))?$/.exec(ports);
  if (!m) throw new BuildError(`Invalid containerPort: ${ports}`);
  const lo = Number(m[1]);
  const hi = m[2] ? Number(m[2]) : lo;
  if (hi < lo || hi > 65535) throw new BuildError(`Invalid port range: ${ports}`);
  const out: string[] = [];
  for (let i = lo; i <= hi && out.length < 65536; i++) out.push(`${i}/${proto.toLowerCase()}`);
  return out;
}

/** Go's %q of a string slice: ["a" "b"] */
export function goQuoteList(a: string[]): string {
  return '[' + a.map((x) => JSON.stringify(x)).join(' ') + ']';
}

const DURATION_UNITS: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };

function parseDuration(s: string, what: string): number {
  if (s === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let pos = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    total += Number(m[1]) * DURATION_UNITS[m[2]!]!;
    pos = re.lastIndex;
  }
  if (pos !== s.length || s === '') throw new BuildError(`invalid duration for ${what}: ${s}`);
  return Math.round(total);
}

export function healthcheck(node: DockerfileNode, shell: string[]): NonNullable<ContainerConfig['Healthcheck']> {
  const [typ, ...rest] = node.args;
  const t = (typ ?? '').toUpperCase();
  if (t === 'NONE') {
    if (rest.length > 0 || node.flags.length > 0) throw new BuildError('HEALTHCHECK NONE takes no arguments');
    return { Test: ['NONE'] };
  }
  if (t !== 'CMD') throw new BuildError(`Unknown type "${typ ?? ''}" in HEALTHCHECK (try CMD)`);
  if (rest.length === 0) throw new BuildError('Missing command after HEALTHCHECK CMD');
  const f = parseFlags(node.flags, ['interval', 'timeout', 'start-period', 'start-interval', 'retries']);
  const hc: NonNullable<ContainerConfig['Healthcheck']> = { Test: node.json ? ['CMD', ...rest] : ['CMD-SHELL', rest[0]!] };
  void shell;
  if (f.interval) hc.Interval = parseDuration(f.interval, 'interval');
  if (f.timeout) hc.Timeout = parseDuration(f.timeout, 'timeout');
  if (f['start-period']) hc.StartPeriod = parseDuration(f['start-period'], 'start-period');
  if (f['start-interval']) hc.StartInterval = parseDuration(f['start-interval'], 'start-interval');
  if (f.retries) {
    const r = Number(f.retries);
    if (!Number.isInteger(r) || r < 0) throw new BuildError(`invalid retries: ${f.retries}`);
    hc.Retries = r;
  }
  return hc;
}

function goDuration(ns: number | undefined): string {
  const n = ns ?? 0;
  if (n === 0) return '0s';
  const s = n / 1e9;
  if (s < 60) return `${s}s`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return `${h ? `${h}h` : ''}${h || m ? `${m}m` : ''}${sec}s`;
}

/** Go's %+v of the health config, as dockerd's history shows it. */
export function describeHealthcheck(h: NonNullable<ContainerConfig['Healthcheck']>): string {
  return `&{Test:[${(h.Test ?? []).join(' ')}] Interval:${goDuration(h.Interval)} Timeout:${goDuration(h.Timeout)} StartPeriod:${goDuration(h.StartPeriod)} StartInterval:${goDuration(h.StartInterval)} Retries:${h.Retries ?? 0}}`;
}

