/**
 * Drives each task through its states with its container: new → pending → assigned → preparing
 * (pull, create the container) → ready → starting → running, and to shutdown/remove when the
 * orchestrator says so. Container events (die, destroy, health) become task states; the orchestrator
 * hears about every observed change through `onChange` and decides about restarts.
 */
import { EventEmitter } from 'node:events';
import { log } from '../../lib/log.js';
import { errorMessage, isKind } from '../../lib/errors.js';
import type { ContainerService } from '../containers/container-service.js';
import type { ImageService } from '../images/image-service.js';
import type { EngineEvent } from '../events.js';
import { isRunningLike } from '../containers/container-model.js';
import { tryLookupImage } from '../images/image-lookup.js';
import { stopGraceSeconds } from './service-spec.js';
import { taskContainerRequest } from './task-container.js';
import type { TaskContainerNetworks } from './overlay-networks.js';
import type { TaskFiles } from './task-files.js';
import type { HostFacts } from '../system.js';
import type { SwarmStore } from './swarm-store.js';
import { isTerminal, type NodeRecord, type TaskRecord, type TaskState } from './swarm-model.js';

/** Fetches an image the engine does not have, with the service's registry credentials. */
export type PullFn = (image: string, registryAuth: string | undefined) => Promise<void>;

export interface TaskRunnerDeps {
  store: SwarmStore;
  containers: ContainerService;
  images: ImageService;
  pull: PullFn;
  /** A node for a task not yet assigned (or the check of its preset node), or why none fits. */
  place: (t: TaskRecord) => { node?: NodeRecord; problem?: string };
  /** Whether this node runs the tasks assigned to `nodeId`. */
  mine: (nodeId: string) => boolean;
  /** A task assigned to another node was advanced here (the leader may clean up after a dead node). */
  elsewhere: (t: TaskRecord) => void;
  /**
   * Whether this node decides (the leader, or the node of a swarm without etcd): it places tasks, and
   * deletes the records of the tasks it removes. Otherwise it leaves an unplaced task alone, and
   * reports a removed task gone for the leader to delete its record.
   */
  decides: () => boolean;
  host: HostFacts;
  /** A task's observed state changed (or it was deleted). */
  onChange: (t: TaskRecord) => void;
  /** Secret and config files for task containers. */
  files: TaskFiles;
  /** The overlay networks of a task's container, with its addresses (undefined: none). */
  networks?: (t: TaskRecord) => Promise<TaskContainerNetworks | undefined>;
}

export class TaskRunner {
  /** Tasks being driven; true when another pass was asked for meanwhile. */
  readonly #busy = new Map<string, boolean>();
  readonly #timers = new Map<string, NodeJS.Timeout>();
  readonly #changes = new EventEmitter();
  #closed = false;

  constructor(private readonly d: TaskRunnerDeps) {
    this.#changes.setMaxListeners(0);
  }

  close(): void {
    this.#closed = true;
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
  }

  /** Moves a task as far towards its desired state as it can go now. Safe to call any time. */
  advance(t: TaskRecord): void {
    if (this.#closed) return;
    if (this.#busy.has(t.id)) {
      this.#busy.set(t.id, true);
      return;
    }
    this.#busy.set(t.id, false);
    this.#drive(t)
      .catch((err) => log.warn('swarm task step failed', { task: t.id, err: errorMessage(err) }))
      .finally(() => {
        const again = this.#busy.get(t.id);
        this.#busy.delete(t.id);
        if (again && this.d.store.tasks.get(t.id) === t) this.advance(t);
      });
  }

  /** Resolves once `pred` holds for the task, or with undefined once it is deleted or the wait aborted. */
  waitFor(taskId: string, pred: (t: TaskRecord) => boolean, signal?: AbortSignal): Promise<TaskRecord | undefined> {
    return new Promise((resolve) => {
      const check = () => {
        const t = this.d.store.tasks.get(taskId);
        if (!t || signal?.aborted) return done(undefined);
        if (pred(t)) done(t);
      };
      const done = (v: TaskRecord | undefined) => {
        this.#changes.off('change', check);
        signal?.removeEventListener('abort', check);
        resolve(v);
      };
      this.#changes.on('change', check);
      signal?.addEventListener('abort', check);
      check();
    });
  }

  /** Every observed change, for the updater's failure monitoring. */
  onTaskChange(fn: (t: TaskRecord) => void): () => void {
    this.#changes.on('change', fn);
    return () => this.#changes.off('change', fn);
  }

  async #drive(t: TaskRecord): Promise<void> {
    const { store } = this.d;
    for (;;) {
      if (this.#closed || store.tasks.get(t.id) !== t) return;
      // Another node's task: that node's agent drives it.
      if (t.nodeId && !this.d.mine(t.nodeId)) {
        this.d.elsewhere(t);
        return;
      }
      if (isTerminal(t.desiredState)) {
        await this.#shutdown(t);
        if (t.desiredState === 'remove' && store.tasks.get(t.id) === t) await this.#remove(t);
        return;
      }
      const state = t.status.state;
      switch (state) {
        case 'new':
        case 'allocated':
        case 'pending': {
          // Placement is the leader's alone (a follower may hear of a new task before it is placed,
          // and be asked to advance it when the task it waits for stops).
          if (!t.nodeId && !this.d.decides()) return;
          // After failures without running, even preparing waits for the back-off delay.
          if (t.failures && !this.#delayOver(t)) return;
          const { node, problem } = this.d.place(t);
          if (!node || problem) {
            if (state !== 'pending' || t.status.err !== problem) this.#set(t, 'pending', 'pending task scheduling', problem ?? '');
            return;
          }
          t.nodeId = node.id;
          this.#set(t, 'assigned', 'scheduler assigned task to node');
          break;
        }
        case 'assigned':
        case 'accepted':
          this.#set(t, 'preparing', 'preparing');
          break;
        case 'preparing':
          await this.#prepare(t);
          break;
        case 'ready':
          if (!this.#mayStart(t)) return;
          if (t.desiredState !== 'running') {
            t.desiredState = 'running';
            this.#save(t);
          }
          this.#set(t, 'starting', 'starting');
          break;
        case 'starting':
          if (t.status.pid) return; // started; waiting for the healthcheck
          await this.#start(t);
          break;
        default:
          return; // running, or finished by itself
      }
    }
  }

  /** A restarted task waits out its delay, an updated one for the task it replaces to stop. */
  #mayStart(t: TaskRecord): boolean {
    if (!this.#delayOver(t)) return false;
    if (t.after) {
      const before = this.d.store.tasks.get(t.after);
      if (before && !isTerminal(before.status.state)) return false;
    }
    return true;
  }

  /** Whether the task's restart delay has passed; if not, a timer advances it then. */
  #delayOver(t: TaskRecord): boolean {
    if (t.startAt && t.startAt > Date.now()) {
      if (!this.#timers.has(t.id)) {
        const timer = setTimeout(() => {
          this.#timers.delete(t.id);
          this.advance(t);
        }, t.startAt - Date.now());
        timer.unref();
        this.#timers.set(t.id, timer);
      }
      return false;
    }
    return true;
  }

  async #prepare(t: TaskRecord): Promise<void> {
    const { store, containers } = this.d;
    if (t.status.containerId && containers.find(t.status.containerId)) {
      this.#set(t, 'ready', 'prepared');
      return;
    }
    const image = t.spec.ContainerSpec?.Image ?? '';
    try {
      if (!tryLookupImage(this.d.images.records, image)) await this.d.pull(image, store.services.get(t.serviceId)?.registryAuth);
    } catch (err) {
      if (store.tasks.get(t.id) === t && t.status.state === 'preparing') this.#set(t, 'rejected', 'preparing', errorMessage(err));
      return;
    }
    if (store.tasks.get(t.id) !== t || t.status.state !== 'preparing' || isTerminal(t.desiredState)) return;
    const service = store.services.get(t.serviceId);
    let id: string;
    try {
      const files = await this.d.files.write(t);
      if (store.tasks.get(t.id) !== t || t.status.state !== 'preparing' || isTerminal(t.desiredState)) return;
      const req = taskContainerRequest(t, service?.ports ?? [], { nodeHostname: this.d.host.name, serviceLabels: service?.spec.Labels ?? {}, files, networks: await this.d.networks?.(t) });
      id = containers.create(req).Id;
    } catch (err) {
      this.#set(t, 'rejected', 'preparing', errorMessage(err));
      return;
    }
    t.status.containerId = id;
    t.containerGone = false;
    this.#set(t, 'ready', 'prepared');
  }

  async #start(t: TaskRecord): Promise<void> {
    const { containers } = this.d;
    const id = t.status.containerId;
    try {
      await containers.start(id);
    } catch (err) {
      if (!isKind(err, 'not-modified')) {
        if (t.status.state === 'starting') this.#set(t, 'failed', 'starting', `starting container failed: ${errorMessage(err)}`);
        return;
      }
    }
    const c = containers.find(id);
    // The process may already have exited (the die event has set the task's state then).
    if (t.status.state !== 'starting' || !c || !isRunningLike(c.state)) return;
    t.status.pid = c.state.pid;
    // Host-mode ports as the network bound them (a published port of 0 got a free one).
    const bound = Object.entries(c.network.ports ?? {}).flatMap(([key, list]) =>
      (list ?? []).map((b) => ({ Protocol: (key.split('/')[1] ?? 'tcp') as 'tcp', TargetPort: Number(key.split('/')[0]), PublishedPort: Number(b.HostPort), PublishMode: 'host' as const })),
    );
    if (bound.length) t.status.ports = bound;
    if (c.state.health) {
      this.#save(t); // stays starting until the healthcheck passes
      return;
    }
    t.runningSince = Date.now();
    this.#set(t, 'running', 'started');
  }

  async #shutdown(t: TaskRecord): Promise<void> {
    const { containers } = this.d;
    const c = t.status.containerId ? containers.find(t.status.containerId) : undefined;
    if (c && isRunningLike(c.state)) {
      await containers.stop(c.id, { timeout: stopGraceSeconds(t.spec) }).catch((err) => {
        if (!isKind(err, 'not-modified')) log.warn('stopping task container failed', { task: t.id, err: errorMessage(err) });
      });
    }
    if (!isTerminal(t.status.state) && this.d.store.tasks.get(t.id) === t) this.#set(t, 'shutdown', 'shutdown');
  }

  /**
   * A task whose container ended (or never was) and that is to go. Where this node decides, its record
   * goes first, as swarmkit's reaper deletes a task and its node then removes the container: so a slot
   * never lists more tasks than its history limit while a container is being removed. Elsewhere the
   * container and files go first, then the task is reported gone (`containerGone`) for the leader to
   * delete its record (etcd lets a worker write no task record; swarm-core.ts, #elsewhere).
   */
  async #remove(t: TaskRecord): Promise<void> {
    const { store } = this.d;
    if (this.d.decides()) {
      this.#clearTimer(t.id);
      store.deleteTask(t.id);
      this.#changed(t);
      await this.discard(t);
      return;
    }
    await this.discard(t);
    if (store.tasks.get(t.id) !== t || t.containerGone) return;
    t.containerGone = true;
    this.#save(t);
  }

  /** The task's container and secret files go (its record is not touched). */
  async discard(t: TaskRecord): Promise<void> {
    await this.removeContainer(t);
    await this.d.files.remove(t.id).catch((err) => log.warn('removing task files failed', { task: t.id, err: errorMessage(err) }));
  }

  /** Force-removes the task's container, if it still exists. */
  async removeContainer(t: TaskRecord): Promise<void> {
    const id = t.status.containerId;
    if (!id || !this.d.containers.find(id)) return;
    await this.d.containers.remove(id, { force: true, volumes: false }).catch((err) => {
      if (!isKind(err, 'not-found')) log.warn('removing task container failed', { task: t.id, err: errorMessage(err) });
    });
  }

  /** Container events of task containers become task states. */
  onContainerEvent(ev: EngineEvent): void {
    if (ev.Type !== 'container') return;
    const t = this.d.store.taskByContainer(ev.Actor.ID);
    if (!t) return;
    if (ev.Action === 'die') {
      const code = Number(ev.Actor.Attributes.exitCode ?? 0);
      t.status.exitCode = code;
      t.status.pid = 0;
      if (isTerminal(t.status.state)) this.#save(t);
      else if (isTerminal(t.desiredState)) this.#set(t, 'shutdown', 'shutdown');
      else if (code === 0) this.#set(t, 'complete', 'finished');
      else this.#set(t, 'failed', 'started', `task: non-zero exit (${code})`);
    } else if (ev.Action === 'destroy') {
      t.containerGone = true;
      if (isTerminal(t.status.state)) this.#save(t);
      else if (isTerminal(t.desiredState)) this.#set(t, 'shutdown', 'shutdown');
      else this.#set(t, 'failed', t.status.message, `task: container ${t.status.containerId} was removed`);
    } else if (ev.Action === 'health_status: healthy') {
      if (t.status.state === 'starting' && !isTerminal(t.desiredState)) {
        t.runningSince = Date.now();
        this.#set(t, 'running', 'started');
      }
    } else if (ev.Action === 'health_status: unhealthy') {
      if ((t.status.state === 'starting' || t.status.state === 'running') && !isTerminal(t.desiredState)) {
        this.#set(t, 'failed', 'started', 'task: container is unhealthy');
        // A failed task's container does not keep running.
        this.d.containers.stop(t.status.containerId, { timeout: stopGraceSeconds(t.spec) }).catch(() => undefined);
      }
    }
  }

  /** After a daemon restart: what the task's container did while nobody watched becomes task state. */
  syncWithContainers(t: TaskRecord): void {
    const id = t.status.containerId;
    if (!id) return;
    const c = this.d.containers.find(id);
    if (!c) {
      if (!t.containerGone) this.onContainerEvent(fakeEvent(id, 'destroy'));
      return;
    }
    if (isTerminal(t.status.state)) return;
    if (isRunningLike(c.state)) {
      if (t.status.state === 'ready' || t.status.state === 'starting') {
        t.status.pid = c.state.pid;
        t.runningSince = Date.now();
        this.#set(t, 'running', 'started');
      }
    } else if (c.state.status === 'exited' || c.state.status === 'dead') {
      if (t.status.state === 'starting' || t.status.state === 'running') this.onContainerEvent(fakeEvent(id, 'die', { exitCode: String(c.state.exitCode) }));
    }
  }

  #set(t: TaskRecord, state: TaskState, message: string, err = ''): void {
    t.status = { ...t.status, state, message, err, timestamp: new Date().toISOString() };
    this.#save(t);
  }

  #save(t: TaskRecord): void {
    if (this.d.store.tasks.get(t.id) !== t) return;
    this.d.store.touch(t);
    this.d.store.saveTask(t);
    this.#changed(t);
  }

  /** A change another node made to the task (through the cluster's store): waiters and the orchestrator hear of it. */
  observed(t: TaskRecord): void {
    this.#changed(t);
  }

  #changed(t: TaskRecord): void {
    this.#changes.emit('change', t);
    this.d.onChange(t);
    // Tasks waiting for this one to stop may go now.
    if (isTerminal(t.status.state) || !this.d.store.tasks.has(t.id)) {
      for (const other of this.d.store.tasks.values()) if (other.after === t.id) this.advance(other);
    }
  }

  #clearTimer(id: string): void {
    const timer = this.#timers.get(id);
    if (timer) clearTimeout(timer);
    this.#timers.delete(id);
  }
}

function fakeEvent(id: string, action: string, attributes: Record<string, string> = {}): EngineEvent {
  return { Type: 'container', Action: action, Actor: { ID: id, Attributes: attributes }, scope: 'local', time: 0, timeNano: 0 };
}
