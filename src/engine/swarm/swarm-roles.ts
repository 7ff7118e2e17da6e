/**
 * This node's roles in the swarm: leading (won through the etcd election; the leader decides once
 * its watch caught up with etcd, and takes nodes without a heartbeat for down after a grace period
 * of one heartbeat TTL), and promotion or demotion, which change the keys it holds
 * (cluster/manager-keys.ts) and its etcd membership.
 */
import { errorMessage } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { Membership } from './cluster/membership.js';
import type { ManagerKeys } from './cluster/manager-keys.js';
import { NO_TOKENS } from './cluster/sealed-tokens.js';
import { workerReadRanges } from './cluster/etcd-auth.js';
import { SwarmPart, type SwarmCore } from './swarm-core.js';
import type { SwarmPeers } from './swarm-peers.js';
import type { SwarmSync } from './swarm-sync.js';
import type { SwarmAccess } from './swarm-access.js';
import type { LeaderTerm } from './cluster/etcd-writes.js';
import { heartbeatSeconds } from './swarm-model.js';

/** How often a promoted node tries to make its etcd member join before it gives up. */
const MEMBER_ATTEMPTS = 3;
/** The leader's campaign lease lasts this long at least (campaignTtl). */
const CAMPAIGN_TTL_MIN_S = 10;

export class SwarmRoles extends SwarmPart {
  #graceTimer: NodeJS.Timeout | undefined;
  #membershipChange: Promise<void> = Promise.resolve();

  constructor(
    core: SwarmCore,
    private readonly members: Membership,
    private readonly keys: ManagerKeys,
    private readonly peers: SwarmPeers,
    private readonly sync: SwarmSync,
    private readonly access: SwarmAccess,
  ) {
    super(core);
  }

  stopGrace(): void {
    clearTimeout(this.#graceTimer);
  }

  /** Seconds without a heartbeat after which a node is down (3 heartbeat periods, at least 2 s). */
  heartbeatTtl(): number {
    const period = heartbeatSeconds(this.store.cluster);
    return Math.max(2, Math.ceil(3 * period));
  }

  /**
   * The TTL of the leader's campaign lease: the heartbeat's, but CAMPAIGN_TTL_MIN_S at least. etcd
   * answers no keep-alive while it has no quorum (an etcd member of two restarting, or a raft
   * election), and a leader takes itself for deposed after a TTL without one: with a short
   * heartbeat (1 s: a 3 s TTL) every such pause cost the swarm its leader, and a leader's updates in
   * flight, for a re-election. A leader that dies is succeeded after this long at most.
   */
  campaignTtl(): number {
    return Math.max(CAMPAIGN_TTL_MIN_S, this.heartbeatTtl());
  }

  /**
   * Elected (its term), or leading no more (undefined). A new leader first announces its term and
   * waits until its own watch delivered that announcement (EtcdState.announce): it decides from a
   * cache that holds everything decided before it won, never from what it has not heard yet.
   */
  onLeadership(term: LeaderTerm | undefined): void {
    const state = this.members.state;
    if (!term || !state) return this.#standDown();
    void state
      .announce(term, this.store.selfId)
      .then((current) => {
        if (current && state.term === term && !this.core.closed) this.#lead();
      })
      .catch((err) => log.warn('taking the lead failed', { err: errorMessage(err) }));
  }

  #standDown(): void {
    if (!this.core.leader) return;
    this.core.leader = false;
    clearTimeout(this.#graceTimer);
    log.info('this node no longer leads the swarm', { node: this.store.selfId });
    this.updater.close();
  }

  #lead(): void {
    if (this.core.leader) return;
    this.core.leader = true;
    log.info('this node leads the swarm', { node: this.store.selfId });
    // Nodes without a heartbeat get one period of grace: a new leader must not take a restart for a death.
    const ttl = this.heartbeatTtl() * 1000;
    this.store.graceUntil = Date.now() + ttl;
    clearTimeout(this.#graceTimer);
    this.#graceTimer = setTimeout(() => this.core.reconcileAll('live'), ttl + 100);
    this.#graceTimer.unref();
    this.sync.leads();
    this.core.takeOver();
    // Unplaced tasks get a node; tasks to remove that their node reported gone meanwhile are deleted.
    for (const t of this.store.tasks.values()) if (!t.nodeId || t.desiredState === 'remove') this.runner.advance(t);
    // A role change its manager left half-done (it died midway) is finished by the next leader.
    this.access.repair();
  }

  /** This node was promoted or demoted. */
  roleChanged(role: 'manager' | 'worker'): void {
    const state = this.members.state;
    if (!state) return;
    log.info('this node\'s role changed', { role });
    if (role === 'worker') {
      void state.resign();
      this.onLeadership(undefined);
    }
    // One change at a time, each for the role the node has by then (a quick demote and promote again).
    // A promoted node campaigns once it has the keys: by then etcd gives its user root (the
    // promoting manager grants it after writing the node's record, which this node may hear first).
    this.#membershipChange = this.#membershipChange
      .then(() => this.#keysFor().catch((err) => log.error('changing this node\'s keys failed', { role, err: errorMessage(err) })))
      .then(() => this.#campaignIfManager())
      .then(() => this.#memberFor())
      .catch((err) => log.error('changing this node\'s etcd membership failed', { role, err: errorMessage(err) }));
  }

  /** A manager (still, after its keys came) runs for leader. */
  #campaignIfManager(): void {
    const state = this.members.state;
    if (!state || this.core.closed || this.store.cluster?.node.spec.Role === 'worker') return;
    state.campaign(this.store.selfId, this.campaignTtl(), (term) => this.onLeadership(term));
  }

  /** A promoted node gets the data key (then opens the secrets etcd holds); a demoted one drops the managers' keys. */
  async #keysFor(): Promise<void> {
    const c = this.store.cluster;
    const state = this.members.state;
    if (!c || !state || this.core.closed) return;
    if (c.node.spec.Role === 'worker') {
      await this.dropKeys();
      // What a worker may read of etcd (etcd-auth.ts), watched from now on.
      state.restrictReads(workerReadRanges(state.prefix));
      // etcd may refuse a moment ("revision of auth store is old") while the node's user changes.
      for (let attempt = 0; ; attempt++) {
        try {
          return await state.rewatch((await state.snapshot()).revision);
        } catch (err) {
          if (attempt >= 20 || this.core.closed || this.store.cluster?.node.spec.Role !== 'worker') throw err;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    }
    // The other managers may hear of the promotion a moment after this node does (and let etcd know).
    state.restrictReads(undefined);
    for (let attempt = 0; ; attempt++) {
      try {
        await this.keys.adopt(this.peers.managerAddrs());
        await state.rewatch(await this.sync.openBlobs(state));
        return;
      } catch (err) {
        if (attempt >= 20 || this.core.closed || this.store.cluster?.node.spec.Role === 'worker') throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** A worker holds neither the data key nor the CA key, nor any secret, config or join token. */
  async dropKeys(): Promise<void> {
    await this.keys.drop();
    for (const b of Object.values(this.blobs)) b.clear();
    const c = this.store.cluster;
    if (c && (c.joinTokens.worker || c.joinTokens.manager)) {
      c.joinTokens = { ...NO_TOKENS };
      this.store.saveCluster(true);
    }
  }

  /** A promoted node becomes an etcd member (learner first), a demoted one leaves etcd's member list. */
  async #memberFor(): Promise<void> {
    const c = this.store.cluster;
    const local = c?.local;
    if (!c || !local || this.d.externalEtcd || this.core.closed) return;
    const role = c.node.spec.Role === 'worker' ? 'worker' : 'manager';
    if (role === 'manager' && local.member && !(await this.members.memberListed(Membership.peerUrl(c.node.addr, local.member.peerPort)))) {
      // Removed under it: a demotion that a quick promotion overtook (the demoting manager removes
      // the member before it answers). etcd takes that member back never: its data goes, and the
      // node joins anew below, as a promoted node does.
      const own = Membership.clientUrl(c.node.addr, local.member.clientPort);
      log.info('this node\'s etcd member was removed while it was demoted; joining etcd again', { node: c.node.id });
      await this.members.leaveMember(c.node.id);
      local.member = undefined;
      local.endpoints = local.endpoints.filter((e) => e !== own);
    }
    if (role === 'manager' && !local.member) {
      const joined = await this.#becomeMember(c.node.id, c.node.addr, c.id);
      if (!joined) return;
      const { clientUrl, ...member } = joined;
      local.member = member;
      local.endpoints = [...local.endpoints.filter((e) => e !== clientUrl), clientUrl];
    } else if (role === 'worker' && local.member) {
      const own = Membership.clientUrl(c.node.addr, local.member.clientPort);
      await this.members.leaveMember(c.node.id);
      local.member = undefined;
      local.endpoints = local.endpoints.filter((e) => e !== own);
    } else {
      return;
    }
    this.store.saveCluster(true);
    log.info('this node\'s etcd membership changed', { role, endpoints: local.endpoints });
  }

  /**
   * This node's etcd member added, started and promoted, tried again a few times while the node is
   * still a manager (its member removed under it, etcd busy, a learner of a join in the way): a
   * manager without a member of its own would cost the cluster the fault tolerance it was promoted
   * for. Undefined when the node was demoted (or berthd stops) meanwhile: it wants no member then.
   */
  async #becomeMember(nodeId: string, addr: string, clusterId: string): Promise<Awaited<ReturnType<Membership['becomeMember']>> | undefined> {
    const stillManager = () => !this.core.closed && this.store.cluster?.node.spec.Role !== 'worker';
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.members.becomeMember(nodeId, addr, clusterId, stillManager);
      } catch (err) {
        if (!stillManager()) {
          log.info('this node was demoted before its etcd member joined; it gave the member up', { err: errorMessage(err) });
          return undefined;
        }
        if (attempt >= MEMBER_ATTEMPTS) throw err;
        log.warn('this node\'s etcd member did not join; trying again', { attempt, err: errorMessage(err) });
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }
}
