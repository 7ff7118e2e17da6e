/**
 * Whether each etcd member answers: its status is asked for every second, on a client of its own
 * (one connection per member, so a member whose link is cut fails its own probe only). A member
 * that does not answer, or knows no leader, three times in a row is down. EtcdState leaves it then.
 */
import type { Etcd3 } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';

const PROBE_EVERY_MS = 1000;
/** How long a probe may take (the probe clients' call deadline and dial timeout). */
export const PROBE_DEADLINE_MS = 1500;
/** Failed probes in a row after which a member is down. */
const PROBE_FAILURES = 3;

export class MemberProbes {
  readonly #probes = new Map<string, { client: Etcd3; failures: number }>();
  readonly #timer: NodeJS.Timeout;

  constructor(
    endpoints: string[],
    connect: (host: string) => Etcd3,
    /** After each round: the members down now, and those whose last probe was answered. */
    checked: (down: Set<string>, answering: Set<string>) => void,
  ) {
    for (const host of endpoints) this.#probes.set(host, { client: connect(host), failures: 0 });
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
          if (ok) p.failures = 0;
          else if (!late) p.failures++;
          if ((before === 0) !== (p.failures === 0)) log.debug('etcd member probe', { host, ok, why, late, took: Date.now() - now });
        }),
      )
        .then(() => {
          const hosts = [...this.#probes];
          checked(new Set(hosts.filter(([, p]) => p.failures >= PROBE_FAILURES).map(([h]) => h)), new Set(hosts.filter(([, p]) => p.failures === 0).map(([h]) => h)));
        })
        // An unhandled rejection would end berthd: a round that failed is logged, the next one comes.
        .catch((err) => log.warn('checking the etcd members failed', { err: errorMessage(err) }));
    }, PROBE_EVERY_MS);
    this.#timer.unref();
  }

  close(): void {
    clearInterval(this.#timer);
    for (const p of this.#probes.values()) p.client.close();
  }
}
