/**
 * `docker stop` (the stop signal, then SIGKILL once the timeout passes) and `docker kill`; both
 * publish dockerd's kill and stop events. A stop opts out of the restart policy, a start that
 * policy has under way included.
 */
import { waitAtMost } from '../../lib/deadline.js';
import { conflict, invalidArgument, notModified } from '../../lib/errors.js';
import type { EventBus } from '../events.js';
import type { ContainerLocks } from './container-locks.js';
import { eventAttrs, isRunningLike } from './container-model.js';
import type { RuntimeProcesses } from './container-processes.js';
import type { ContainerTable } from './container-table.js';
import type { Waiters } from './container-waiters.js';
import { signalNumber } from './signals.js';

/** `timeout` in seconds (negative: wait for ever), `signal` instead of the container's StopSignal. */
export interface StopOptions {
  timeout?: number;
  signal?: string;
}

export interface ContainerStopperDeps {
  table: ContainerTable;
  locks: ContainerLocks;
  waiters: Waiters;
  processes: RuntimeProcesses;
  events: EventBus;
}

export class ContainerStopper {
  readonly #d: ContainerStopperDeps;

  constructor(deps: ContainerStopperDeps) {
    this.#d = deps;
  }

  async stop(idOrName: string, opts: StopOptions): Promise<void> {
    const c = this.#d.table.get(idOrName);
    if (!isRunningLike(c.state)) throw notModified();
    c.manuallyStopped = true;
    // Between restarts: the policy's start, if already under way, holds the lock. Once it has
    // run the container is running and is stopped as such; otherwise it stays down from here.
    if (c.state.status === 'restarting') {
      const settled = await this.#d.locks.withLock(c.id, async () => {
        if (c.state.status !== 'restarting') return false;
        c.state.status = 'exited';
        this.#d.table.save(c);
        this.#d.events.publish('container', 'stop', c.id, eventAttrs(c));
        return true;
      });
      if (settled) return;
      if (!isRunningLike(c.state)) {
        this.#d.table.save(c);
        return;
      }
    }
    this.#d.table.save(c);
    const timeout = opts.timeout ?? c.config.StopTimeout ?? 10;
    const signal = opts.signal || c.config.StopSignal || 'SIGTERM';
    const exited = this.#d.waiters.add(c.id, 'next-exit');
    if (c.state.status === 'paused') await this.#d.processes.resume(c).catch(() => undefined);
    await this.#d.processes.kill(c, signal).catch(() => undefined);
    this.#d.events.publish('container', 'kill', c.id, eventAttrs(c, { signal: signalNumber(signal) }));
    // A negative timeout: no SIGKILL, the exit is waited for however long it takes.
    if (timeout >= 0 && !(await waitAtMost(exited, timeout * 1000))) {
      await this.#d.processes.kill(c, 'SIGKILL').catch(() => undefined);
      this.#d.events.publish('container', 'kill', c.id, eventAttrs(c, { signal: '9' }));
    }
    await exited;
    this.#d.events.publish('container', 'stop', c.id, eventAttrs(c));
  }

  async kill(idOrName: string, signal: string | undefined): Promise<void> {
    const c = this.#d.table.get(idOrName);
    if (!isRunningLike(c.state) || c.state.status === 'restarting') {
      throw conflict(`cannot kill container: ${idOrName}: container ${c.id} is not running`);
    }
    const sig = signal || 'SIGKILL';
    const num = signalNumber(sig);
    if (num === '') throw invalidArgument(`Invalid signal: ${sig}`);
    if (num === '9' || num === '15') c.manuallyStopped = c.manuallyStopped || false;
    const exited = num === '9' ? this.#d.waiters.add(c.id, 'next-exit') : undefined;
    await this.#d.processes.kill(c, sig);
    this.#d.events.publish('container', 'kill', c.id, eventAttrs(c, { signal: num }));
    // dockerd returns from a SIGKILL only once the process is gone.
    if (exited) await waitAtMost(exited, 10_000, { unref: true });
  }
}
