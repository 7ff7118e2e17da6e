/**
 * At most `limit` operations at once; the rest wait their turn in arrival order. Node runs every
 * request's work on one thread: under a flood of writes (hundreds of clients creating and removing
 * containers), each turn of the event loop would otherwise carry the continuations of every write in
 * flight, and a read arriving meanwhile waits behind all of them. With writes admitted a few at a
 * time, a turn stays short and reads, which never pass through a gate, are answered at once.
 */
export class WorkGate {
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(readonly limit: number) {}

  async run<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.#running >= this.limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running++;
    try {
      return await fn();
    } finally {
      const next = this.#waiting.shift();
      // The slot passes straight to the next waiter, so the count stays right.
      if (next) next();
      else this.#running--;
    }
  }

  /** Operations admitted and not finished, and those waiting. */
  get load(): { running: number; waiting: number } {
    return { running: this.#running, waiting: this.#waiting.length };
  }
}
