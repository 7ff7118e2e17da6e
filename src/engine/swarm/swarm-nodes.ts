/**
 * The nodes API: list, find (id, name, hostname, id prefix), update (availability, labels, role) and
 * remove. A role change of this node itself is carried out by SwarmMembership.
 */
import { invalidArgument, notFound } from '../../lib/errors.js';
import { SwarmPart, type SwarmCore } from './swarm-core.js';
import { outOfSequence, type NodeRecord, type NodeSpec } from './swarm-model.js';
import { hostPart } from './cluster/etcd-member.js';

function uniqueNodePrefix(all: NodeRecord[], prefix: string): NodeRecord | undefined {
  const hits = all.filter((n) => n.id.startsWith(prefix));
  if (hits.length > 1) throw invalidArgument(`node ${prefix} is ambiguous (${hits.length} matches found)`);
  return hits[0];
}

export class SwarmNodes extends SwarmPart {
  constructor(
    core: SwarmCore,
    /** This node was promoted or demoted here. */
    private readonly roleChanged: (role: 'manager' | 'worker') => void,
    /** A node changed here (`role`: its role, or it was removed): its etcd access follows (resolves once it has). */
    private readonly accessChanged: (id: string, role: boolean) => Promise<void>,
  ) {
    super(core);
  }

  /** Whether the node's heartbeat is current (a swarm without etcd: its one node is). */
  nodeReady(id: string): boolean {
    return this.store.clustered ? this.store.alive.has(id) : this.store.nodes.has(id);
  }

  nodes(): NodeRecord[] {
    this.core.cluster();
    return [...this.store.nodes.values()];
  }

  /** By id, name, hostname, then unique id prefix. */
  node(idOrName: string): NodeRecord {
    this.core.cluster();
    const all = [...this.store.nodes.values()];
    const found =
      this.store.nodes.get(idOrName) ??
      all.find((n) => n.spec.Name === idOrName) ??
      all.find((n) => (n.description?.hostname ?? this.d.host.name) === idOrName) ??
      (idOrName ? uniqueNodePrefix(all, idOrName) : undefined);
    if (!found) throw notFound(`node ${idOrName} not found`);
    return found;
  }

  /** Availability, labels, role of a node at `version` (dockerd's "update out of sequence" otherwise, as for services). */
  async updateNode(idOrName: string, version: number, spec: NodeSpec): Promise<void> {
    this.core.cluster();
    await this.store.linked();
    const n = this.node(idOrName);
    if (version !== n.version) throw outOfSequence();
    const availability = spec.Availability || 'active';
    if (!['active', 'pause', 'drain'].includes(availability)) throw invalidArgument(`invalid availability: ${availability}`);
    const role = spec.Role || n.spec.Role || 'manager';
    if (role !== 'manager' && role !== 'worker') throw invalidArgument(`invalid role: ${role}`);
    const managers = [...this.store.nodes.values()].filter((x) => x.spec.Role !== 'worker');
    if (role === 'worker' && n.spec.Role !== 'worker' && managers.length <= 1) throw invalidArgument('attempting to demote the last manager of the swarm');
    if (role !== n.spec.Role && !this.store.clustered) throw invalidArgument('attempting to demote the last manager of the swarm');
    const before = n.spec.Role;
    const next: NodeRecord = { ...n, spec: { ...(spec.Name ? { Name: spec.Name } : {}), Labels: spec.Labels ?? {}, Role: role, Availability: availability } };
    if (role === 'manager' && !next.managerAddr) next.managerAddr = `${hostPart(next.addr)}:2377`;
    this.store.touch(next);
    await this.store.commitNode(next, n);
    // Before the answer: a demoted node holds etcd's root no more once the client hears back.
    if (this.store.clustered) await this.accessChanged(n.id, role !== before);
    if (n.id === this.store.selfId && this.store.clustered && role !== before) this.roleChanged(role);
    this.core.reconcileAll('live');
  }

  /** A node that is down (or any worker, with force) leaves the node list; managers must be demoted first. */
  async removeNode(idOrName: string, force = false): Promise<void> {
    const n = this.node(idOrName);
    if (n.spec.Role !== 'worker') throw invalidArgument(`rpc error: code = FailedPrecondition desc = node ${n.id} is a cluster manager and is a member of the raft cluster. It must be demoted to worker before removal`);
    if (this.nodeReady(n.id) && !force) throw invalidArgument(`rpc error: code = FailedPrecondition desc = node ${n.id} is not down and can't be removed`);
    this.store.deleteNode(n.id);
    if (this.store.clustered) await this.accessChanged(n.id, true);
    this.core.reconcileAll('live');
  }
}
