/**
 * Whether each etcd member answers: its status is asked for every second, on a client of its own
 * (one connection per member, so a member whose link is cut fails its own probe only). A member
 * that does not answer, or knows no leader, three times in a row is down. EtcdState leaves it then.
 */
import type { Etcd3 } from 'etcd3';

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
    /** After each round: the members down now. */
    checked: (down: Set<string>) => void,
  ) {
    for (const host of endpoints) this.#probes.set(host, { client: connect(host), failures: 0 });
    let tick = Date.now();
    this.#timer = setInterval(() => {
      const now = Date.now();
      // This process was held up itself (answers may be waiting, unread): no failure counts this time.
      const late = now - tick > 2 * PROBE_EVERY_MS;
      tick = now;
      void Promise.all(
        [...this.#probes.values()].map(async (p) => {
          try {
            const status = await p.client.maintenance.status();
            p.failures = status.leader && status.leader !== '0' ? 0 : p.failures + 1;
          } catch {
            if (!late) p.failures++;
          }
        }),
      ).then(() => checked(new Set([...this.#probes].filter(([, p]) => p.failures >= PROBE_FAILURES).map(([h]) => h))));
    }, PROBE_EVERY_MS);
    this.#timer.unref();
  }

  close(): void {
    clearInterval(this.#timer);
    for (const p of this.#probes.values()) p.client.close();
  }
}
