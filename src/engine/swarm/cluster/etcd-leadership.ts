/**
 * Who leads the swarm, through etcd: this manager's campaign (leader-campaign.ts), the announcement
 * a new leader makes of its term before it decides anything, and the observer that tells every node
 * who leads. EtcdState owns it and moves it to a new client when it replaces one.
 *
 * A new leader announces its term with a write guarded by it (`leader-term`) and waits until its own
 * watch delivered that write: its cache then holds everything decided before it won, and it never
 * reconciles from a cache that lags behind etcd (a manager whose link just came back, say).
 */
import type { Etcd3, ElectionObserver } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';
import { silence } from './etcd-client.js';
import { LeaderCampaign } from './leader-campaign.js';
import type { EtcdWrites, LeaderTerm, WriteOutcome } from './etcd-writes.js';

/** Where a leader announces its term (under the prefix, so every manager's watch sees it). */
export const TERM_KEY = 'leader-term';

export interface LeadershipDeps {
  /** The client to use now. */
  client(): Etcd3;
  prefix: string;
  closed(): boolean;
  writes: EtcdWrites;
  /** Reads keys back from etcd into the cache (a deposed leader's decisions). */
  reread(keys: string[]): void;
  /** The revision this node's watches delivered everything up to. */
  watched(): bigint;
  /** The value this node writes for a document. */
  encode(doc: unknown): string;
}

export class EtcdLeadership {
  #campaign: LeaderCampaign | undefined;
  #campaignOf: { nodeId: string; ttlSeconds: number; onChange: (term: LeaderTerm | undefined) => void } | undefined;
  #observer: ElectionObserver | undefined;
  #observerOf: ((id: string | undefined) => void) | undefined;

  constructor(private readonly d: LeadershipDeps) {}

  get #name(): string {
    return `${this.d.prefix}leader`;
  }

  /** The leadership this node holds now (undefined: it does not lead). */
  get term(): LeaderTerm | undefined {
    return this.#campaign?.term;
  }

  /**
   * Campaigns for leadership: `onChange(term)` once elected, `onChange(undefined)` when the campaign
   * is lost; then it campaigns again.
   */
  campaign(nodeId: string, ttlSeconds: number, onChange: (term: LeaderTerm | undefined) => void): void {
    // One campaign at a time: a second would hold a lease of its own and could win unheard.
    if (this.d.closed() || this.#campaign) return;
    this.#campaignOf = { nodeId, ttlSeconds, onChange };
    const c: LeaderCampaign = new LeaderCampaign(this.d.client(), this.#name, nodeId, ttlSeconds, {
      elected: (term) => {
        if (this.#campaign === c) onChange(term);
      },
      lost: (why) => {
        if (this.#campaign !== c) return;
        this.#campaign = undefined;
        log.warn('swarm leader campaign ended', { err: why });
        this.#lost(why);
        // Again unless this node stopped campaigning meanwhile (resign(): demoted, closing): it must not run unasked.
        if (!this.d.closed()) setTimeout(() => this.#campaignOf?.onChange === onChange && this.campaign(nodeId, ttlSeconds, onChange), 500).unref();
      },
    });
    this.#campaign = c;
  }

  /**
   * The campaign is over: what this node decided as leader and etcd has not taken yet is dropped
   * (etcd would refuse it now) and read back; the owner hears it no longer leads.
   */
  #lost(why: string): void {
    const stale = this.d.writes.forget((_, guard) => guard.term !== undefined);
    if (stale.length) {
      log.warn('dropped the decisions etcd had not taken before this node stopped leading', { writes: stale.length, why });
      this.d.reread(stale);
    }
    this.#campaignOf?.onChange(undefined);
  }

  /** etcd refused a write of `term`: its election key is gone (expired unheard, or deleted), whatever its lease says. */
  deposed(term: LeaderTerm): void {
    if (this.#campaign?.term === term) this.#campaign.deposed();
  }

  /**
   * Once elected: announces the term (a write guarded by it) and waits until this node's watch has
   * delivered that write. False when the term ended meanwhile.
   */
  async announce(term: LeaderTerm, nodeId: string): Promise<boolean> {
    let outcome: WriteOutcome | undefined;
    for (let delay = 200; this.term === term && !outcome; delay = Math.min(delay * 2, 2000)) {
      try {
        outcome = await this.d.writes.commit(TERM_KEY, this.d.encode({ node: nodeId, term: term.key, since: new Date().toISOString() }), { term });
      } catch (err) {
        log.debug('announcing the leader term failed; retrying', { err: errorMessage(err) });
        await new Promise((r) => setTimeout(r, delay));
      }
    }
    if (!outcome?.landed) {
      if (outcome?.why === 'deposed') this.deposed(term);
      return false;
    }
    const at = BigInt(outcome.revision);
    const since = Date.now();
    let warned = false;
    while (this.term === term && this.d.watched() < at) {
      if (!warned && Date.now() - since > 10_000) {
        warned = true;
        log.warn('the new leader waits for its watch to catch up with etcd', { at: String(at), watched: String(this.d.watched()) });
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    return this.term === term;
  }

  /** Stops campaigning (and resigns, when leading). */
  async resign(): Promise<void> {
    const c = this.#campaign;
    this.#campaign = undefined;
    this.#campaignOf = undefined;
    await c?.resign();
  }

  /** Calls `onLeader` with the leader's node id whenever it changes. */
  async observeLeader(onLeader: (id: string | undefined) => void): Promise<void> {
    this.#observerOf = onLeader;
    const client = this.d.client();
    const again = () => {
      if (!this.d.closed() && this.d.client() === client) setTimeout(() => void this.observeLeader(onLeader).catch(() => again()), 1000).unref();
    };
    const o = await client.election(this.#name).observe();
    // Reconnected meanwhile: the observer on the new client is the one.
    if (this.d.client() !== client) return void o.cancel().catch(() => undefined);
    this.#observer = o;
    onLeader(o.leader());
    o.on('change', (id) => onLeader(id));
    o.on('error', () => {
      void o.cancel().catch(() => undefined);
      again();
    });
  }

  /**
   * The client is being replaced by `next`: the observer goes. A leader keeps its term, moved to the
   * new client (leader-campaign.ts): a member its client used going silent, even another's, must not
   * cost the swarm its leader. A candidate's campaign goes (its lease revoked through the new client:
   * a keep-alive stream on the old one to a member that is up would keep it alive, and the old
   * campaign could then win with nobody behind it). Answers whether to campaign anew, for `resume`.
   */
  leave(next: Etcd3): boolean {
    const o = this.#observer;
    this.#observer = undefined;
    silence(o);
    void o?.cancel().catch(() => undefined);
    const c = this.#campaign;
    if (!c) return false;
    if (c.moveTo(next)) {
      log.info('this node leads on through its new etcd client', { term: c.term?.key });
      return false;
    }
    this.#campaign = undefined;
    c.abandon(next);
    this.#lost('this node connected to other etcd members');
    return true;
  }

  /** On the new client: the observer again, and the campaign when it was abandoned. */
  resume(campaignAnew: boolean): void {
    if (this.#observerOf) void this.observeLeader(this.#observerOf).catch(() => undefined);
    if (campaignAnew && this.#campaignOf) this.campaign(this.#campaignOf.nodeId, this.#campaignOf.ttlSeconds, this.#campaignOf.onChange);
  }

  async close(): Promise<void> {
    await this.#observer?.cancel().catch(() => undefined);
    await this.resign();
  }
}
