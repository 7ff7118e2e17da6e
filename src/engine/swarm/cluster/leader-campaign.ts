/**
 * A manager's run for leader: an etcd election (etcd3's Campaign) on a lease of `ttlSeconds`. Once
 * elected it has a term (its election key and that key's create revision, cluster/etcd-writes.ts),
 * which the leader's writes compare so that etcd refuses them once the key is gone.
 *
 * It believes it leads only while etcd may still hold its lease: when no keep-alive was answered for
 * a whole TTL (a cut link fails nothing, the answers just stop coming) it takes itself for deposed,
 * as etcd will have by then (etcd3 says a lease is lost only after twice the TTL). It resigns then,
 * and its owner campaigns again.
 *
 * A leader whose client is replaced keeps its term (moveTo): the lease and the election key are
 * etcd's, not the old client's, so the new client keeps that lease alive (lease-keeper.ts) and
 * resigns through it.
 */
import type { Campaign, Etcd3, Lease } from 'etcd3';
import { errorMessage } from '../../../lib/errors.js';
import type { LeaderTerm } from './etcd-writes.js';
import { silence } from './etcd-client.js';
import { LeaseKeeper } from './lease-keeper.js';

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
  #leaseId: string | undefined;
  /** Once moved to another client: that client, which keeps the lease alive in place of etcd3's Lease. */
  #moved: { client: Etcd3; keeper: LeaseKeeper } | undefined;
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
    this.#leaseId = await this.#lease.grant();
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
    void this.#revoke().catch(() => undefined);
    this.events.lost(why);
  }

  #stop(): void {
    this.#over = true;
    this.#term = undefined;
    clearInterval(this.#timer);
    this.#moved?.keeper.stop();
  }

  /** The lease revoked (its election key goes with it), through the client that keeps it now. */
  async #revoke(): Promise<void> {
    if (!this.#moved || !this.#leaseId) return this.#campaign.resign();
    await this.#moved.client.leaseClient.leaseRevoke({ ID: this.#leaseId });
  }

  /** Stops campaigning; a leader resigns (its key goes, a successor is elected at once). */
  async resign(): Promise<void> {
    if (this.#over) return;
    this.#stop();
    await this.#revoke().catch(() => undefined);
  }

  /**
   * The client is being replaced by `client`: a leader carries its term over to it and answers true;
   * a candidate answers false (it abandons and campaigns anew: nothing to keep). The old keep-alive
   * stops first (etcd3's Lease.release() ends its stream and revokes nothing): one still open to a
   * member that is up must not renew the lease behind the new client's back, whose answers alone now
   * tell the lapse check that etcd still holds it. The old campaign is silenced: its lease, released,
   * may still report itself lost.
   */
  moveTo(client: Etcd3): boolean {
    if (this.#over || !this.#term || !this.#leaseId) return false;
    if (this.#moved) this.#moved.keeper.stop();
    else {
      silence(this.#campaign);
      silence(this.#lease);
      this.#lease.release();
    }
    const keeper = new LeaseKeeper(client, this.#leaseId, this.ttlSeconds, {
      renewed: (sentAt) => (this.#renewedFrom = Math.max(this.#renewedFrom, sentAt)),
      gone: () => this.#end('etcd no longer holds its lease'),
    });
    this.#moved = { client, keeper };
    return true;
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
