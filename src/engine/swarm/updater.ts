/**
 * Rolling updates and rollbacks: the tasks made from an older template are replaced slot by slot,
 * `Parallelism` at a time with `Delay` between batches, stop-first or start-first. A new task that
 * fails before it runs, or within `Monitor` after, counts as a failure; past `MaxFailureRatio` the
 * `FailureAction` pauses, rolls back or carries on. Progress shows in the service's UpdateStatus.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { log } from '../../lib/log.js';
import { errorMessage } from '../../lib/errors.js';
import { updateConfig } from './service-spec.js';
import { isCurrent, type Orchestrator } from './orchestrator.js';
import type { SwarmStore } from './swarm-store.js';
import type { TaskRunner } from './task-runner.js';
import { isTerminal, type ServiceRecord, type TaskRecord, type UpdateStatus } from './swarm-model.js';

export type UpdateKind = 'update' | 'rollback';

/** The UpdateStatus of an update or rollback that starts now. */
export function updateStarted(kind: UpdateKind, message?: string): UpdateStatus {
  return {
    State: kind === 'update' ? 'updating' : 'rollback_started',
    StartedAt: new Date().toISOString(),
    Message: message ?? (kind === 'update' ? 'update in progress' : 'manually requested rollback'),
  };
}

/** How long a new task must keep running (at most Monitor) before the next batch starts. */
const SETTLE_MS = 1000;

export class Updater {
  readonly #running = new Map<string, AbortController>();

  constructor(
    private readonly store: SwarmStore,
    private readonly orchestrator: Orchestrator,
    private readonly runner: TaskRunner,
    /** Puts the previous spec back and starts rolling back to it (the swarm facade's own rollback). */
    private readonly rollback: (s: ServiceRecord, message: string) => void,
  ) {}

  /** Starts replacing the service's out-of-date tasks, ending an update already under way. */
  start(s: ServiceRecord, kind: UpdateKind, message?: string): void {
    this.cancel(s.id);
    this.#setStatus(s, updateStarted(kind, message));
    this.#launch(s, kind);
  }

  /** After a daemon restart: an update that was under way carries on. */
  resume(s: ServiceRecord): void {
    const state = s.updateStatus?.State;
    if (state === 'updating') this.#launch(s, 'update');
    else if (state === 'rollback_started') this.#launch(s, 'rollback');
  }

  isRunning(serviceId: string): boolean {
    return this.#running.has(serviceId);
  }

  cancel(serviceId: string): void {
    this.#running.get(serviceId)?.abort();
    this.#running.delete(serviceId);
  }

  close(): void {
    for (const id of [...this.#running.keys()]) this.cancel(id);
  }

  #launch(s: ServiceRecord, kind: UpdateKind): void {
    const ac = new AbortController();
    this.#running.set(s.id, ac);
    this.#run(s, kind, ac.signal)
      .catch((err) => {
        if (!ac.signal.aborted) log.error('service update failed', { service: s.id, err: errorMessage(err) });
      })
      .finally(() => {
        if (this.#running.get(s.id) === ac) this.#running.delete(s.id);
      });
  }

  async #run(s: ServiceRecord, kind: UpdateKind, signal: AbortSignal): Promise<void> {
    const cfg = updateConfig(s.spec, kind === 'rollback');
    const monitorMs = cfg.Monitor / 1e6;
    const total = Math.max(1, this.#outOfDate(s).length);
    const ours = new Set<string>();
    let failures = 0;
    let failedTask = '';
    // A task of this update that ends by itself before, or within Monitor after, it ran is a failure.
    const stopWatching = this.runner.onTaskChange((t) => {
      if (!ours.has(t.id) || !isTerminal(t.status.state) || t.status.state === 'shutdown' || t.status.state === 'remove') return;
      if (t.runningSince && Date.now() - t.runningSince > monitorMs) return;
      ours.delete(t.id);
      failures++;
      failedTask = t.id;
    });
    const tooMany = () => failures > cfg.MaxFailureRatio * total && cfg.FailureAction !== 'continue';
    try {
      for (;;) {
        if (signal.aborted || this.store.services.get(s.id) !== s) return;
        if (tooMany()) return this.#fail(s, kind, cfg.FailureAction, failedTask);
        const dirty = this.#outOfDate(s);
        if (dirty.length === 0) break;
        const batch = dirty.slice(0, cfg.Parallelism || dirty.length);
        await Promise.all(batch.map((old) => this.#replace(s, old, cfg.Order, Math.min(monitorMs, SETTLE_MS), ours, signal)));
        if (signal.aborted) return;
        if (tooMany()) return this.#fail(s, kind, cfg.FailureAction, failedTask);
        if (cfg.Delay > 0 && this.#outOfDate(s).length > 0) await sleep(cfg.Delay / 1e6, undefined, { signal });
      }
      // The last tasks are watched for Monitor before the update counts as done.
      const lastStart = Math.max(0, ...[...ours].map((id) => this.store.tasks.get(id)?.runningSince ?? 0));
      const wait = lastStart + monitorMs - Date.now();
      if (wait > 0) await sleep(wait, undefined, { signal });
      if (tooMany()) return this.#fail(s, kind, cfg.FailureAction, failedTask);
      if (signal.aborted || this.store.services.get(s.id) !== s) return;
      this.#setStatus(s, {
        ...s.updateStatus,
        State: kind === 'update' ? 'completed' : 'rollback_completed',
        CompletedAt: new Date().toISOString(),
        Message: kind === 'update' ? 'update completed' : 'rollback completed',
      });
    } finally {
      stopWatching();
    }
  }

  /** Current tasks made from an older template, lowest slot first; slots already being replaced are left alone. */
  #outOfDate(s: ServiceRecord): TaskRecord[] {
    const fresh = new Set<string>();
    const stale = new Map<string, TaskRecord>();
    for (const t of this.store.tasksOf(s.id)) {
      if (!isCurrent(t)) continue;
      const key = `${t.slot}/${t.slot ? '' : t.nodeId}`;
      if (t.templateVersion === s.templateVersion) fresh.add(key);
      else stale.set(key, t);
    }
    return [...stale.entries()].filter(([k]) => !fresh.has(k)).map(([, t]) => t).sort((a, b) => a.slot - b.slot);
  }

  /** Replaces one task with one made from the current template, in the configured order. */
  async #replace(s: ServiceRecord, old: TaskRecord, order: 'stop-first' | 'start-first', settleMs: number, ours: Set<string>, signal: AbortSignal): Promise<void> {
    const created = await this.orchestrator.exclusive(s.id, () => {
      if (this.store.tasks.get(old.id) !== old || !isCurrent(old) || this.store.services.get(s.id) !== s) return undefined;
      const opts = { nodeId: old.slot ? undefined : old.nodeId, restarts: [] };
      if (order === 'start-first') return this.orchestrator.newTask(s, old.slot, opts);
      const t = this.orchestrator.newTask(s, old.slot, { ...opts, after: old.id });
      this.orchestrator.retire(old, 'shutdown');
      return t;
    });
    if (!created) return;
    ours.add(created.id);
    this.runner.advance(created);
    let settled = await this.runner.waitFor(created.id, (t) => t.status.state === 'running' || isTerminal(t.status.state), signal);
    if (settled?.status.state === 'running' && settleMs > 0) {
      // A task that dies right after it started fails the update before the next batch is touched.
      const done = new AbortController();
      const both = AbortSignal.any([signal, done.signal]);
      await Promise.race([this.runner.waitFor(created.id, (t) => isTerminal(t.status.state), both), sleep(settleMs, undefined, { signal: both }).catch(() => undefined)]);
      done.abort();
      settled = this.store.tasks.get(created.id);
    }
    if (order === 'start-first' && settled?.status.state === 'running') {
      await this.orchestrator.exclusive(s.id, () => this.orchestrator.retire(old, 'shutdown'));
    }
  }

  #fail(s: ServiceRecord, kind: UpdateKind, action: 'continue' | 'pause' | 'rollback', taskId: string): void {
    if (this.store.services.get(s.id) !== s) return;
    if (kind === 'update' && action === 'rollback' && s.previousSpec) {
      this.rollback(s, `update rolled back due to failure or early termination of task ${taskId}`);
      return;
    }
    this.#setStatus(s, {
      ...s.updateStatus,
      State: kind === 'update' ? 'paused' : 'rollback_paused',
      Message: `${kind === 'update' ? 'update' : 'rollback'} paused due to failure or early termination of task ${taskId}`,
    });
  }

  #setStatus(s: ServiceRecord, status: UpdateStatus): void {
    s.updateStatus = status;
    this.store.touch(s);
    this.store.saveService(s);
  }
}
