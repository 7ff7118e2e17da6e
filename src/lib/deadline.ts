/**
 * A wait with a deadline. The timer is cleared as soon as the promise settles: one left running
 * would hold its closure (and keep the event loop busy) for the whole deadline after every call.
 */

/**
 * `p`'s outcome (its value, or its rejection), or a rejection with `late()` when `p` has not settled
 * within `ms`. `p` itself is not stopped: a late answer is simply ignored.
 */
export function withDeadline<T>(p: Promise<T>, ms: number, late: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(late()), ms);
    p.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/**
 * Waits for `p` at most `ms`, then carries on: true when `p` fulfilled in time, false when the time
 * ran out first (`p` is not stopped; its late outcome is ignored). A rejection within `ms` is passed
 * on, as with Promise.race: a caller that ignores `p`'s failure catches it first. With `unref`, the
 * timer does not keep the process alive.
 */
export function waitAtMost(p: Promise<unknown>, ms: number, opts: { unref?: boolean } = {}): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    const timer = setTimeout(() => resolve(false), ms);
    if (opts.unref) timer.unref();
    p.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
