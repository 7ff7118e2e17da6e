/**
 * A node's heartbeat: its `alive/<node>` key bound to a lease of `ttlSeconds`, kept alive by the
 * client. A node whose key lapses is down for the leader.
 */
import type { Etcd3, Lease } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';
import { silence } from './etcd-client.js';

interface HeartbeatDeps {
  /** The client to use now. */
  client(): Etcd3;
  /** The key of `nodeId`'s heartbeat, and the value this node puts there. */
  key(nodeId: string): string;
  value(): string;
  closed(): boolean;
}

export class NodeHeartbeat {
  #lease: Lease | undefined;
  /** What started it: started again on a new client. */
  #of: { nodeId: string; ttlSeconds: number } | undefined;

  constructor(private readonly d: HeartbeatDeps) {}

  /**
   * Puts the key on a new lease; a lost lease, or one its key could not be put on, is replaced: once
   * (the first of the two failures to be heard replaces it; a lease that fails both ways must not
   * start two heartbeats, each of which would start two more).
   *
   * The one replaced is let go, never revoked: etcd3 calls a lease lost after two TTLs without an
   * answer, but etcd may hold it still (it renews every lease when a new raft leader is elected,
   * as after a quorum lost and back), and a revoke would delete the key: the node, alive, would be
   * down for the leader until the new lease holds it. Once it does, the old lease's expiry leaves
   * the key alone. Each call is bounded by the TTL, so that one made while etcd had no quorum does
   * not hold the new key back for the client's 10 s deadline.
   */
  start(nodeId: string, ttlSeconds: number): void {
    if (this.d.closed()) return;
    this.#of = { nodeId, ttlSeconds };
    const deadline = () => ({ deadline: new Date(Date.now() + ttlSeconds * 1000) });
    const lease = this.d.client().lease(ttlSeconds, deadline());
    this.#lease = lease;
    const replace = (what: string, err: unknown, delayMs: number) => {
      if (this.d.closed() || this.#lease !== lease) return;
      this.#lease = undefined;
      log.warn(what, { err: errorMessage(err) });
      silence(lease);
      lease.release();
      // Unless a new client's start (moveOn) came first: two leases would both hold the key.
      setTimeout(() => {
        if (!this.#lease) this.start(nodeId, ttlSeconds);
      }, delayMs).unref();
    };
    lease.on('lost', (err) => replace('swarm heartbeat lease lost; renewing', err, 500));
    lease
      .put(this.d.key(nodeId))
      .value(this.d.value())
      .options(deadline())
      .exec()
      .catch((err) => replace('swarm heartbeat failed; retrying', err, 1000));
  }

  /**
   * On a new client: the key on a lease of its own first, then the old lease only let go, not
   * revoked (that would delete the key: the node would look down meanwhile).
   */
  moveOn(): void {
    const old = this.#lease;
    silence(old);
    this.#lease = undefined;
    if (this.#of) this.start(this.#of.nodeId, this.#of.ttlSeconds);
    old?.release();
  }

  /** `leaving`: the key goes at once; otherwise it lapses by itself, so a quick restart is no death. */
  async close(leaving: boolean): Promise<void> {
    if (leaving) await this.#lease?.revoke().catch(() => undefined);
    else this.#lease?.release();
  }
}
