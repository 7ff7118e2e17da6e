/**
 * Keeps alive, through `client`, a lease another client was granted: a lease is etcd's, not a
 * connection's, so a leader's client replaced by a new one keeps its term (leader-campaign.ts).
 * etcd's LeaseKeepAlive stream, as etcd3's own Lease runs it: the lease's ID written every TTL/3,
 * each request answered in turn with the TTL left, 0 once etcd no longer holds the lease. What an
 * answer means for a term is its owner's to judge: it hears when each renewed request was sent.
 */
import type { Etcd3, IDuplexStream, ILeaseKeepAliveRequest, ILeaseKeepAliveResponse } from 'etcd3';

/** A stream that failed is opened again this soon (the client tries its other members). */
const REOPEN_MS = 500;

export interface KeeperEvents {
  /** etcd renewed the lease on the request sent at `sentAt` (ms). */
  renewed(sentAt: number): void;
  /** etcd no longer holds the lease (the keeper has stopped). */
  gone(): void;
}

export class LeaseKeeper {
  #stopped = false;
  #stream: IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse> | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: Etcd3,
    private readonly id: string,
    private readonly ttlSeconds: number,
    private readonly events: KeeperEvents,
  ) {
    void this.#open();
  }

  async #open(): Promise<void> {
    let stream: IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;
    try {
      stream = await this.client.leaseClient.leaseKeepAlive();
    } catch {
      return this.#again();
    }
    if (this.#stopped) return void stream.end();
    this.#stream = stream;
    /** When each request not answered yet was sent: etcd answers them in order. */
    const sent: number[] = [];
    const send = () => {
      sent.push(Date.now());
      stream.write({ ID: this.id });
    };
    stream.on('data', (res: ILeaseKeepAliveResponse) => {
      if (this.#stream !== stream) return;
      const at = sent.shift();
      if (Number(res.TTL) <= 0) {
        this.stop();
        this.events.gone();
      } else if (at !== undefined) this.events.renewed(at);
    });
    // Kept after the stream is left too: an error without a listener would throw.
    const broken = () => {
      if (this.#stream !== stream) return;
      this.#close();
      this.#again();
    };
    stream.on('error', broken);
    stream.on('end', broken);
    this.#timer = setInterval(send, (this.ttlSeconds * 1000) / 3);
    this.#timer.unref();
    send();
  }

  #again(): void {
    if (!this.#stopped) setTimeout(() => void this.#open(), REOPEN_MS).unref();
  }

  #close(): void {
    clearInterval(this.#timer);
    this.#stream?.end();
    this.#stream = undefined;
  }

  /** No more keep-alives from here (the lease is left to etcd: revoked by its owner, or to lapse). */
  stop(): void {
    this.#stopped = true;
    this.#close();
  }
}
