/** Callers of POST /containers/{id}/wait, woken by exits and removals. */
import type { WaitCondition } from '../../lib/docker-api-types.js';

export type { WaitCondition };
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

  /** An exit wakes everyone but those waiting for the removal. */
  exited(id: string, result: WaitResult): void {
    this.#wake(id, result, (c) => c !== 'removed');
  }

  removed(id: string, result: WaitResult): void {
    this.#wake(id, result, () => true);
  }

  #wake(id: string, result: WaitResult, pred: (c: WaitCondition) => boolean): void {
    const list = this.#byId.get(id);
    if (!list) return;
    const keep = list.filter((w) => !pred(w.cond));
    for (const w of list) if (pred(w.cond)) w.resolve(result);
    if (keep.length) this.#byId.set(id, keep);
    else this.#byId.delete(id);
  }
}
