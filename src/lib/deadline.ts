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
