/**
 * Whether each etcd member answers: its status is asked for every second, on a client of its own
 * (one connection per member, so a member whose link is cut fails its own probe only). A member
 * that does not answer, or knows no leader, three times in a row is down. EtcdState leaves it then;
 * one that answered as many times in a row is steady, one EtcdState may spread its client back to.
 * The members probed follow the cluster's (setHosts).
 */
import type { Etcd3 } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';

const PROBE_EVERY_MS = 1000;
/** How long a probe may take (the probe clients' call deadline and dial timeout). */
export const PROBE_DEADLINE_MS = 1500;
/** Failed probes in a row after which a member is down (and answered ones after which it is steady). */
const PROBE_FAILURES = 3;

/** What a round of probes found. */
export interface ProbeRound {
  /** Failed PROBE_FAILURES times in a row. */
  down: Set<string>;
  /** Its last probe was answered. */
  answering: Set<string>;
  /** Answered PROBE_FAILURES times in a row. */
  steady: Set<string>;
}

export class MemberProbes {
  readonly #probes = new Map<string, { client: Etcd3; failures: number; answered: number }>();
  readonly #timer: NodeJS.Timeout;

  constructor(
    endpoints: string[],
    private readonly connect: (host: string) => Etcd3,
    /** After each round: what it found. */
    checked: (round: ProbeRound) => void,
  ) {
    this.setHosts(endpoints);
    let tick = Date.now();
    this.#timer = setInterval(() => {
      const now = Date.now();
      // This process was held up itself (answers may be waiting, unread): no failure counts this time.
      const late = now - tick > 2 * PROBE_EVERY_MS;
      tick = now;
      void Promise.all(
        [...this.#probes].map(async ([host, p]) => {
          let ok = false;
          let why = '';
          try {
            const status = await p.client.maintenance.status();
            ok = !!status.leader && status.leader !== '0';
            if (!ok) why = 'no leader';
          } catch (err) {
            why = errorMessage(err);
          }
          const before = p.failures;
          if (ok) {
            p.failures = 0;
            p.answered++;
          } else {
            // A late round's failure does not count towards down, but the member did not answer: not steady.
            p.answered = 0;
            if (!late) p.failures++;
          }
          if ((before === 0) !== (p.failures === 0)) log.debug('etcd member probe', { host, ok, why, late, took: Date.now() - now });
        }),
      ).then(() => {
        const hosts = [...this.#probes];
        const where = (pred: (p: { failures: number; answered: number }) => boolean) => new Set(hosts.filter(([, p]) => pred(p)).map(([h]) => h));
        checked({ down: where((p) => p.failures >= PROBE_FAILURES), answering: where((p) => p.failures === 0), steady: where((p) => p.answered >= PROBE_FAILURES) });
      })
        // An unhandled rejection would end berthd: a round that failed is logged, the next one comes.
        .catch((err) => log.warn('checking the etcd members failed', { err: errorMessage(err) }));
    }, PROBE_EVERY_MS);
    this.#timer.unref();
  }

  /** Probes these members from now on (those no longer listed are let go, new ones start unknown). */
  setHosts(hosts: string[]): void {
    const keep = new Set(hosts);
    for (const [host, p] of this.#probes) {
      if (keep.has(host)) continue;
      p.client.close();
      this.#probes.delete(host);
    }
    for (const host of keep) if (!this.#probes.has(host)) this.#probes.set(host, { client: this.connect(host), failures: 0, answered: 0 });
  }

  close(): void {
    clearInterval(this.#timer);
    for (const p of this.#probes.values()) p.client.close();
  }
}
