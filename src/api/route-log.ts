/**
 * Which routes berthd serves and which of them answered, one line each in a file, for the test
 * suite's check that every route has a test (test/harness/README.md, "Route coverage"). Only built
 * when BERTHD_ROUTE_LOG names a file; the router then pays one Set lookup per request, otherwise a
 * branch. Lines are appended synchronously, so a daemon killed with SIGKILL loses none.
 */
import { appendFileSync } from 'node:fs';

export class RouteLog {
  readonly #answered = new Set<string>();

  constructor(readonly path: string) {}

  /** `key` is "METHOD /template", the path as registered (find-my-way's `:param` syntax). */
  registered(key: string): void {
    appendFileSync(this.path, `route ${key}\n`);
  }

  answered(key: string): void {
    if (this.#answered.has(key)) return;
    this.#answered.add(key);
    appendFileSync(this.path, `answered ${key}\n`);
  }
}
