/**
 * What each node may do in the etcd berthd runs (cluster/etcd-auth.ts), kept in step with the node
 * records. A role change made on this manager takes effect before the API answers: the record goes
 * to etcd first, then a demoted node's etcd member is removed by this manager (which holds root), then
 * the node's user is rewritten, so a demoted node holds root no more from that answer on. Whatever
 * such a change left half-done (its manager died midway) the leader finishes: on taking leadership
 * and on each node change it sets every user as its node's record says, removes the etcd members of
 * nodes that are no managers, and drops the address claims of nodes removed from the swarm.
 * It also removes a learner member added for a join that never started (its joiner failed or gave
 * up): etcd takes one learner at a time, so such a member would refuse every later manager join.
 */
import { EtcdAuth } from './cluster/etcd-auth.js';
import type { Membership } from './cluster/membership.js';
import type { EtcdState } from './cluster/etcd-state.js';
import { errorMessage } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { SerialRerun } from '../../lib/serial-rerun.js';
import type { SwarmCore } from './swarm-core.js';
import { heartbeatSeconds } from './swarm-model.js';

/**
 * How long a learner may stay unstarted (no name) before the leader takes it for abandoned: well past
 * the joiner's own 20 s limit and its member's start, and longer on a slow cluster's heartbeat.
 */
function unstartedGraceMs(heartbeatS: number): number {
  return Math.max(30_000, 12 * heartbeatS * 1000);
}

/** Removes the etcd member named `name` (a node id) when there is one; another removing it meanwhile is no error. */
export async function removeMember(state: EtcdState, name: string): Promise<boolean> {
  const find = async () => (await state.client.cluster.memberList({})).members.find((m) => m.name === name);
  const m = await find();
  if (!m) return false;
  try {
    await state.client.cluster.memberRemove({ ID: m.ID });
  } catch (err) {
    if (await find()) throw err;
  }
  return true;
}

export class SwarmAccess {
  readonly #repairs = new SerialRerun(() => this.#repair(), (err) => log.warn('repairing etcd access failed', { err: errorMessage(err) }));
  /** Unstarted learner members (by etcd member id) and when this leader first saw each. */
  readonly #unstarted = new Map<string, number>();
  #recheck: NodeJS.Timeout | undefined;

  constructor(
    private readonly core: SwarmCore,
    private readonly members: Membership,
  ) {}

  /** The etcd's access control, on the etcd berthd runs only (an external one is its operator's). */
  auth(state = this.members.state): EtcdAuth | undefined {
    return state && !this.core.d.externalEtcd ? new EtcdAuth(state.client, state.prefix) : undefined;
  }

  /** A manager here changed a node (`role`: its role, or removed it): its etcd access follows, now. */
  async nodeChanged(id: string, role = true): Promise<void> {
    const state = this.members.state;
    const auth = this.auth(state);
    if (!state || !auth) return;
    if (!role) return this.repair();
    try {
      // The record first: the leader's repair, which goes by etcd's records, then agrees with what follows.
      await state.flushed();
      const n = this.core.store.nodes.get(id);
      if (!n) {
        await auth.removeNode(id);
      } else if (n.spec.Role === 'worker') {
        // A manager demoting itself stops leading while its user may still resign.
        if (id === this.core.store.selfId) await state.resign();
        if (await removeMember(state, id)) log.info('the demoted node\'s etcd member was removed', { node: id });
        await auth.setNode(id, 'worker');
      } else {
        await auth.setNode(id, 'manager');
      }
    } catch (err) {
      log.warn('changing a node\'s etcd access failed; the leader repairs it', { node: id, err: errorMessage(err) });
    }
    this.repair();
  }

  /** The leader brings etcd's users, members and claims in line with the node records (in the background, one pass at a time). */
  repair(): void {
    // A leader that demoted itself is leading no more, whatever it has not heard yet.
    if (this.core.leads && this.core.store.cluster?.node.spec.Role === 'manager' && this.auth()) this.#repairs.run();
  }

  async #repair(): Promise<void> {
    const state = this.members.state;
    const auth = this.auth(state);
    if (!state || !auth || !this.core.leads) return;
    // The members before the records: a joining manager's member gets its name only once the node
    // runs it, after its record was written, so every named member listed here has its record in
    // what reconcile reads next. Listed after, a member of a node admitted meanwhile would look like
    // one of no node, and be removed before it could catch up.
    const members = (await state.client.cluster.memberList({})).members;
    const { nodes, changed } = await auth.reconcile(this.core.store.selfId);
    if (!nodes.has(this.core.store.selfId)) return;
    if (changed.length) log.info('etcd users repaired to match the node records', { nodes: changed });
    await this.#dropAbandoned(state, members.filter((m) => !m.name && m.isLearner).map((m) => m.ID));
    for (const m of members) {
      // Unnamed: a member added for a join, not started yet. A node whose record does not read keeps its member.
      if (!m.name || (nodes.has(m.name) && nodes.get(m.name) !== 'worker')) continue;
      if (await removeMember(state, m.name)) log.info('removed the etcd member of a node that is no manager', { node: m.name });
    }
    // Claims of nodes gone from the swarm (a node that is only down still holds its containers).
    const claims = await state.client.getAll().prefix(`${state.prefix}addresses/`).strings();
    for (const [key, value] of Object.entries(claims)) {
      let node: unknown;
      try {
        node = (JSON.parse(value) as { d?: { node?: unknown } }).d?.node;
      } catch {
        continue;
      }
      if (typeof node !== 'string' || nodes.has(node)) continue;
      // Only while this node leads (its term's election key is still there), as every leader's write.
      const term = state.term;
      if (!term) return;
      const res = await state.client.if(key, 'Value', '==', value).and(term.key, 'Create', '==', term.revision).then(state.client.delete().key(key)).commit();
      if (res.succeeded) log.info('dropped the address claim of a removed node', { key, node });
    }
  }

  /** Removes the unstarted learners seen for longer than the grace, and looks again once the others' grace has passed. */
  async #dropAbandoned(state: EtcdState, unstarted: string[]): Promise<void> {
    const now = Date.now();
    const grace = unstartedGraceMs(heartbeatSeconds(this.core.store.cluster));
    for (const id of this.#unstarted.keys()) if (!unstarted.includes(id)) this.#unstarted.delete(id);
    for (const id of unstarted) {
      const since = this.#unstarted.get(id) ?? now;
      this.#unstarted.set(id, since);
      if (now - since < grace) continue;
      try {
        await state.client.cluster.memberRemove({ ID: id });
        log.info('removed an etcd learner member whose join never started it', { member: id, unstartedFor: now - since });
      } catch (err) {
        log.warn('removing an abandoned etcd learner member failed', { member: id, err: errorMessage(err) });
      }
      this.#unstarted.delete(id);
    }
    if (this.#unstarted.size && !this.#recheck) {
      this.#recheck = setTimeout(() => {
        this.#recheck = undefined;
        this.repair();
      }, grace).unref();
    }
  }
}
