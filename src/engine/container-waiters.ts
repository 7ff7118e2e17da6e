/** Callers of POST /containers/{id}/wait, woken by exits and removals. */
export type WaitCondition = 'not-running' | 'next-exit' | 'removed';
export interface WaitResult {
  StatusCode: number;
  Error?: { Message: string };
}

export class Waiters {
  readonly #byId = new Map<string, { cond: WaitCondition; resolve: (r: WaitResult) => void }[]>();

  add(id: string, cond: WaitCondition): Promise<WaitResult> {
    return new Promise((resolve) => {
      let list = this.#byId.get(id);
      if (!list) this.#byId.set(id, (list = []));
      list.push({ cond, resolve });
    });
  }

  /** Wakes the waiters an exit satisfies (removed-waiters keep waiting if the container stays). */
  exited(id: string, result: WaitResult, willBeRemoved: boolean): void {
    this.#wake(id, result, (c) => c !== 'removed' || false, willBeRemoved);
  }

  removed(id: string, result: WaitResult): void {
    this.#wake(id, result, () => true, false);
  }

  #wake(id: string, result: WaitResult, pred: (c: WaitCondition) => boolean, _keep: boolean): void {
    const list = this.#byId.get(id);
    if (!list) return;
    const keep = list.filter((w) => !pred(w.cond));
    for (const w of list) if (pred(w.cond)) w.resolve(result);
    if (keep.length) this.#byId.set(id, keep);
    else this.#byId.delete(id);
  }
}
