/**
 * Network namespaces made ready ahead of time, so that a container start usually costs no process at
 * all for its network: the namespace file, loopback up and (for the default bridge) eth0 with its
 * address, MAC and default route, and the host end on the bridge. A start takes one and links it to
 * the container's path (see NetnsDir.adopt); the pool is topped up in the background afterwards. A
 * namespace with only loopback also serves a container on any other bridge network, whose interfaces
 * are then put in from berthd itself (netlink-plumbing.ts).
 *
 * An entry's address is reserved while it waits, so a ready namespace's address is the lowest one
 * free when it was made, not when it is taken. Entries are not persisted: a daemon removes
 * unadopted ones at shutdown and, after a crash, at its next start.
 */
import { log } from '../lib/log.js';
import { errorMessage } from '../lib/errors.js';

export interface ReadyNetns {
  /** The namespace file's name in the namespace directory. */
  name: string;
  /** '' for a namespace with only loopback. */
  networkId: string;
  hostVeth: string;
  ipv4: string;
  ipv4PrefixLen: number;
  mac: string;
  ready: boolean;
}

/** Allocates an entry (synchronously, so its address is reserved at once) and starts making it. */
export type MakeReady = () => { entry: ReadyNetns; done: Promise<void> } | undefined;

/** An entry handed out, ready or still being made: `done` settles when it is (rejects if that failed). */
export interface TakenNetns {
  entry: ReadyNetns;
  done: Promise<void>;
}

const MAX_FAILURES = 3;
/** Entries made at once (as many as the driver's tool shells). */
const PARALLEL = 4;
/** How long a container just created counts as about to start, and the most entries that adds. */
const ANTICIPATION_MS = 30_000;
const MAX_ANTICIPATED = 14;

export class ReadyPool {
  readonly #size: number;
  readonly #make: MakeReady;
  readonly #entries = new Map<string, TakenNetns>();
  /** When each anticipated start stops counting (see anticipate). */
  #anticipated: number[] = [];
  #filling: Promise<void> | undefined;
  #failures = 0;

  constructor(size: number, make: MakeReady) {
    this.#size = size;
    this.#make = make;
  }

  /**
   * A container was created that will likely start soon and take an entry: the pool grows by one for a
   * while, so that containers created together and then started together (compose) find theirs made
   * while they were being created rather than each making one during its start.
   */
  anticipate(): void {
    if (this.#size === 0) return;
    this.#anticipated.push(Date.now() + ANTICIPATION_MS);
    this.refill();
  }

  #target(): number {
    const now = Date.now();
    this.#anticipated = this.#anticipated.filter((t) => t > now);
    return this.#size + Math.min(this.#anticipated.length, MAX_ANTICIPATED);
  }

  /** Tops the pool up in the background (a few entries at a time), unless that is already under way. */
  refill(): void {
    if (this.#filling || this.#size === 0 || this.#failures >= MAX_FAILURES) return;
    this.#filling = this.#fill().finally(() => (this.#filling = undefined));
  }

  async #fill(): Promise<void> {
    const making = new Set<Promise<void>>();
    for (;;) {
      while (making.size < PARALLEL && this.#entries.size < this.#target() && this.#failures < MAX_FAILURES) {
        const made = this.#make();
        if (!made) break;
        const { entry, done } = made;
        this.#entries.set(entry.name, { entry, done });
        const settled: Promise<void> = done.then(
          () => {
            entry.ready = true;
            this.#failures = 0;
          },
          (err) => {
            this.#entries.delete(entry.name);
            if (++this.#failures >= MAX_FAILURES) log.warn('no more network namespaces made ahead of time', { error: errorMessage(err) });
          },
        );
        const tracked: Promise<void> = settled.finally(() => making.delete(tracked));
        making.add(tracked);
      }
      if (making.size === 0) return;
      await Promise.race(making);
    }
  }

  /** A ready entry for the network ('' for loopback only), removed from the pool. */
  take(networkId: string): ReadyNetns | undefined {
    for (const { entry } of this.#entries.values()) {
      if (entry.ready && entry.networkId === networkId) {
        this.#taken(entry);
        return entry;
      }
    }
    return undefined;
  }

  /** An entry for the network, ready or else still being made (the caller awaits `done`), removed from the pool. */
  takeSoon(networkId: string): TakenNetns | undefined {
    const ready = this.take(networkId);
    if (ready) return { entry: ready, done: Promise.resolve() };
    for (const t of this.#entries.values()) {
      if (t.entry.networkId === networkId) {
        this.#taken(t.entry);
        return t;
      }
    }
    return undefined;
  }

  #taken(entry: ReadyNetns): void {
    this.#entries.delete(entry.name);
    this.#anticipated.shift();
  }

  /** Addresses reserved by entries of a network. */
  addressesOf(networkId: string): string[] {
    return [...this.#entries.values()].filter(({ entry: e }) => e.networkId === networkId && e.ipv4).map(({ entry: e }) => e.ipv4);
  }

  /** Resolves when no entry is being made. */
  async settled(): Promise<void> {
    while (this.#filling) await this.#filling;
  }

  /** Stops filling, waits for entries under way and hands every entry out (to be removed). */
  async takeAll(): Promise<ReadyNetns[]> {
    this.#failures = MAX_FAILURES;
    await this.#filling;
    const all = [...this.#entries.values()].map(({ entry }) => entry);
    this.#entries.clear();
    this.#anticipated = [];
    return all;
  }

  /** Allows filling again (after takeAll, when the driver starts again). */
  reset(): void {
    this.#failures = 0;
  }
}
