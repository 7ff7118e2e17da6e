/**
 * Placement, as swarmkit's scheduler decides it. Filters, in swarmkit's order, decide which nodes may
 * take a task: availability, resource reservations, constraints (`node.role==manager`,
 * `node.labels.zone!=b`, ...), platforms, host-mode published ports, the per-node replica cap. Among
 * those nodes, spread preferences (`--placement-pref spread=node.labels.zone`) first pick the group
 * of nodes (per label value, level by level) holding the fewest tasks of the service; within it the
 * node with the fewest tasks of the service, then the fewest tasks at all, gets it. A task no node
 * fits waits as pending with swarmkit's "no suitable node" reason.
 */
import type { HostFacts } from '../system.js';
import { isTerminal, type NodeRecord, type PortConfig, type TaskRecord, type TaskSpec } from './swarm-model.js';

const plural = (n: number) => `${n} node${n === 1 ? '' : 's'}`;

/** Why a node cannot take a task: swarmkit's filters, in the order it runs them. */
const REASON_TEXT = {
  unavailable: (n: number) => `${plural(n)} not available for new tasks`,
  resources: (n: number) => `insufficient resources on ${plural(n)}`,
  constraints: (n: number) => `scheduling constraints not satisfied on ${plural(n)}`,
  platform: (n: number) => `unsupported platform on ${plural(n)}`,
  hostPort: (n: number) => `host-mode port already in use on ${plural(n)}`,
  maxReplicas: () => 'max replicas per node limit exceed',
};
type Reason = keyof typeof REASON_TEXT;
const REASONS = Object.keys(REASON_TEXT) as Reason[];

interface NodeLoad {
  service: number;
  all: number;
  cpu: number;
  mem: number;
  /** `protocol/port` of the host-mode ports its tasks publish. */
  hostPorts: Set<string>;
}

/** `protocol/port` of each host-mode port with a fixed published port. */
export function hostPortKeys(ports: readonly PortConfig[] | undefined): string[] {
  return (ports ?? []).filter((p) => p.PublishMode === 'host' && p.PublishedPort).map((p) => `${p.Protocol ?? 'tcp'}/${p.PublishedPort}`);
}

/**
 * A node for the task, or why none fits. `tasks` are all tasks (live ones count); `hostPorts` says
 * which host-mode ports a task publishes (its service's).
 */
export function schedule(
  t: TaskRecord,
  nodes: NodeRecord[],
  tasks: Iterable<TaskRecord>,
  host: HostFacts,
  hostPorts: (t: TaskRecord) => string[] = () => [],
): { node?: NodeRecord; problem?: string } {
  const live = [...tasks].filter((o) => o !== t && o.nodeId && !isTerminal(o.desiredState) && !isTerminal(o.status.state));
  const load = new Map<string, NodeLoad>();
  const loadOf = (id: string) => load.get(id) ?? { service: 0, all: 0, cpu: 0, mem: 0, hostPorts: new Set<string>() };
  for (const o of live) {
    const c = loadOf(o.nodeId);
    c.all++;
    if (o.serviceId === t.serviceId) c.service++;
    c.cpu += Number(o.spec.Resources?.Reservations?.NanoCPUs ?? 0);
    c.mem += Number(o.spec.Resources?.Reservations?.MemoryBytes ?? 0);
    for (const p of hostPorts(o)) c.hostPorts.add(p);
    load.set(o.nodeId, c);
  }
  const wanted = hostPorts(t);
  const failures = new Map<Reason, number>();
  const fit: NodeRecord[] = [];
  for (const n of nodes) {
    const problem = problemOn(t.spec, n, host, loadOf(n.id), wanted);
    if (problem) failures.set(problem, (failures.get(problem) ?? 0) + 1);
    else fit.push(n);
  }
  if (fit.length) return { node: best(t, fit, nodes, loadOf) };
  if (!nodes.length) return { problem: 'no suitable node (0 nodes available for new tasks)' };
  // The reason most nodes failed on first, as swarmkit explains it.
  const explained = REASONS.filter((r) => failures.has(r)).sort((a, b) => failures.get(b)! - failures.get(a)!);
  return { problem: `no suitable node (${explained.map((r) => REASON_TEXT[r](failures.get(r)!)).join('; ')})` };
}

/** Why the node cannot take the task (the first filter it fails), or undefined when it can. */
function problemOn(spec: TaskSpec, node: NodeRecord, host: HostFacts, load: NodeLoad, wanted: string[]): Reason | undefined {
  if (node.spec.Availability !== 'active') return 'unavailable';
  if (!resourcesFit(spec, node, host, load)) return 'resources';
  if (!(spec.Placement?.Constraints ?? []).every((c) => constraintMet(c, node, host))) return 'constraints';
  if (!platformFits(spec, node, host)) return 'platform';
  if (wanted.some((p) => load.hostPorts.has(p))) return 'hostPort';
  const max = Number(spec.Placement?.MaxReplicas ?? 0);
  if (max > 0 && load.service >= max) return 'maxReplicas';
  return undefined;
}

function resourcesFit(spec: TaskSpec, node: NodeRecord, host: HostFacts, used: NodeLoad): boolean {
  const r = spec.Resources?.Reservations;
  const cpu = Number(r?.NanoCPUs ?? 0);
  const mem = Number(r?.MemoryBytes ?? 0);
  if (!cpu && !mem) return true;
  const d = node.description ?? { ncpu: host.ncpu, memTotal: host.memTotal };
  return !((cpu && used.cpu + cpu > d.ncpu * 1e9) || (mem && used.mem + mem > d.memTotal));
}

/** swarmkit names x86_64 amd64 and aarch64 arm64. */
const goArch = (arch: string | undefined) => (arch === 'x86_64' ? 'amd64' : arch === 'aarch64' ? 'arm64' : arch ?? '');

/** `Placement.Platforms` (the docker CLI fills it from the image): the node's must be one of them, when given. */
function platformFits(spec: TaskSpec, node: NodeRecord, host: HostFacts): boolean {
  const platforms = (spec.Placement?.Platforms ?? []) as { Architecture?: string; OS?: string }[];
  if (!platforms.length) return true;
  const arch = goArch(node.description?.architecture ?? host.architecture);
  return platforms.some((p) => (!p.Architecture || goArch(p.Architecture) === arch) && (!p.OS || p.OS === 'linux'));
}

/**
 * Among the nodes that fit: level by level of the spread preferences, the group (nodes with one value
 * of the label; a node without it is in the group of "") with the fewest tasks of the service, counted
 * over all the nodes given; then the node with the fewest tasks of the service, the fewest tasks at
 * all, the lowest id.
 */
function best(t: TaskRecord, fit: NodeRecord[], nodes: NodeRecord[], loadOf: (id: string) => NodeLoad): NodeRecord {
  const levels = spreadLevels(t.spec);
  const groupOf = (n: NodeRecord, level: number) => JSON.stringify(levels.slice(0, level + 1).map((f) => f(n)));
  const inGroup = new Map<string, number>();
  for (const n of nodes) {
    for (let l = 0; l < levels.length; l++) {
      const g = `${l}:${groupOf(n, l)}`;
      inGroup.set(g, (inGroup.get(g) ?? 0) + loadOf(n.id).service);
    }
  }
  const key = (n: NodeRecord): (number | string)[] => [
    ...levels.map((_, l) => inGroup.get(`${l}:${groupOf(n, l)}`) ?? 0),
    loadOf(n.id).service,
    loadOf(n.id).all,
    n.id,
  ];
  let pick = fit[0]!;
  let pickKey = key(pick);
  for (const n of fit.slice(1)) {
    const k = key(n);
    const i = k.findIndex((v, j) => v !== pickKey[j]);
    if (i >= 0 && k[i]! < pickKey[i]!) {
      pick = n;
      pickKey = k;
    }
  }
  return pick;
}

/** The value of each spread preference on a node: `node.labels.*` and `engine.labels.*` (none here) count, as in swarmkit. */
function spreadLevels(spec: TaskSpec): ((n: NodeRecord) => string)[] {
  const prefs = (spec.Placement?.Preferences ?? []) as { Spread?: { SpreadDescriptor?: string } }[];
  const levels: ((n: NodeRecord) => string)[] = [];
  for (const p of prefs) {
    const d = p.Spread?.SpreadDescriptor ?? '';
    if (d.length > 'node.labels.'.length && d.slice(0, 'node.labels.'.length).toLowerCase() === 'node.labels.') {
      const label = d.slice('node.labels.'.length);
      levels.push((n) => n.spec.Labels?.[label] ?? '');
    } else if (d.length > 'engine.labels.'.length && d.slice(0, 'engine.labels.'.length).toLowerCase() === 'engine.labels.') {
      // The engine has no labels of its own: every node is in the group of "".
      levels.push(() => '');
    }
  }
  return levels;
}

/** `key==value` or `key!=value`; values compare case-insensitively, as swarmkit does. */
export function constraintMet(expr: string, node: NodeRecord, host: HostFacts): boolean {
  const m = /^\s*([\w.-]+)\s*(==|!=)\s*(.*?)\s*$/.exec(expr);
  if (!m) return false;
  const [, key, op, want] = m as unknown as [string, string, '==' | '!=', string];
  const have = nodeAttribute(key, node, host);
  const equal = have !== undefined && have.toLowerCase() === want.toLowerCase();
  return op === '==' ? equal : !equal;
}

function nodeAttribute(key: string, node: NodeRecord, host: HostFacts): string | undefined {
  switch (key.toLowerCase()) {
    case 'node.id':
      return node.id;
    case 'node.hostname':
      return node.description?.hostname ?? host.name;
    case 'node.role':
      return node.spec.Role ?? 'manager';
    case 'node.platform.os':
      return 'linux';
    case 'node.platform.arch':
      return node.description?.architecture ?? host.architecture;
  }
  if (key.startsWith('node.labels.')) return node.spec.Labels?.[key.slice('node.labels.'.length)];
  // The engine has no labels of its own.
  if (key.startsWith('engine.labels.')) return undefined;
  return undefined;
}
