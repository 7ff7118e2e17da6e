/**
 * Placement on the one node: constraints (`node.role==manager`, `node.labels.zone!=b`, ...) and the
 * per-node replica cap decide whether a task may be assigned here, or waits as pending with
 * swarmkit's "no suitable node" reason.
 */
import type { HostFacts } from '../system.js';
import type { NodeRecord, TaskSpec } from './swarm-model.js';

/** Why the task cannot be placed on the node, or undefined when it can. */
export function placementProblem(spec: TaskSpec, node: NodeRecord, host: HostFacts, replicasOnNode: number): string | undefined {
  if (node.spec.Availability !== 'active') return 'no suitable node (1 node not available for new tasks)';
  const constraints = spec.Placement?.Constraints ?? [];
  if (!constraints.every((c) => constraintMet(c, node, host))) return 'no suitable node (scheduling constraints not satisfied on 1 node)';
  const max = Number(spec.Placement?.MaxReplicas ?? 0);
  if (max > 0 && replicasOnNode >= max) return 'no suitable node (max replicas per node limit exceed)';
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
      return host.name;
    case 'node.role':
      return node.spec.Role ?? 'manager';
    case 'node.platform.os':
      return 'linux';
    case 'node.platform.arch':
      return host.architecture;
  }
  if (key.startsWith('node.labels.')) return node.spec.Labels?.[key.slice('node.labels.'.length)];
  // The engine has no labels of its own.
  if (key.startsWith('engine.labels.')) return undefined;
  return undefined;
}
