/**
 * Keeps every service at its spec: one current task per slot (1..N replicated, one per node for
 * global), a replacement for a task whose container ended (after the restart delay, if the restart
 * policy allows), tasks removed when scaling down, tasks shut down on a drained node, and at most
 * TaskHistoryRetentionLimit tasks kept per slot. Work on one service is serialized; each pass is
 * triggered by an event (spec change, task change, node change), never by polling.
 */
import { log } from '../../lib/log.js';
import { errorMessage } from '../../lib/errors.js';
import { newSwarmId } from './swarm-ids.js';
import { restartDelayMs, restartPolicy } from './service-spec.js';
import type { SwarmStore } from './swarm-store.js';
import type { TaskRunner } from './task-runner.js';
import { isGlobal, isJob, isTerminal, replicas, type ServiceRecord, type TaskRecord } from './swarm-model.js';

/**
 * How to count slots: `live` fills every slot without a current task (after a spec change, as
 * swarmkit does); `known` leaves alone slots whose last task ended for good (after a restart);
 * `none` only supervises restarts.
 */
export type FillMode = 'live' | 'known' | 'none';
const FILL_RANK: Record<FillMode, number> = { none: 0, known: 1, live: 2 };

/** A task the orchestrator still wants: running, or ready to run. */
export const isCurrent = (t: TaskRecord) => t.desiredState === 'running' || t.desiredState === 'ready';

export class Orchestrator {
  readonly #queues = new Map<string, Promise<void>>();
  readonly #requested = new Map<string, FillMode>();

  constructor(
    private readonly store: SwarmStore,
    private readonly runner: TaskRunner,
    /** Gives a new task its overlay addresses before it is stored. */
    private readonly attachTask: (s: ServiceRecord, t: TaskRecord) => void = () => {},
  ) {}

  /** Asks for a pass over one service; passes are coalesced and run one at a time per service. */
  reconcile(serviceId: string, fill: FillMode = 'none'): void {
    const before = this.#requested.get(serviceId);
    if (before !== undefined) {
      if (FILL_RANK[fill] > FILL_RANK[before]) this.#requested.set(serviceId, fill);
      return;
    }
    this.#requested.set(serviceId, fill);
    void this.exclusive(serviceId, async () => {
      // Each pass starts from a fresh turn of the event loop, so chains of task changes never starve I/O.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const mode = this.#requested.get(serviceId) ?? fill;
      this.#requested.delete(serviceId);
      this.#pass(serviceId, mode);
    }).catch((err) => log.error('swarm reconciliation failed', { service: serviceId, err: errorMessage(err) }));
  }

  /** Runs `fn` with no other pass or update step on the same service in between. */
  exclusive<T>(serviceId: string, fn: () => T | Promise<T>): Promise<T> {
    const prev = this.#queues.get(serviceId) ?? Promise.resolve();
    const next = prev.then(fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.#queues.set(serviceId, settled);
    void settled.then(() => {
      if (this.#queues.get(serviceId) === settled) this.#queues.delete(serviceId);
    });
    return next;
  }

  /** A new task for a slot of the service, stored, not yet driven. */
  newTask(s: ServiceRecord, slot: number, opts: { startAt?: number; after?: string; restarts?: number[]; nodeId?: string; failures?: number } = {}): TaskRecord {
    const now = new Date().toISOString();
    const waiting = (opts.startAt !== undefined && opts.startAt > Date.now()) || opts.after !== undefined;
    const t: TaskRecord = {
      id: newSwarmId(),
      version: 0,
      createdAt: now,
      updatedAt: now,
      serviceId: s.id,
      serviceName: s.spec.Name!,
      slot,
      nodeId: opts.nodeId ?? '',
      spec: structuredClone(s.spec.TaskTemplate ?? {}),
      templateVersion: s.templateVersion,
      desiredState: waiting ? 'ready' : 'running',
      status: { timestamp: now, state: 'new', message: 'created', err: '', containerId: '', pid: 0 },
      restarts: opts.restarts ?? [],
      ...(opts.startAt !== undefined ? { startAt: opts.startAt } : {}),
      ...(opts.after !== undefined ? { after: opts.after } : {}),
      ...(opts.failures ? { failures: opts.failures } : {}),
      ...(isJob(s.spec) ? { jobIteration: s.templateVersion } : {}),
    };
    this.attachTask(s, t);
    this.store.touch(t);
    this.store.saveTask(t);
    return t;
  }

  /** Marks a task to stop (or go away entirely) and lets the runner act on it. */
  retire(t: TaskRecord, desired: 'shutdown' | 'remove'): void {
    if (t.desiredState === desired || t.desiredState === 'remove') return;
    t.desiredState = desired;
    this.store.touch(t);
    this.store.saveTask(t);
    this.runner.advance(t);
  }

  #pass(serviceId: string, fill: FillMode): void {
    const s = this.store.services.get(serviceId);
    const tasks = this.store.tasksOf(serviceId);
    if (!s) {
      // A service whose stored row did not read is not gone: its tasks run on (swarm-record-repair.ts).
      if (this.store.unreadable.has('service', serviceId)) return;
      // The service was removed: its tasks and their containers go.
      for (const t of tasks) this.retire(t, 'remove');
      return;
    }
    if (isJob(s.spec)) {
      this.#passJob(s, tasks);
      return;
    }
    const global = isGlobal(s.spec);
    const keyOf = (t: TaskRecord) => (global ? t.nodeId : String(t.slot));
    const created: TaskRecord[] = [];

    this.store.transaction(() => {
      // Tasks whose container ended: replace them as the restart policy says.
      for (const t of tasks) {
        if (!isCurrent(t) || !isTerminal(t.status.state)) continue;
        this.#retireQuietly(t, 'shutdown');
        const restarts = this.#restartAllowed(s, t);
        if (!restarts) continue;
        // A task that never ran (rejected, failed to start) counts towards the back-off.
        const failures = t.runningSince === undefined && t.status.state !== 'complete' ? (t.failures ?? 0) + 1 : 0;
        created.push(this.newTask(s, t.slot, { startAt: Date.now() + restartDelayMs(s.spec, failures), restarts, failures, nodeId: global ? t.nodeId : undefined }));
      }
      // A drained node runs nothing, a node that is down or gone runs nothing we know of: their
      // tasks stop (when the node hears of it), replicated slots get a new task placed elsewhere.
      for (const t of tasks) {
        if (!isCurrent(t) || !t.nodeId || !this.#lostNode(t.nodeId)) continue;
        this.#retireQuietly(t, 'shutdown');
        if (!global) created.push(this.newTask(s, t.slot, { restarts: t.restarts }));
      }
    });

    const all = [...tasks, ...created].filter((t) => t.desiredState !== 'remove');
    // A slot keeps one current task: once one made from the current template runs, older ones stop.
    const bySlot = new Map<string, TaskRecord[]>();
    for (const t of all.filter(isCurrent)) bySlot.set(keyOf(t), [...(bySlot.get(keyOf(t)) ?? []), t]);
    for (const list of bySlot.values()) {
      if (list.length < 2 || !list.some((t) => t.templateVersion === s.templateVersion && t.status.state === 'running')) continue;
      for (const t of list) if (t.templateVersion !== s.templateVersion) this.retire(t, 'shutdown');
    }
    // Nor two from the current template: two leaders one after the other may each have replaced the
    // same task, or a cut-off leader's write arrived late. The one running longest stays.
    for (const list of bySlot.values()) {
      const twins = list.filter((t) => isCurrent(t) && t.templateVersion === s.templateVersion);
      if (twins.length < 2) continue;
      const rank = (t: TaskRecord) => [t.status.state === 'running' ? 0 : 1, t.runningSince ?? Number.MAX_SAFE_INTEGER, Date.parse(t.createdAt) || 0];
      const before = (a: TaskRecord, b: TaskRecord) => {
        const [x, y] = [rank(a), rank(b)];
        const i = x.findIndex((v, j) => v !== y[j]);
        return i >= 0 && x[i]! < y[i]!;
      };
      const keep = twins.reduce((a, b) => (before(b, a) ? b : a));
      for (const t of twins) if (t !== keep) this.retire(t, 'shutdown');
    }
    const current = all.filter(isCurrent);
    const liveKeys = new Set(current.map(keyOf));
    if (fill !== 'none') {
      if (global) {
        for (const node of this.#globalNodes()) {
          if (!liveKeys.has(node.id) && (fill === 'live' || !all.some((t) => keyOf(t) === node.id))) created.push(this.newTask(s, 0, { nodeId: node.id }));
        }
      } else {
        const want = replicas(s.spec);
        const occupied = fill === 'live' ? liveKeys : new Set(all.map(keyOf));
        let missing = want - occupied.size;
        for (let slot = 1; missing > 0; slot++) {
          if (occupied.has(String(slot))) continue;
          created.push(this.newTask(s, slot));
          missing--;
        }
        if (liveKeys.size > want) this.#scaleDown(current, liveKeys.size - want, all);
      }
    }
    this.#reap(s, all, keyOf);
    for (const t of [...tasks, ...created]) {
      if (this.store.tasks.get(t.id) !== t) continue;
      if (isCurrent(t) || !isTerminal(t.status.state) || t.desiredState === 'remove') this.runner.advance(t);
    }
  }

  /**
   * Jobs: each slot (each node, for a global job) runs until one task of the current iteration
   * completes; at most MaxConcurrent run at once. Failed tasks are retried as the restart policy says
   * (a completed one never is); a new iteration (spec change) stops the old one's tasks.
   */
  #passJob(s: ServiceRecord, tasks: TaskRecord[]): void {
    const global = isGlobal(s.spec);
    const keyOf = (t: TaskRecord) => (global ? t.nodeId : String(t.slot));
    const current = (t: TaskRecord) => t.templateVersion === s.templateVersion;
    const created: TaskRecord[] = [];
    this.store.transaction(() => {
      for (const t of tasks) {
        if (!isCurrent(t)) continue;
        if (!current(t)) {
          this.#retireQuietly(t, 'shutdown');
          continue;
        }
        if (!isTerminal(t.status.state)) continue;
        this.#retireQuietly(t, 'shutdown');
        if (t.status.state === 'complete') continue;
        const restarts = this.#restartAllowed(s, t);
        if (!restarts) continue;
        const failures = t.runningSince === undefined ? (t.failures ?? 0) + 1 : 0;
        created.push(this.newTask(s, t.slot, { startAt: Date.now() + restartDelayMs(s.spec, failures), restarts, failures, nodeId: global ? t.nodeId : undefined }));
      }
    });
    const all = [...tasks, ...created].filter((t) => t.desiredState !== 'remove' && current(t));
    const done = new Set(all.filter((t) => t.status.state === 'complete').map(keyOf));
    const live = new Set(all.filter(isCurrent).map(keyOf));
    // A slot whose tasks all failed for good is finished too: nothing more will be tried there.
    const tried = new Set(all.map(keyOf));
    if (global) {
      for (const node of this.#globalNodes()) if (!tried.has(node.id)) created.push(this.newTask(s, 0, { nodeId: node.id }));
    } else {
      const job = s.spec.Mode!.ReplicatedJob!;
      let room = (job.MaxConcurrent ?? 1) - live.size;
      for (let slot = 1; slot <= (job.TotalCompletions ?? 0) && room > 0; slot++) {
        const key = String(slot);
        if (done.has(key) || live.has(key) || tried.has(key)) continue;
        created.push(this.newTask(s, slot));
        room--;
      }
    }
    this.#reap(s, [...tasks, ...created].filter((t) => t.desiredState !== 'remove'), keyOf);
    for (const t of [...tasks, ...created]) {
      if (this.store.tasks.get(t.id) !== t) continue;
      if (isCurrent(t) || !isTerminal(t.status.state) || t.desiredState === 'remove') this.runner.advance(t);
    }
  }

  /** Nodes a global service runs on: up and not drained (constraints are the task runner's to check). */
  #globalNodes() {
    return [...this.store.nodes.values()].filter((n) => n.spec.Availability !== 'drain' && this.store.nodeUp(n.id));
  }

  /** The node will not run its tasks: drained, down or removed. */
  #lostNode(id: string): boolean {
    return this.store.nodes.get(id)?.spec.Availability === 'drain' || !this.store.nodeUp(id);
  }

  #retireQuietly(t: TaskRecord, desired: 'shutdown'): void {
    t.desiredState = desired;
    this.store.touch(t);
    this.store.saveTask(t);
  }

  /** The restart history for the replacement, or undefined when the policy says no more. */
  #restartAllowed(s: ServiceRecord, t: TaskRecord): number[] | undefined {
    const p = restartPolicy(s.spec);
    if (p.Condition === 'none') return undefined;
    if (p.Condition === 'on-failure' && t.status.state === 'complete') return undefined;
    const now = Date.now();
    const recent = p.Window > 0 ? t.restarts.filter((at) => now - at < p.Window / 1e6) : t.restarts;
    if (p.MaxAttempts > 0 && recent.length >= p.MaxAttempts) return undefined;
    return [...recent.slice(-100), now];
  }

  /**
   * Surplus slots go entirely: slots whose task is not running first, then one at a time from the node
   * running the most of the service (highest slot first there), so what stays is spread as evenly as
   * placement would have spread it. Slot numbers alone are no guide once tasks were moved by a failover.
   */
  #scaleDown(current: TaskRecord[], surplus: number, all: TaskRecord[]): void {
    const bySlot = new Map<number, TaskRecord>();
    for (const t of current) if (!bySlot.has(t.slot) || t.status.state === 'running') bySlot.set(t.slot, t);
    const slots = [...bySlot.values()].sort((a, b) => b.slot - a.slot);
    const victims = new Set<number>();
    for (const t of slots) if (t.status.state !== 'running' && victims.size < surplus) victims.add(t.slot);
    const running = slots.filter((t) => t.status.state === 'running');
    const perNode = new Map<string, number>();
    for (const t of running) perNode.set(t.nodeId, (perNode.get(t.nodeId) ?? 0) + 1);
    while (victims.size < surplus && running.length > 0) {
      let pick = 0;
      for (let i = 1; i < running.length; i++) if (perNode.get(running[i]!.nodeId)! > perNode.get(running[pick]!.nodeId)!) pick = i;
      const [t] = running.splice(pick, 1);
      victims.add(t!.slot);
      perNode.set(t!.nodeId, perNode.get(t!.nodeId)! - 1);
    }
    for (const t of all) if (victims.has(t.slot)) this.retire(t, 'remove');
  }

  /**
   * Keeps at most TaskHistoryRetentionLimit tasks per slot; the oldest finished ones go first. A
   * restart policy's MaxAttempts, when set, makes it MaxAttempts + 1 instead, as swarmkit's reaper does.
   */
  #reap(s: ServiceRecord | undefined, all: TaskRecord[], keyOf: (t: TaskRecord) => string): void {
    const attempts = s ? restartPolicy(s.spec).MaxAttempts : 0;
    const limit = attempts > 0 ? attempts + 1 : this.store.cluster?.spec.Orchestration?.TaskHistoryRetentionLimit ?? 5;
    if (limit < 0) return;
    const bySlot = new Map<string, TaskRecord[]>();
    for (const t of all) {
      if (t.desiredState === 'remove' || this.store.tasks.get(t.id) !== t) continue;
      const list = bySlot.get(keyOf(t)) ?? [];
      list.push(t);
      bySlot.set(keyOf(t), list);
    }
    for (const list of bySlot.values()) {
      let excess = list.length - Math.max(limit, 0);
      if (excess <= 0) continue;
      list.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
      for (const t of list) {
        if (excess <= 0) break;
        if (isCurrent(t) || !isTerminal(t.status.state)) continue;
        this.retire(t, 'remove');
        excess--;
      }
    }
  }
}
