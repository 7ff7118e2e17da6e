/**
 * The client URLs of the etcd members berthd runs, as etcd lists them: read now and every
 * MEMBERS_EVERY_MS (each read bounded by the client's call deadline, never two at once), so a node's
 * client follows the managers that join, leave and come back rather than the endpoints it started
 * with (the first manager's: its own member only). Learners are left out: they serve no client calls
 * until promoted; while one is listed (a manager joining), the list is read each LEARNER_EVERY_MS. A list that cannot be read (etcd without quorum still answers it; a worker's user
 * may not) leaves the last one as it was.
 */
import type { IMember } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';

const MEMBERS_EVERY_MS = 5000;
/** How soon the list is read again while it has a learner (promoted within seconds, as a manager joins). */
const LEARNER_EVERY_MS = 1000;

export class MemberList {
  #urls: string[];
  /** Whether etcd's list was read at least once (until then: the endpoints given). */
  #read = false;
  #reading = false;
  #closed = false;
  readonly #timer: NodeJS.Timeout;
  #soon: NodeJS.Timeout | undefined;

  constructor(
    initial: string[],
    /** etcd's member list, through the client in use now. */
    private readonly read: () => Promise<{ members: IMember[] }>,
    /** The list changed (sorted URLs). */
    private readonly changed: (urls: string[]) => void,
  ) {
    this.#urls = [...new Set(initial)].sort();
    this.#timer = setInterval(() => void this.refresh(), MEMBERS_EVERY_MS);
    this.#timer.unref();
    void this.refresh();
  }

  /** The members' client URLs, as last read. */
  get urls(): string[] {
    return this.#urls;
  }

  get listed(): boolean {
    return this.#read;
  }

  async refresh(): Promise<void> {
    if (this.#reading || this.#closed) return;
    this.#reading = true;
    try {
      const { members } = await this.read();
      // Read again soon while a learner is listed: a client on its own member only (the first
      // manager's) must hear of a promoted member before its own goes silent, as the list is read
      // through it.
      if (members.some((m) => m.isLearner) && !this.#soon && !this.#closed) {
        this.#soon = setTimeout(() => {
          this.#soon = undefined;
          void this.refresh();
        }, LEARNER_EVERY_MS);
        this.#soon.unref();
      }
      const urls = [...new Set(members.filter((m) => !m.isLearner).flatMap((m) => m.clientURLs))].sort();
      if (this.#closed || !urls.length) return;
      const first = !this.#read;
      this.#read = true;
      if (!first && urls.join() === this.#urls.join()) return;
      if (!first) log.info('the etcd members changed', { before: this.#urls, now: urls });
      this.#urls = urls;
      this.changed(urls);
    } catch (err) {
      log.debug('reading the etcd member list failed', { err: errorMessage(err) });
    } finally {
      this.#reading = false;
    }
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#timer);
    clearTimeout(this.#soon);
  }
}
