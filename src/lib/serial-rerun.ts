/**
 * A background pass run one at a time: asked for again while one runs, it runs once more after it
 * (however often it was asked meanwhile), so what changed during a pass is never missed.
 */
export class SerialRerun {
  #running: Promise<void> | undefined;
  #again = false;

  constructor(
    private readonly pass: () => Promise<void>,
    /** A pass that failed (the next request runs again). */
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Starts a pass, or asks for one more after the pass under way. */
  run(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.pass()
      .catch(this.onError)
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.run();
        }
      });
  }

  /** The pass under way, if any. */
  get running(): Promise<void> | undefined {
    return this.#running;
  }
}
