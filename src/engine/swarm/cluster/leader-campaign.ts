/**
 * A manager's run for leader: an etcd election (etcd3's Campaign) on a lease of `ttlSeconds`. Once
 * elected it has a term (its election key and that key's create revision, cluster/etcd-writes.ts),
 * which the leader's writes compare so that etcd refuses them once the key is gone.
 *
 * It believes it leads only while etcd may still hold its lease: when no keep-alive was answered for
 * a whole TTL (a cut link fails nothing, the answers just stop coming) it takes itself for deposed,
 * as etcd will have by then (etcd3 says a lease is lost only after twice the TTL). It resigns then,
 * and its owner campaigns again.
 */
import type { Campaign, Etcd3, Lease } from 'etcd3';
import { errorMessage } from '../../../lib/errors.js';
import type { LeaderTerm } from './etcd-writes.js';

/** How often the keep-alives' last answer is looked at. */
const LAPSE_CHECK_MS = 200;

export interface CampaignEvents {
  elected(term: LeaderTerm): void;
  /** The campaign is over (lease lost or lapsed, an error), elected or not; not after resign(). */
  lost(why: string): void;
}

export class LeaderCampaign {
  #term: LeaderTerm | undefined;
  #over = false;
  readonly #campaign: Campaign;
  /** The campaign's lease (etcd3 keeps it private). */
  readonly #lease: Lease;
  /** When the last keep-alive etcd answered was sent: the lease holds until then + TTL at least. */
  #renewedFrom = Date.now();
  #firedAt = Date.now();
  readonly #timer: NodeJS.Timeout;

  constructor(
    client: Etcd3,
    name: string,
    value: string,
    private readonly ttlSeconds: number,
    private readonly events: CampaignEvents,
  ) {
    const c = client.election(name, ttlSeconds).campaign(value);
    this.#campaign = c;
    this.#lease = (c as unknown as { lease: Lease }).lease;
    this.#lease.on('keepaliveFired', () => (this.#firedAt = Date.now()));
    this.#lease.on('keepaliveSucceeded', () => (this.#renewedFrom = Math.max(this.#renewedFrom, this.#firedAt)));
    c.on('elected', () => void this.#elected().catch((err) => this.#end(errorMessage(err))));
    // Kept for good: an EventEmitter without an error listener throws.
    c.on('error', (err) => this.#end(errorMessage(err)));
    let tick = Date.now();
    this.#timer = setInterval(() => {
      const now = Date.now();
      // This process was held up itself: answers that came meanwhile are read first.
      const late = now - tick > 2 * LAPSE_CHECK_MS;
      tick = now;
      // Only a leader's belief matters (a candidate decides nothing); elected late, it checks at once.
      if (!late && this.#term && now - this.#renewedFrom > this.ttlSeconds * 1000) this.#end(`no keep-alive of its lease was answered for ${this.ttlSeconds} s`);
    }, LAPSE_CHECK_MS);
    this.#timer.unref();
  }

  /** The term while elected. */
  get term(): LeaderTerm | undefined {
    return this.#term;
  }

  async #elected(): Promise<void> {
    const key = await this.#campaign.getCampaignKey();
    const revision = (this.#campaign as unknown as { keyRevision?: unknown }).keyRevision;
    if (this.#over) return;
    if (typeof revision !== 'string') throw new Error('the election key has no revision');
    this.#term = { key, revision };
    this.events.elected(this.#term);
  }

  /** etcd refused a write of this term: its election key is gone, whatever the lease says. */
  deposed(): void {
    this.#end('etcd no longer holds its election key');
  }

  #end(why: string): void {
    if (this.#over) return;
    this.#stop();
    void this.#campaign.resign().catch(() => undefined);
    this.events.lost(why);
  }

  #stop(): void {
    this.#over = true;
    this.#term = undefined;
    clearInterval(this.#timer);
  }

  /** Stops campaigning; a leader resigns (its key goes, a successor is elected at once). */
  async resign(): Promise<void> {
    if (this.#over) return;
    this.#stop();
    await this.#campaign.resign().catch(() => undefined);
  }

  /**
   * Stops campaigning on a client being replaced: the lease is revoked through `client`, the new one
   * (a keep-alive stream still open on the old client to a member that is up would keep it alive).
   */
  abandon(client: Etcd3): void {
    if (this.#over) return;
    this.#stop();
    this.#lease.release();
    void this.#lease
      .grant()
      .then((ID) => client.leaseClient.leaseRevoke({ ID }))
      .catch(() => undefined);
  }
}
