/**
 * One queue of operations per container (start vs remove, stop vs kill...), and the releases of
 * exits still under way, which those operations wait for (exit-handling.ts makes them).
 */

/** An exit's release under way: `now()` has the unmount start at once, and resolves once all is released. */
export interface Release {
  done: Promise<void>;
  now: () => Promise<void>;
}

export class ContainerLocks {
  readonly #locks = new Map<string, Promise<unknown>>();
  /** What an exit releases (runtime state, network, rootfs mount), by container, until it is done. */
  readonly #releasing = new Map<string, Release>();

  /**
   * Serializes operations on one container. After an exit they also wait for its release to end,
   * and have its unmount run at once, except with `alongsideRelease` (commit: it reads the upper
   * dir only, which no release touches).
   */
  async withLock<T>(id: string, fn: () => Promise<T>, opts: { alongsideRelease?: boolean } = {}): Promise<T> {
    const prev = this.#locks.get(id) ?? Promise.resolve();
    const next = prev
      .catch(() => undefined)
      .then(() => (opts.alongsideRelease ? undefined : this.#releasing.get(id)?.now()))
      .then(fn);
    this.#locks.set(id, next);
    try {
      return await next;
    } finally {
      if (this.#locks.get(id) === next) this.#locks.delete(id);
    }
  }

  /** Keeps `r` as the container's release under way until it is done. */
  releasing(id: string, r: Release): void {
    this.#releasing.set(id, r);
    void r.done.then(() => {
      if (this.#releasing.get(id) === r) this.#releasing.delete(id);
    });
  }

  /** Ends every release still under way (at shutdown: no mount is left behind for an exited container). */
  async finishReleases(): Promise<void> {
    await Promise.all([...this.#releasing.values()].map((r) => r.now()));
  }
}
