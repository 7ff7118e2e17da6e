/**
 * Service specs: validation with swarmkit's messages, the defaults the orchestrator applies to what
 * a spec leaves out, and the published ports the swarm assigns.
 */
import { invalidArgument } from '../../lib/errors.js';
import {
  SECOND_NS,
  type EndpointSpec,
  type PortConfig,
  type RestartPolicy,
  type ServiceSpec,
  type TaskSpec,
  type UpdateConfig,
} from './swarm-model.js';
import { canonicalServiceSpec } from './spec-keys.js';

export const DEFAULT_RESTART: Required<RestartPolicy> = { Condition: 'any', Delay: 5 * SECOND_NS, MaxAttempts: 0, Window: 0 };
export const DEFAULT_UPDATE: Required<UpdateConfig> = {
  Parallelism: 1,
  Delay: 0,
  FailureAction: 'pause',
  Monitor: 5 * SECOND_NS,
  MaxFailureRatio: 0,
  Order: 'stop-first',
};
export const DEFAULT_STOP_GRACE_NS = 10 * SECOND_NS;
/** Where ingress ports without a published port are taken from, as swarmkit does. */
export const DYNAMIC_PORT_RANGE = { start: 30000, end: 32767 } as const;

/** dockerd's rule for object names (containers, volumes, services): `_` and `.` are allowed too. */
const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStringList = (v: unknown) => v === undefined || v === null || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
const isNat = (v: unknown) => v === undefined || v === null || (typeof v === 'number' && Number.isInteger(v) && v >= 0);

/** Checks a create or update body and fills the mode when it is missing. Returns a copy. */
export function normalizeServiceSpec(body: unknown): ServiceSpec {
  if (!isObject(body)) throw invalidArgument('invalid JSON: expected a service spec object');
  const spec = structuredClone(canonicalServiceSpec(body)) as ServiceSpec;
  if (spec.Name !== undefined && typeof spec.Name !== 'string') throw invalidArgument('invalid JSON: Name must be a string');
  if (spec.Name && !NAME_RE.test(spec.Name)) {
    throw invalidArgument(`invalid name: "${spec.Name}": name must be valid as a DNS name component`);
  }
  if (spec.Labels !== undefined && spec.Labels !== null && !isObject(spec.Labels)) throw invalidArgument('invalid JSON: Labels must be an object');

  const tt = spec.TaskTemplate;
  if (tt === undefined || tt === null || !isObject(tt)) throw invalidArgument('TaskSpec: missing runtime');
  const cs = tt.ContainerSpec;
  if (!isObject(cs)) throw invalidArgument('TaskSpec: missing runtime');
  if (typeof cs.Image !== 'string' || cs.Image.trim() === '') throw invalidArgument('ContainerSpec: image reference must be provided');
  for (const f of ['Command', 'Args', 'Env', 'Groups', 'Hosts'] as const) {
    if (!isStringList(cs[f])) throw invalidArgument(`invalid JSON: ContainerSpec.${f} must be a list of strings`);
  }
  if (cs.Labels !== undefined && cs.Labels !== null && !isObject(cs.Labels)) throw invalidArgument('invalid JSON: ContainerSpec.Labels must be an object');
  if (cs.Mounts !== undefined && cs.Mounts !== null && !Array.isArray(cs.Mounts)) throw invalidArgument('invalid JSON: ContainerSpec.Mounts must be a list');
  for (const m of cs.Mounts ?? []) {
    if (!isObject(m) || typeof m.Target !== 'string' || m.Target === '') throw invalidArgument('ContainerSpec: invalid mount: target must not be empty');
  }
  if (!isNat(cs.StopGracePeriod)) throw invalidArgument('ContainerSpec: StopGracePeriod must not be negative');

  const rp = tt.RestartPolicy;
  if (rp !== undefined && rp !== null) {
    if (!isObject(rp)) throw invalidArgument('invalid JSON: RestartPolicy must be an object');
    if (rp.Condition !== undefined && !['none', 'on-failure', 'any', ''].includes(rp.Condition as string)) {
      throw invalidArgument(`invalid RestartCondition: ${String(rp.Condition)}`);
    }
    if (!isNat(rp.Delay)) throw invalidArgument('TaskSpec: restart-delay cannot be negative');
    if (!isNat(rp.MaxAttempts)) throw invalidArgument('TaskSpec: restart-max-attempts cannot be negative');
    if (!isNat(rp.Window)) throw invalidArgument('TaskSpec: restart-window cannot be negative');
  }
  if (tt.Placement?.Constraints?.length) {
    for (const c of tt.Placement.Constraints) if (!/^\s*[\w.-]+\s*(==|!=)\s*\S.*$/.test(c)) throw invalidArgument(`invalid constraint: ${c}`);
  }

  for (const f of ['Secrets', 'Configs'] as const) {
    if (cs[f] !== undefined && cs[f] !== null && !Array.isArray(cs[f])) throw invalidArgument(`invalid JSON: ContainerSpec.${f} must be a list`);
  }
  // Networks are checked against the node's networks when the VIPs are chosen (overlay-networks.ts).
  for (const v of [tt.Networks, spec.Networks]) if (v !== undefined && v !== null && !Array.isArray(v)) throw invalidArgument('invalid JSON: Networks must be a list');
  const max = tt.Placement?.MaxReplicas;
  if (max !== undefined && !isNat(max)) throw invalidArgument('TaskSpec: MaxReplicas cannot be negative');

  spec.Mode = normalizeMode(spec.Mode);
  if ((spec.Mode.ReplicatedJob || spec.Mode.GlobalJob) && spec.UpdateConfig) throw invalidArgument('rpc error: code = InvalidArgument desc = Jobs may not have an update config');
  checkUpdateConfig(spec.UpdateConfig, 'UpdateConfig');
  checkUpdateConfig(spec.RollbackConfig, 'RollbackConfig');
  checkEndpointSpec(spec.EndpointSpec);
  return spec;
}

function normalizeMode(mode: ServiceSpec['Mode']): NonNullable<ServiceSpec['Mode']> {
  if (mode === undefined || mode === null) return { Replicated: { Replicas: 1 } };
  if (!isObject(mode)) throw invalidArgument('invalid JSON: Mode must be an object');
  const set = (['Replicated', 'Global', 'ReplicatedJob', 'GlobalJob'] as const).filter((k) => mode[k] !== undefined && mode[k] !== null);
  if (set.length > 1) throw invalidArgument('invalid service mode: only one mode may be set');
  if (set[0] === 'Global') return { Global: {} };
  if (set[0] === 'GlobalJob') return { GlobalJob: {} };
  if (set[0] === 'ReplicatedJob') {
    const j = mode.ReplicatedJob as { MaxConcurrent?: unknown; TotalCompletions?: unknown };
    const max = j.MaxConcurrent ?? 1;
    const total = j.TotalCompletions ?? max;
    for (const [k, v] of [['MaxConcurrent', max], ['TotalCompletions', total]] as const) {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw invalidArgument(`invalid JSON: ${k} must be a non-negative integer`);
    }
    return { ReplicatedJob: { MaxConcurrent: max as number, TotalCompletions: total as number } };
  }
  const r = mode.Replicated as { Replicas?: unknown } | undefined;
  const n = r?.Replicas ?? 1;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) throw invalidArgument('invalid JSON: Replicas must be a non-negative integer');
  return { Replicated: { Replicas: n } };
}

function checkUpdateConfig(c: UpdateConfig | undefined | null, what: string): void {
  if (c === undefined || c === null) return;
  if (!isObject(c)) throw invalidArgument(`invalid JSON: ${what} must be an object`);
  if (!isNat(c.Parallelism)) throw invalidArgument(`${what}: parallelism cannot be negative`);
  if (!isNat(c.Delay)) throw invalidArgument(`${what}: delay cannot be negative`);
  if (!isNat(c.Monitor)) throw invalidArgument(`${what}: monitor cannot be negative`);
  if (c.FailureAction !== undefined && !['continue', 'pause', 'rollback', ''].includes(c.FailureAction as string)) {
    throw invalidArgument(`${what}: invalid failure action: ${String(c.FailureAction)}`);
  }
  if (c.Order !== undefined && !['stop-first', 'start-first', ''].includes(c.Order as string)) throw invalidArgument(`${what}: invalid order: ${String(c.Order)}`);
  const r = c.MaxFailureRatio;
  if (r !== undefined && (typeof r !== 'number' || r < 0 || r > 1)) throw invalidArgument(`${what}: max-failure-ratio must be between 0 and 1`);
}

function checkEndpointSpec(e: EndpointSpec | undefined | null): void {
  if (e === undefined || e === null) return;
  if (!isObject(e)) throw invalidArgument('invalid JSON: EndpointSpec must be an object');
  if (e.Mode !== undefined && !['vip', 'dnsrr', ''].includes(e.Mode as string)) throw invalidArgument(`EndpointSpec: invalid resolution mode: ${String(e.Mode)}`);
  const ports = e.Ports ?? [];
  if (!Array.isArray(ports)) throw invalidArgument('invalid JSON: EndpointSpec.Ports must be a list');
  const seen = new Set<string>();
  for (const p of ports) {
    if (!isObject(p)) throw invalidArgument('invalid JSON: EndpointSpec.Ports must hold objects');
    const proto = String(p.Protocol || 'tcp');
    if (!['tcp', 'udp', 'sctp'].includes(proto)) throw invalidArgument(`EndpointSpec: invalid protocol: ${proto}`);
    if (typeof p.TargetPort !== 'number' || !Number.isInteger(p.TargetPort) || p.TargetPort < 1 || p.TargetPort > 65535) {
      throw invalidArgument(`EndpointSpec: invalid target port: ${String(p.TargetPort)}`);
    }
    if (!isNat(p.PublishedPort) || Number(p.PublishedPort ?? 0) > 65535) throw invalidArgument(`EndpointSpec: invalid published port: ${String(p.PublishedPort)}`);
    const mode = String(p.PublishMode || 'ingress');
    if (!['ingress', 'host'].includes(mode)) throw invalidArgument(`EndpointSpec: invalid publish mode: ${mode}`);
    if (mode === 'ingress' && e.Mode === 'dnsrr') throw invalidArgument("EndpointSpec: port published with ingress mode can't be used with dnsrr mode");
    if (p.PublishedPort) {
      const key = `${p.PublishedPort}/${proto}`;
      if (seen.has(key)) throw invalidArgument('EndpointSpec: duplicate published ports provided');
      seen.add(key);
    }
  }
}

/** The spec with every default the orchestrator applies written out (GET /services/{id}?insertDefaults=1). */
export function withDefaults(spec: ServiceSpec): ServiceSpec {
  const s = structuredClone(spec);
  const tt = (s.TaskTemplate ??= {});
  const cs = (tt.ContainerSpec ??= {});
  cs.StopGracePeriod ??= DEFAULT_STOP_GRACE_NS;
  cs.DNSConfig ??= {};
  tt.Resources ??= {};
  tt.Resources.Limits ??= {};
  tt.Resources.Reservations ??= {};
  tt.RestartPolicy = { ...DEFAULT_RESTART, ...stripEmpty(tt.RestartPolicy ?? {}) };
  tt.Placement ??= {};
  tt.ForceUpdate ??= 0;
  s.UpdateConfig = { ...DEFAULT_UPDATE, ...stripEmpty(s.UpdateConfig ?? {}) };
  s.RollbackConfig = { ...DEFAULT_UPDATE, ...stripEmpty(s.RollbackConfig ?? {}) };
  s.EndpointSpec = { Mode: 'vip', ...stripEmpty(s.EndpointSpec ?? {}) };
  return s;
}

/** Drops fields holding '' or null so they do not override defaults. */
function stripEmpty<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== '' && v !== null && v !== undefined)) as Partial<T>;
}

export function restartPolicy(spec: ServiceSpec): Required<RestartPolicy> {
  return { ...DEFAULT_RESTART, ...stripEmpty(spec.TaskTemplate?.RestartPolicy ?? {}) };
}

/** The first back-off step for a task that failed without running, and where doubling stops (dockerd's restart manager's bounds). */
export const BACKOFF_START_MS = 100;
export const BACKOFF_CAP_MS = 60_000;

/**
 * How long a replacement waits: the policy's delay after a task that ran; after `failures` tasks in a
 * row that never ran, that delay (at least BACKOFF_START_MS) doubled per failure, up to the larger of
 * the delay and the cap. Without it an unpreparable task is replaced as fast as the loop can turn.
 */
export function restartDelayMs(spec: ServiceSpec, failures: number): number {
  const base = restartPolicy(spec).Delay / 1e6;
  if (failures <= 0) return base;
  const grown = Math.max(base, BACKOFF_START_MS) * 2 ** Math.min(failures - 1, 20);
  return Math.min(grown, Math.max(base, BACKOFF_CAP_MS));
}

export function updateConfig(spec: ServiceSpec, rollback: boolean): Required<UpdateConfig> {
  return { ...DEFAULT_UPDATE, ...stripEmpty((rollback ? spec.RollbackConfig : spec.UpdateConfig) ?? {}) };
}

export function stopGraceSeconds(task: TaskSpec): number {
  return Math.ceil((task.ContainerSpec?.StopGracePeriod ?? DEFAULT_STOP_GRACE_NS) / SECOND_NS);
}

/**
 * The endpoint's ports with published ports filled in: an ingress port without one keeps what it was
 * given before (same target and protocol) or gets a free one from the dynamic range. `taken` holds the
 * ingress ports other services use ("8080/tcp" → service name).
 */
export function resolvePorts(spec: EndpointSpec | undefined, previous: PortConfig[], taken: Map<string, string>): PortConfig[] {
  const out: PortConfig[] = [];
  const used = new Set<string>();
  for (const p of spec?.Ports ?? []) {
    const port: PortConfig = { ...(p.Name ? { Name: p.Name } : {}), Protocol: p.Protocol || 'tcp', TargetPort: p.TargetPort, PublishedPort: p.PublishedPort ?? 0, PublishMode: p.PublishMode || 'ingress' };
    if (port.PublishMode === 'ingress') {
      if (!port.PublishedPort) {
        const before = previous.find((q) => q.PublishMode === 'ingress' && q.TargetPort === port.TargetPort && q.Protocol === port.Protocol && !used.has(`${q.PublishedPort}/${q.Protocol}`));
        port.PublishedPort = before?.PublishedPort ?? freePort(port.Protocol!, taken, used);
      }
      const key = `${port.PublishedPort}/${port.Protocol}`;
      const owner = taken.get(key);
      if (owner !== undefined) throw invalidArgument(`port '${port.PublishedPort}' is already in use by service '${owner}' as an ingress port`);
      used.add(key);
    }
    out.push(port);
  }
  return out;
}

function freePort(proto: string, taken: Map<string, string>, used: Set<string>): number {
  for (let p = DYNAMIC_PORT_RANGE.start; p <= DYNAMIC_PORT_RANGE.end; p++) {
    const key = `${p}/${proto}`;
    if (!taken.has(key) && !used.has(key)) return p;
  }
  throw invalidArgument('no more dynamic ports available for ingress');
}

/** Whether tasks made from `a` must be replaced to match `b` (the template or host-mode ports changed). */
export function templateChanged(a: ServiceSpec, b: ServiceSpec): boolean {
  const hostPorts = (s: ServiceSpec) => (s.EndpointSpec?.Ports ?? []).filter((p) => p.PublishMode === 'host');
  // Tasks of a service that starts or stops publishing through the mesh join or leave ingress.
  return canonical(a.TaskTemplate) !== canonical(b.TaskTemplate) || canonical(hostPorts(a)) !== canonical(hostPorts(b)) || publishesIngress(a) !== publishesIngress(b);
}

/** Whether the spec publishes a port in ingress mode (the default mode), so it needs the ingress network. */
export function publishesIngress(spec: ServiceSpec): boolean {
  return (spec.EndpointSpec?.Ports ?? []).some((p) => (p?.PublishMode || 'ingress') === 'ingress');
}

/** JSON with sorted keys, so field order never counts as a change. */
function canonical(v: unknown): string {
  return JSON.stringify(v ?? null, (_k, val) =>
    isObject(val) ? Object.fromEntries(Object.keys(val).sort().map((k) => [k, val[k]])) : val,
  );
}
