/**
 * The `changes` of `POST /commit` (and `docker import -c`): Dockerfile instructions that edit an
 * image config. Only the instructions that change metadata are allowed; each one is applied in
 * order to a copy of the config, as a build step would.
 *
 * Left out: `$VAR` substitution, parser directives and heredocs (none matter for metadata).
 */
import { invalidArgument } from '../../lib/errors.js';
import type { ContainerConfig } from '../../lib/oci.js';

const ALLOWED = new Set(['CMD', 'ENTRYPOINT', 'ENV', 'EXPOSE', 'LABEL', 'ONBUILD', 'USER', 'VOLUME', 'WORKDIR', 'STOPSIGNAL', 'HEALTHCHECK']);
const DEFAULT_SHELL = ['/bin/sh', '-c'];

/** Returns a new config with `changes` applied to `base` (which is not modified). */
export function applyChanges(base: ContainerConfig, changes: string[]): ContainerConfig {
  const cfg: ContainerConfig = structuredClone(base);
  let cmdSet = false;
  for (const line of instructionLines(changes.join('\n'))) {
    const m = /^(\S+)\s*([\s\S]*)$/.exec(line)!;
    const instr = m[1]!.toUpperCase();
    const rest = m[2]!.trim();
    if (!ALLOWED.has(instr)) throw invalidArgument(`${instr.toLowerCase()} is not a valid change command`);
    switch (instr) {
      case 'CMD':
        cfg.Cmd = commandForm(rest, cfg.Shell);
        cmdSet = true;
        break;
      case 'ENTRYPOINT':
        cfg.Entrypoint = commandForm(rest, cfg.Shell);
        // A new entrypoint drops the inherited command unless this same set of changes gave one.
        if (!cmdSet) cfg.Cmd = null;
        break;
      case 'ENV':
        for (const [k, v] of keyValues(instr, rest)) setEnv(cfg, k, v);
        break;
      case 'LABEL':
        cfg.Labels = { ...(cfg.Labels ?? {}) };
        for (const [k, v] of keyValues(instr, rest)) cfg.Labels[k] = v;
        break;
      case 'EXPOSE':
        cfg.ExposedPorts = { ...(cfg.ExposedPorts ?? {}) };
        for (const p of words(rest)) for (const key of portKeys(p)) cfg.ExposedPorts[key] = {};
        break;
      case 'USER':
        cfg.User = single(instr, rest);
        break;
      case 'WORKDIR': {
        const dir = single(instr, rest);
        cfg.WorkingDir = dir.startsWith('/') ? cleanPath(dir) : cleanPath(`${cfg.WorkingDir || '/'}/${dir}`);
        break;
      }
      case 'STOPSIGNAL':
        cfg.StopSignal = single(instr, rest);
        break;
      case 'VOLUME': {
        const vols = jsonArray(rest) ?? words(rest);
        if (vols.length === 0) throw invalidArgument('VOLUME specified can not be an empty string');
        cfg.Volumes = { ...(cfg.Volumes ?? {}) };
        for (const v of vols) {
          if (!v.trim()) throw invalidArgument('VOLUME specified can not be an empty string');
          cfg.Volumes[v.trim()] = {};
        }
        break;
      }
      case 'ONBUILD': {
        const inner = (/^\S+/.exec(rest)?.[0] ?? '').toUpperCase();
        if (!inner) throw invalidArgument('ONBUILD requires at least one argument');
        if (inner === 'ONBUILD') throw invalidArgument('Chaining ONBUILD via `ONBUILD ONBUILD` isn\'t allowed');
        if (inner === 'FROM' || inner === 'MAINTAINER') throw invalidArgument(`${inner} isn't allowed as an ONBUILD trigger`);
        cfg.OnBuild = [...(cfg.OnBuild ?? []), rest];
        break;
      }
      case 'HEALTHCHECK':
        cfg.Healthcheck = healthcheck(rest);
        break;
    }
  }
  return cfg;
}

/** Splits Dockerfile text into instructions: joins `\`-continued lines, drops comments and blanks. */
function instructionLines(text: string): string[] {
  const out: string[] = [];
  let pending = '';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      pending += line.slice(0, -1) + ' ';
      continue;
    }
    out.push(pending + line);
    pending = '';
  }
  if (pending.trim()) out.push(pending.trim());
  return out;
}

/** `["a","b"]` → [a, b]; anything else → undefined. */
function jsonArray(rest: string): string[] | undefined {
  if (!rest.startsWith('[')) return undefined;
  try {
    const v: unknown = JSON.parse(rest);
    if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v as string[];
  } catch {
    // not JSON: shell form
  }
  return undefined;
}

/** Exec form (a JSON array) or shell form (run by the image's shell). */
function commandForm(rest: string, shell: string[] | undefined): string[] {
  const arr = jsonArray(rest);
  if (arr) return arr;
  return [...(shell?.length ? shell : DEFAULT_SHELL), rest];
}

function single(instr: string, rest: string): string {
  const w = words(rest);
  if (w.length !== 1) throw invalidArgument(`${instr} requires exactly one argument`);
  return w[0]!;
}

/** Whitespace-separated words; quotes group and are removed, backslash escapes one character. */
function words(s: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    if (quote) {
      if (ch === quote) quote = undefined;
      else if (ch === '\\' && quote === '"' && i + 1 < s.length) cur += s[++i];
      else cur += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      inWord = true;
    } else if (ch === '\\' && i + 1 < s.length) {
      cur += s[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) out.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += ch;
      inWord = true;
    }
  }
  if (quote) throw invalidArgument(`unexpected end of statement while looking for matching ${quote}`);
  if (inWord) out.push(cur);
  return out;
}

/** `k=v k2="v 2"`, or the legacy single pair `k v w` (the value is the rest of the line). */
function keyValues(instr: string, rest: string): [string, string][] {
  const first = /^\S+/.exec(rest)?.[0] ?? '';
  if (!first) throw invalidArgument(`${instr} requires at least one argument`);
  if (!first.includes('=')) {
    const value = rest.slice(first.length).trim();
    if (!value) throw invalidArgument(`${instr} must have two arguments`);
    return [[unquote(first), words(value).join(' ')]];
  }
  return words(rest).map((w) => {
    const eq = w.indexOf('=');
    if (eq <= 0) throw invalidArgument(`${instr} names can not be blank`);
    return [w.slice(0, eq), w.slice(eq + 1)];
  });
}

function unquote(s: string): string {
  return words(s).join(' ');
}

function setEnv(cfg: ContainerConfig, key: string, value: string): void {
  const env = [...(cfg.Env ?? [])];
  const i = env.findIndex((e) => (e.includes('=') ? e.slice(0, e.indexOf('=')) : e) === key);
  if (i >= 0) env[i] = `${key}=${value}`;
  else env.push(`${key}=${value}`);
  cfg.Env = env;
}

/** `80`, `80/udp`, `8000-8002/tcp` → port/proto keys. */
function portKeys(p: string): string[] {
  const m = /^(\d+)(?:-(\d+))?(?:\/(tcp|udp|sctp))?$/i.exec(p);
  if (!m) throw invalidArgument(`invalid containerPort: ${p}`);
  const lo = Number(m[1]);
  const hi = m[2] ? Number(m[2]) : lo;
  const proto = (m[3] ?? 'tcp').toLowerCase();
  if (lo < 1 || hi > 65535 || hi < lo) throw invalidArgument(`invalid containerPort: ${p}`);
  const out: string[] = [];
  for (let n = lo; n <= hi; n++) out.push(`${n}/${proto}`);
  return out;
}

function cleanPath(p: string): string {
  const parts: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') parts.pop();
    else parts.push(seg);
  }
  return '/' + parts.join('/');
}

/** HEALTHCHECK NONE | [--interval=D --timeout=D --start-period=D --start-interval=D --retries=N] CMD ... */
function healthcheck(rest: string): NonNullable<ContainerConfig['Healthcheck']> {
  if (/^NONE$/i.test(rest)) return { Test: ['NONE'] };
  const hc: NonNullable<ContainerConfig['Healthcheck']> = {};
  let s = rest;
  for (;;) {
    const m = /^--([a-z-]+)=(\S*)\s*/.exec(s);
    if (!m) break;
    s = s.slice(m[0].length);
    const [, flag, value] = m as unknown as [string, string, string];
    switch (flag) {
      case 'interval':
        hc.Interval = parseGoDuration(value);
        break;
      case 'timeout':
        hc.Timeout = parseGoDuration(value);
        break;
      case 'start-period':
        hc.StartPeriod = parseGoDuration(value);
        break;
      case 'start-interval':
        hc.StartInterval = parseGoDuration(value);
        break;
      case 'retries':
        if (!/^\d+$/.test(value)) throw invalidArgument(`invalid value for --retries: ${value}`);
        hc.Retries = Number(value);
        break;
      default:
        throw invalidArgument(`Unknown flag: ${flag}`);
    }
  }
  const m = /^(\S+)\s*([\s\S]*)$/.exec(s);
  if (!m || m[1]!.toUpperCase() !== 'CMD') throw invalidArgument(`Unknown type ${JSON.stringify(m?.[1] ?? '')} in HEALTHCHECK (try CMD)`);
  const arr = jsonArray(m[2]!.trim());
  hc.Test = arr ? ['CMD', ...arr] : ['CMD-SHELL', m[2]!.trim()];
  return hc;
}

const UNITS: Record<string, number> = { ns: 1, us: 1e3, 'µs': 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };

/** Go's time.ParseDuration ("1m30s", "500ms", "0") → nanoseconds. */
export function parseGoDuration(s: string): number {
  if (s === '0') return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let pos = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s))) {
    total += Number(m[1]) * UNITS[m[2]!]!;
    pos = re.lastIndex;
  }
  if (pos === 0 || pos !== s.length) throw invalidArgument(`time: invalid duration ${JSON.stringify(s)}`);
  return Math.round(total);
}
