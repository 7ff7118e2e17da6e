/**
 * The event bus behind GET /events: every state change of containers, images, networks and volumes
 * is published here. Recent events are kept in a bounded ring so `since` can replay them.
 */
import { EventEmitter } from 'node:events';
import type { EngineEvent } from '../lib/docker-api-types.js';

export type { EngineEvent };

const HISTORY = 2048;

export class EventBus {
  readonly #emitter = new EventEmitter();
  readonly #history: EngineEvent[] = [];
  #lastNs = 0n;

  constructor() {
    this.#emitter.setMaxListeners(0);
  }

  publish(type: EngineEvent['Type'], action: string, id: string, attributes: Record<string, string> = {}): void {
    // Wall-clock time to the microsecond, strictly increasing: clients resume with `since=<last
    // timeNano>`, so order must match publication order. (Whole microseconds, because a double
    // cannot tell nanoseconds apart at this magnitude and timeNano goes out as a JSON number.)
    let nowNs = BigInt(Date.now()) * 1_000_000n + ((process.hrtime.bigint() % 1_000_000n) / 1000n) * 1000n;
    if (nowNs <= this.#lastNs) nowNs = this.#lastNs + 1000n;
    this.#lastNs = nowNs;
    const ev: EngineEvent = {
      Type: type,
      Action: action,
      Actor: { ID: id, Attributes: attributes },
      scope: 'local',
      time: Number(nowNs / 1_000_000_000n),
      timeNano: Number(nowNs),
    };
    this.#history.push(ev);
    if (this.#history.length > HISTORY) this.#history.splice(0, this.#history.length - HISTORY);
    this.#emitter.emit('event', ev);
  }

  /** Events at or after `sinceNano`, oldest first. */
  replay(sinceNano: number, untilNano = Number.POSITIVE_INFINITY): EngineEvent[] {
    return this.#history.filter((e) => e.timeNano >= sinceNano && e.timeNano <= untilNano);
  }

  subscribe(fn: (ev: EngineEvent) => void): () => void {
    this.#emitter.on('event', fn);
    return () => this.#emitter.off('event', fn);
  }
}
