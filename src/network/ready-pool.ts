/**
 * Network namespaces made ready ahead of time, so that a container start usually costs no process at
 * all for its network: the namespace file, loopback up and (for the default bridge) eth0 with its
 * address, MAC and default route, and the host end on the bridge. A start takes one and links it to
 * the container's path (see NetnsDir.adopt); the pool is topped up in the background afterwards.
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

const MAX_FAILURES = 3;

export class ReadyPool {
  readonly #size: number;
  readonly #make: MakeReady;
  readonly #entries = new Map<string, ReadyNetns>();
  #filling: Promise<void> | undefined;
  #failures = 0;

  constructor(size: number, make: MakeReady) {
    this.#size = size;
    this.#make = make;
  }

  /** Tops the pool up in the background (one entry at a time), unless that is already under way. */
  refill(): void {
    if (this.#filling || this.#size === 0 || this.#failures >= MAX_FAILURES) return;
    this.#filling = this.#fill().finally(() => (this.#filling = undefined));
  }

  async #fill(): Promise<void> {
    for (let i = 0; i < this.#size && this.#entries.size < this.#size; i++) {
      const made = this.#make();
      if (!made) return;
      this.#entries.set(made.entry.name, made.entry);
      try {
        await made.done;
        made.entry.ready = true;
        this.#failures = 0;
      } catch (err) {
        this.#entries.delete(made.entry.name);
        if (++this.#failures >= MAX_FAILURES) log.warn('no more network namespaces made ahead of time', { error: errorMessage(err) });
        return;
      }
    }
  }

  /** A ready entry for the network ('' for loopback only), removed from the pool. */
  take(networkId: string): ReadyNetns | undefined {
    for (const e of this.#entries.values()) {
      if (e.ready && e.networkId === networkId) {
        this.#entries.delete(e.name);
        return e;
      }
    }
    return undefined;
  }

  /** Addresses reserved by entries of a network. */
  addressesOf(networkId: string): string[] {
    return [...this.#entries.values()].filter((e) => e.networkId === networkId && e.ipv4).map((e) => e.ipv4);
  }

  /** Resolves when no entry is being made. */
  async settled(): Promise<void> {
    while (this.#filling) await this.#filling;
  }

  /** Stops filling, waits for an entry under way and hands every entry out (to be removed). */
  async takeAll(): Promise<ReadyNetns[]> {
    this.#failures = MAX_FAILURES;
    await this.#filling;
    const all = [...this.#entries.values()];
    this.#entries.clear();
    return all;
  }

  /** Allows filling again (after takeAll, when the driver starts again). */
  reset(): void {
    this.#failures = 0;
  }
}
