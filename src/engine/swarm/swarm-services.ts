/**
 * The services and tasks API: create, update (rolling, or a rollback), remove, replica counts, and a
 * task's log records from wherever it runs. The leader's orchestrator and updater do the work; a
 * manager that does not lead only records the change, which the leader hears through etcd.
 */
import { invalidArgument, notFound, notImplemented } from '../../lib/errors.js';
import { WorkGate } from '../../lib/work-gate.js';
import { nameTaken } from './swarm-names.js';
import { generateName } from '../containers/container-create.js';
import { newSwarmId } from './swarm-ids.js';
import type { NodeFiles } from './cluster/membership.js';
import { normalizeServiceSpec, resolvePorts, templateChanged } from './service-spec.js';
import { isCurrent } from './orchestrator.js';
import { containerRecords, remoteTaskRecords } from './task-logs.js';
import type { LogRecord } from '../containers/log-reader.js';
import { SwarmPart, type SwarmCore } from './swarm-core.js';
import { updateStarted } from './updater.js';
import { isGlobal, isJob, modeName, outOfSequence, replicas, rpc, type ServiceRecord, type ServiceSpec, type TaskRecord, type TaskLogQuery } from './swarm-model.js';


export interface ServiceCounts {
  running: number;
  desired: number;
  completed: number;
}

export class SwarmServices extends SwarmPart {
  /** This node's creates and updates, one at a time (in arrival order; one that fails lets the next go). */
  readonly #serial = new WorkGate(1);

  constructor(
    core: SwarmCore,
    /** This node's certificates, to ask other nodes for their tasks' logs. */
    private readonly nodeFiles: () => NodeFiles | undefined,
  ) {
    super(core);
  }

  #checkRefs(spec: ServiceSpec): void {
    this.blobs.secret.checkRefs(spec);
    this.blobs.config.checkRefs(spec);
  }


  services(): ServiceRecord[] {
    this.core.cluster();
    return [...this.store.services.values()];
  }

  service(idOrName: string): ServiceRecord {
    this.core.cluster();
    const s = this.store.findService(idOrName);
    if (!s) throw this.store.unreadable.error('service', idOrName) ?? notFound(`service ${idOrName} not found`);
    return s;
  }

  /**
   * A new service. In a cluster it is in etcd before the answer (swarm-store.ts, commitService); the
   * creates and updates of this node go one at a time, so none picks a name or address another is
   * still writing.
   */
  createService(body: unknown, registryAuth: string | undefined): Promise<{ id: string }> {
    return this.#serial.run(async () => {
      this.core.cluster();
      await this.store.linked();
      const spec = normalizeServiceSpec(body);
      this.#checkRefs(spec);
      // Compared lower-cased, as swarmkit's store does; in a cluster etcd has the last word (swarm-names.ts).
      const names = new Set([...this.store.services.values()].map((s) => s.spec.Name?.toLowerCase()));
      const name = (spec.Name ||= generateName((n) => names.has(n.toLowerCase())));
      if (this.store.unreadable.holdsName('service', name)) throw nameTaken('services', name);
      // Where the cache holds the name, etcd is asked: the cache may be behind another manager's removal.
      const holders = [...this.store.services.values()].filter((s) => s.spec.Name?.toLowerCase() === name.toLowerCase()).map((s) => s.id);
      if (holders.length && (await this.store.nameHeld('services', name, holders))) throw nameTaken('services', name);
      const ports = resolvePorts(spec.EndpointSpec, [], this.#ingressPorts());
      const vips = this.#virtualIPs(spec);
      const now = new Date().toISOString();
      const next: ServiceRecord = { id: newSwarmId(), version: 0, createdAt: now, updatedAt: now, spec, templateVersion: 0, ports, ...(registryAuth ? { registryAuth } : {}), ...vips };
      this.store.touch(next);
      next.templateVersion = next.version;
      const s = await this.store.commitService(next);
      this.core.reconcile(s.id, 'live');
      this.core.publish();
      return { id: s.id };
    });
  }

  /**
   * A new spec (or the previous one back) for a service at `version`: dockerd's "update out of
   * sequence" when that is not its version, here or (in a cluster) in etcd when written.
   */
  updateService(idOrName: string, version: number, body: unknown, opts: { rollback?: boolean; registryAuth?: string }): Promise<void> {
    return this.#serial.run(async () => {
      this.core.cluster();
      await this.store.linked();
      const s = this.service(idOrName);
      if (version !== s.version) throw outOfSequence();
      let spec: ServiceSpec;
      if (opts.rollback) {
        if (!s.previousSpec) throw invalidArgument(`service ${s.id} does not have a previous spec`);
        spec = s.previousSpec;
      } else {
        spec = normalizeServiceSpec(body);
        this.#checkRefs(spec);
        spec.Name ||= s.spec.Name;
        // swarmkit's order and codes (Unimplemented: dockerd's 501). A name never changes, so an update never touches its name key.
        if (modeName(spec) !== modeName(s.spec)) throw notImplemented(rpc('Unimplemented', 'service mode change is not allowed'));
        if (spec.Name !== s.spec.Name) throw notImplemented(rpc('Unimplemented', 'renaming services is not supported'));
      }
      const next: ServiceRecord = { ...s, previousSpec: s.spec, spec, ports: resolvePorts(spec.EndpointSpec, s.ports, this.#ingressPorts(s.id)), ...this.#virtualIPs(spec, s) };
      if (opts.registryAuth) next.registryAuth = opts.registryAuth;
      this.store.touch(next);
      const dirty = templateChanged(s.spec, spec);
      if (dirty) next.templateVersion = next.version;
      // A rollback always reports its progress, even when only the replica count goes back.
      // A job's new iteration replaces its tasks at once; there is no rolling update of jobs.
      const kind = (dirty || opts.rollback) && !isJob(spec) ? (opts.rollback ? 'rollback' : 'update') : undefined;
      // Another manager's update is carried out by the leader, which sees the status in etcd.
      if (kind && !this.core.leads) next.updateStatus = updateStarted(kind);
      await this.store.commitService(next, s);
      if (kind && this.core.leads) this.updater.start(s, kind);
      this.core.reconcile(s.id, 'live');
      this.core.publish();
    });
  }

  /** The service goes at once (in a cluster once etcd took it); its tasks' containers are stopped and removed behind it. */
  async removeService(idOrName: string): Promise<void> {
    this.core.cluster();
    await this.store.linked();
    const lost = this.store.findService(idOrName) ? undefined : this.store.unreadable.take('service', idOrName);
    if (lost) {
      // Its row goes, and with the service no longer known its tasks are removed as any removed service's.
      this.store.records.deleteService(lost);
      this.core.reconcile(lost);
      return;
    }
    const s = this.service(idOrName);
    await this.store.commitServiceRemoval(s);
    this.updater.cancel(s.id);
    this.core.reconcile(s.id);
    this.core.publish();
  }

  counts(s: ServiceRecord): ServiceCounts {
    let running = 0;
    let notShutdown = 0;
    let completed = 0;
    for (const t of this.store.tasksOf(s.id)) {
      if (t.status.state === 'running' && isCurrent(t)) running++;
      if (t.status.state === 'complete') completed++;
      if (isCurrent(t)) notShutdown++;
    }
    if (isJob(s.spec)) {
      const done = this.store.tasksOf(s.id).filter((t) => t.status.state === 'complete' && t.templateVersion === s.templateVersion).length;
      const job = s.spec.Mode?.ReplicatedJob;
      return { running, desired: job ? Math.max(0, Math.min(job.MaxConcurrent ?? 1, (job.TotalCompletions ?? 0) - done)) : notShutdown, completed };
    }
    return { running, desired: isGlobal(s.spec) ? notShutdown : replicas(s.spec), completed };
  }


  tasks(): TaskRecord[] {
    this.core.cluster();
    return [...this.store.tasks.values()];
  }

  /**
   * A task's log records: from its container here, or streamed from the node running it (over the
   * swarm port, with this node's certificate). Empty when the task has no container.
   */
  taskLogRecords(t: TaskRecord, q: TaskLogQuery, signal: AbortSignal): AsyncIterable<LogRecord> | undefined {
    if (!t.nodeId || t.nodeId === this.store.selfId) return t.status.containerId && this.d.containers.find(t.status.containerId) ? containerRecords(this.d.containers, t.status.containerId, q, signal) : undefined;
    const node = this.store.nodes.get(t.nodeId);
    const files = this.nodeFiles();
    if (!node?.peerAddr || !files || !t.status.containerId) return undefined;
    return remoteTaskRecords(node.peerAddr, files, t.id, q, signal);
  }

  task(id: string): TaskRecord {
    this.core.cluster();
    const t = this.store.findTask(id);
    if (!t) throw this.store.unreadable.error('task', id) ?? notFound(`task ${id} not found`);
    return t;
  }

  rollback(s: ServiceRecord, message: string): void {
    if (!s.previousSpec || this.store.services.get(s.id) !== s) return;
    const current = s.spec;
    s.spec = s.previousSpec;
    s.previousSpec = current;
    s.ports = resolvePorts(s.spec.EndpointSpec, s.ports, this.#ingressPorts(s.id));
    Object.assign(s, this.#virtualIPs(s.spec, s));
    this.store.touch(s);
    s.templateVersion = s.version;
    this.store.saveService(s);
    this.updater.start(s, 'rollback', message);
    this.core.reconcile(s.id, 'live');
    this.core.publish();
  }

  /** Ingress ports in use by services other than `except`: "8080/tcp" → service name. */
  #ingressPorts(except?: string): Map<string, string> {
    const taken = new Map<string, string>();
    for (const s of this.store.services.values()) {
      if (s.id === except) continue;
      for (const p of s.ports) if (p.PublishMode === 'ingress' && p.PublishedPort) taken.set(`${p.PublishedPort}/${p.Protocol}`, s.spec.Name!);
    }
    return taken;
  }


  /** The service's VIPs for this spec (kept where its networks stay); throws for a network it cannot use. */
  #virtualIPs(spec: ServiceSpec, s?: ServiceRecord): Pick<ServiceRecord, 'virtualIPs'> {
    const vips = this.overlay?.virtualIPs(spec, s?.virtualIPs, s?.id) ?? [];
    if (!this.overlay && (spec.TaskTemplate as { Networks?: unknown[] } | undefined)?.Networks?.length) throw invalidArgument('services with networks need the network driver');
    return { virtualIPs: vips.length ? vips : undefined };
  }
}
