/**
 * Placement: constraints (`node.role==manager`, `node.labels.zone!=b`, ...), availability, resource
 * reservations and the per-node replica cap decide which nodes may take a task; among them the one
 * with the fewest tasks of the service (then the fewest tasks at all) gets it, which spreads a
 * service evenly. A task no node fits waits as pending with swarmkit's "no suitable node" reason.
 */
import type { HostFacts } from '../system.js';
import { isTerminal, type NodeRecord, type TaskRecord, type TaskSpec } from './swarm-model.js';

const plural = (n: number) => `${n} node${n === 1 ? '' : 's'}`;

/** A node for the task, or why none fits. `tasks` are all tasks (live ones count). */
export function schedule(t: TaskRecord, nodes: NodeRecord[], tasks: Iterable<TaskRecord>, host: HostFacts): { node?: NodeRecord; problem?: string } {
  const live = [...tasks].filter((o) => o !== t && o.nodeId && !isTerminal(o.desiredState) && !isTerminal(o.status.state));
  const perNode = new Map<string, { service: number; all: number; cpu: number; mem: number }>();
  for (const o of live) {
    const c = perNode.get(o.nodeId) ?? { service: 0, all: 0, cpu: 0, mem: 0 };
    c.all++;
    if (o.serviceId === t.serviceId) c.service++;
    c.cpu += Number(o.spec.Resources?.Reservations?.NanoCPUs ?? 0);
    c.mem += Number(o.spec.Resources?.Reservations?.MemoryBytes ?? 0);
    perNode.set(o.nodeId, c);
  }
  const reasons = new Map<string, number>();
  let best: NodeRecord | undefined;
  let bestKey: [number, number, string] | undefined;
  for (const n of nodes) {
    const c = perNode.get(n.id) ?? { service: 0, all: 0, cpu: 0, mem: 0 };
    const problem = placementProblem(t.spec, n, host, c.service) ?? resourceProblem(t.spec, n, host, c);
    if (problem) {
      reasons.set(problem, (reasons.get(problem) ?? 0) + 1);
      continue;
    }
    const key: [number, number, string] = [c.service, c.all, n.id];
    if (!bestKey || key[0] < bestKey[0] || (key[0] === bestKey[0] && (key[1] < bestKey[1] || (key[1] === bestKey[1] && key[2] < bestKey[2])))) {
      best = n;
      bestKey = key;
    }
  }
  if (best) return { node: best };
  if (!nodes.length) return { problem: 'no suitable node (0 nodes available for new tasks)' };
  return { problem: `no suitable node (${[...reasons].map(([r, n]) => REASON_TEXT[r]!(n)).join('; ')})` };
}

const REASON_TEXT: Record<string, (n: number) => string> = {
  unavailable: (n) => `${plural(n)} not available for new tasks`,
  constraints: (n) => `scheduling constraints not satisfied on ${plural(n)}`,
  maxReplicas: () => 'max replicas per node limit exceed',
  resources: (n) => `insufficient resources on ${plural(n)}`,
};

function resourceProblem(spec: TaskSpec, node: NodeRecord, host: HostFacts, used: { cpu: number; mem: number }): string | undefined {
  const r = spec.Resources?.Reservations;
  const cpu = Number(r?.NanoCPUs ?? 0);
  const mem = Number(r?.MemoryBytes ?? 0);
  if (!cpu && !mem) return undefined;
  const d = node.description ?? { ncpu: host.ncpu, memTotal: host.memTotal };
  if ((cpu && used.cpu + cpu > d.ncpu * 1e9) || (mem && used.mem + mem > d.memTotal)) return 'resources';
  return undefined;
}

/** Why the task cannot be placed on the node (a REASON_TEXT key), or undefined when it can. */
function placementProblem(spec: TaskSpec, node: NodeRecord, host: HostFacts, replicasOnNode: number): string | undefined {
  if (node.spec.Availability !== 'active') return 'unavailable';
  const constraints = spec.Placement?.Constraints ?? [];
  if (!constraints.every((c) => constraintMet(c, node, host))) return 'constraints';
  const max = Number(spec.Placement?.MaxReplicas ?? 0);
  if (max > 0 && replicasOnNode >= max) return 'maxReplicas';
  return undefined;
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
