/**
 * The containers aggregate's facade, the one object routes call: lifecycle (create, start, stop,
 * kill, wait, restart, pause, rename, remove), the views beside it (logs, top, stats, diff, export,
 * size, commit), and the attach, exec and archive services it builds. Behind it, each in its
 * module and built here: the records in memory and in SQLite (container-table.ts), per-container
 * locks (container-locks.ts), the start path (container-start.ts), stop and kill
 * (container-stop.ts), exits with restart policies and auto-remove (exit-handling.ts), removal
 * (container-removal.ts), rename (container-rename.ts) and start-up recovery (container-recovery.ts).
 */
import { hostname } from 'node:os';
import { join } from 'node:path';
import { randomHex } from '../../lib/random-hex.js';
import { conflict, invalidArgument, notImplemented, notModified, BerthError } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { ExitStatus } from '../../runtime/container-exits.js';
import type { ContainerRecords } from '../../state/container-records.js';
import type { ContainerIntents } from '../intents/container-intents.js';
import type { ImageService } from '../images/image-service.js';
import { lookupImage } from '../images/image-lookup.js';
import type { EventBus } from '../events.js';
import { mergeImageConfig, newContainerRecord, validateHostConfig, validateName, generateName } from './container-create.js';
import { normalizeNamespaceModes, validateNamespaceModes } from './container-namespaces.js';
import { normalizeLinks, withoutLink } from './container-links.js';
import { renameContainer } from './container-rename.js';
import type { ContainerRecord, CreateConfig, HostConfig } from './container-model.js';
import { eventAttrs, isRunningLike, shortId } from './container-model.js';
import { Waiters, type WaitCondition, type WaitResult } from './container-waiters.js';
import type { RuntimeProcesses } from './container-processes.js';
import { Trash } from './container-trash.js';
import { ContainerTable } from './container-table.js';
import { ContainerLocks } from './container-locks.js';
import { ContainerStarter } from './container-start.js';
import { ExitHandling } from './exit-handling.js';
import { ContainerRemoval, type RemoveOptions } from './container-removal.js';
import { recoverContainers } from './container-recovery.js';
import { ContainerStopper, type StopOptions } from './container-stop.js';
import type { VolumeService } from '../volumes/volume-service.js';
import type { MountSpecInput } from '../volumes/mount-points.js';
import { mergeUpdate, parseUpdate, updateResources } from './container-update.js';
import { ContainerLogReader } from './log-reader.js';
import { logLimits } from './log-rotation.js';
import { containerTop, type TopResult } from './container-top.js';
import { containerChanges, containerLayerView, containerSize, exportContainer, type Change } from './container-inspect-fs.js';
import { emptyStats, sampleStats, type StatsJson } from './container-stats.js';
import { commitContainer, type CommitRequest } from '../images/container-commit.js';
import type { Readable } from 'node:stream';
import { AttachService } from './attach.js';
import { ExecService } from './exec.js';
import { ContainerArchive } from './container-archive.js';
import { repairStoredRecord } from './container-record-repair.js';
import { checkBlkioWeight, hostCgroupSupport } from './cgroup-options.js';

export interface CreateRequest {
  name?: string;
  config: CreateConfig;
  hostConfig: HostConfig;
  networkingConfig: Record<string, unknown>;
}

export interface ContainerServiceDeps {
  records: ContainerRecords;
  images: ImageService;
  events: EventBus;
  dataRoot: string;
  defaultRuntime: 'crun' | 'runc';
  volumes: VolumeService;
  intents: ContainerIntents;
  processes: RuntimeProcesses;
  logOpts: Record<string, string>;
}

export class ContainerService {
  readonly waiters = new Waiters();
  readonly #table: ContainerTable;
  readonly #locks = new ContainerLocks();
  readonly #trash: Trash;
  readonly #starter: ContainerStarter;
  readonly #removal: ContainerRemoval;
  readonly #exits: ExitHandling;
  readonly #stopper: ContainerStopper;
  readonly records: ContainerRecords;
  readonly images: ImageService;
  readonly events: EventBus;
  readonly dataRoot: string;
  readonly defaultRuntime: 'crun' | 'runc';
  /** Volumes: mount points resolved at create, mounted at start, released at exit and removal. */
  readonly volumes: VolumeService;
  readonly intents: ContainerIntents;
  /** Runs and watches processes (runtime + network). */
  readonly processes: RuntimeProcesses;
  /** The aggregate's other services, reached by routes through this facade. */
  readonly attach: AttachService;
  readonly execs: ExecService;
  /** `docker cp`. */
  readonly archive: ContainerArchive;
  /** The daemon's log-opts (max-size, max-file), for containers that set none. */
  readonly #logOpts: Record<string, string>;

  constructor(deps: ContainerServiceDeps) {
    this.records = deps.records;
    this.images = deps.images;
    this.events = deps.events;
    this.dataRoot = deps.dataRoot;
    this.defaultRuntime = deps.defaultRuntime;
    this.volumes = deps.volumes;
    this.intents = deps.intents;
    this.processes = deps.processes;
    this.attach = new AttachService(this, this.processes, this.events);
    this.execs = new ExecService(this, this.processes, this.events);
    this.archive = new ContainerArchive(this);
    this.#logOpts = deps.logOpts;
    this.#trash = new Trash(join(this.dataRoot, 'trash'));
    this.#table = new ContainerTable(this.records);
    const containerDir = (id: string) => this.containerDir(id);
    const common = { table: this.#table, processes: this.processes, volumes: this.volumes, events: this.events, containerDir };
    this.#starter = new ContainerStarter({ ...common, images: this.images });
    this.#removal = new ContainerRemoval({ ...common, locks: this.#locks, waiters: this.waiters, intents: this.intents, trash: this.#trash });
    this.#stopper = new ContainerStopper({ table: this.#table, locks: this.#locks, waiters: this.waiters, processes: this.processes, events: this.events });
    this.#exits = new ExitHandling({ ...common, locks: this.#locks, waiters: this.waiters, starter: this.#starter, removal: this.#removal });
  }

  /** The exec sessions of a container (inspect's ExecIDs). */
  execIds(containerId: string): string[] {
    return this.execs.idsFor(containerId);
  }

  /** The containers of an image, running and not (image removal and list's Containers count). */
  imageUsage(imageId: string): { running: string[]; stopped: string[] } {
    return this.#table.imageUsage(imageId);
  }

  /** Loads every stored container into memory. */
  load(): void {
    this.#trash.empty();
    this.#table.load((row) => repairStoredRecord(row.data, row, this.containerDir(row.id), this.defaultRuntime));
  }

  all(): ContainerRecord[] {
    return this.#table.all();
  }

  containerDir(id: string): string {
    return join(this.dataRoot, 'containers', id);
  }

  /** By full id, name (with or without '/'), or unique id prefix, as dockerd resolves them. */
  get(idOrName: string): ContainerRecord {
    return this.#table.get(idOrName);
  }

  find(idOrName: string): ContainerRecord | undefined {
    return this.#table.find(idOrName);
  }

  /** Changes with every save, creation or removal of any container. */
  get revision(): number {
    return this.#table.revision;
  }

  /** Changes with every save of this record (0 for a record unchanged since load). */
  revisionOf(c: ContainerRecord): number {
    return this.#table.revisionOf(c);
  }

  save(c: ContainerRecord): void {
    this.#table.save(c);
  }

  /**
   * Serializes operations on one container (start vs remove, stop vs kill...). After an exit they
   * also wait for its release to end, and have its unmount run at once, except with
   * `alongsideRelease` (commit: it reads the upper dir only, which no release touches).
   */
  withLock<T>(id: string, fn: () => Promise<T>, opts: { alongsideRelease?: boolean } = {}): Promise<T> {
    return this.#locks.withLock(id, fn, opts);
  }

  create(req: CreateRequest): { Id: string; Warnings: string[] } {
    const name = req.name ? validateName(req.name) : generateName((n) => this.#table.nameTaken(n));
    this.#table.checkNameFree(name);
    if (!req.config.Image) throw invalidArgument('config.Image: image name is required');
    const image = lookupImage(this.images.records, req.config.Image).image;
    const warnings = validateHostConfig(req.hostConfig);
    validateNamespaceModes(req.hostConfig, !!req.config.Hostname);
    const config = mergeImageConfig(req.config, this.images.config(image));
    const id = randomHex(32);
    const dir = this.containerDir(id);
    const lookup = (x: string) => this.find(x);
    const hc: HostConfig = normalizeLinks(normalizeNamespaceModes({ ...req.hostConfig, NetworkMode: req.hostConfig.NetworkMode || 'bridge' }, lookup), name, lookup);
    // On the host's network (or UTS namespace) the container shares the host's name, as with dockerd.
    config.Hostname ||= hc.NetworkMode === 'host' || hc.UTSMode === 'host' ? hostname() : shortId(id);
    if (!hc.RestartPolicy) hc.RestartPolicy = { Name: 'no', MaximumRetryCount: 0 };
    const mountPoints = this.volumes.resolveMounts({
      binds: hc.Binds ?? [],
      mounts: (hc.Mounts ?? []) as MountSpecInput[],
      volumesFrom: (hc.VolumesFrom as string[] | null | undefined) ?? [],
      imageVolumes: Object.keys(config.Volumes ?? {}),
      tmpfs: Object.keys(hc.Tmpfs ?? {}),
      mountPointsOf: (ref) => {
        const from = this.find(ref);
        if (!from) throw invalidArgument(`No such container: ${ref}`);
        return from.mountPoints ?? [];
      },
    });
    const c = newContainerRecord({ id, name, imageId: image.id, config, hostConfig: hc, networkingConfig: req.networkingConfig, mountPoints, dir, defaultRuntime: this.defaultRuntime });
    this.#table.insert(c);
    this.processes.network.created(c);
    this.events.publish('container', 'create', id, this.attrs(c));
    return { Id: id, Warnings: warnings };
  }

  /** Event attributes dockerd sends for a container: image, name and labels. */
  attrs(c: ContainerRecord, extra: Record<string, string> = {}): Record<string, string> {
    return eventAttrs(c, extra);
  }

  async start(idOrName: string): Promise<void> {
    const c = this.get(idOrName);
    await this.withLock(c.id, async () => {
      if (c.state.status === 'paused') throw conflict('cannot start a paused container, try unpause instead');
      if (c.state.status === 'running' || c.state.status === 'restarting') throw notModified();
      if (c.state.status === 'removing' || c.state.status === 'dead') throw conflict(`container ${c.id} is marked for removal and cannot be started`);
      c.manuallyStopped = false;
      try {
        await this.#starter.startProcess(c);
      } catch (err) {
        // As dockerd: an AutoRemove container that fails to start is removed (`docker run --rm`
        // waits for condition=removed). Outside the lock, which remove() takes too.
        if (c.hostConfig.AutoRemove) setImmediate(() => void this.remove(c.id, { force: true, volumes: true }).catch((e) => log.warn('auto-remove after a failed start failed', { id: c.id, err: e })));
        throw err;
      }
    });
  }

  /** Called by the process watcher when a container's process has exited (exit-handling.ts). */
  handleExit(id: string, exit: ExitStatus): Promise<void> {
    return this.#exits.handleExit(id, exit);
  }

  /** Ends every release still under way (at shutdown: no mount is left behind for an exited container). */
  finishReleases(): Promise<void> {
    return this.#locks.finishReleases();
  }

  wait(idOrName: string, condition: WaitCondition): { immediate?: WaitResult; pending?: Promise<WaitResult> } {
    const c = this.get(idOrName);
    if (condition === 'not-running' && !isRunningLike(c.state)) return { immediate: { StatusCode: c.state.exitCode } };
    return { pending: this.waiters.add(c.id, condition) };
  }

  stop(idOrName: string, opts: StopOptions): Promise<void> {
    return this.#stopper.stop(idOrName, opts);
  }

  kill(idOrName: string, signal: string | undefined): Promise<void> {
    return this.#stopper.kill(idOrName, signal);
  }

  async restart(idOrName: string, opts: StopOptions): Promise<void> {
    const c = this.get(idOrName);
    // Between the stop and the start the container looks stopped: a crash there is finished on restart.
    await this.intents.around(c.id, 'restart', async () => {
      if (isRunningLike(c.state)) await this.stop(c.id, opts).catch((err) => { if (!(err instanceof BerthError && err.kind === 'not-modified')) throw err; });
      await this.start(c.id);
    });
    this.events.publish('container', 'restart', c.id, this.attrs(c));
  }

  /**
   * Under the container's lock, like every change of its state: a pause that came while a commit had
   * paused it for its snapshot was acknowledged and then undone by the commit's own unpause.
   */
  async pause(idOrName: string): Promise<void> {
    const c = this.get(idOrName);
    await this.withLock(c.id, () => this.pauseHeld(c));
  }

  async unpause(idOrName: string): Promise<void> {
    const c = this.get(idOrName);
    await this.withLock(c.id, () => this.unpauseHeld(c));
  }

  /** pause for a caller that holds the container's lock (commit). */
  async pauseHeld(c: ContainerRecord): Promise<void> {
    if (c.state.status === 'paused') throw conflict(`Container ${c.id} is already paused`);
    if (c.state.status !== 'running') throw conflict(`Container ${c.id} is not running`);
    await this.processes.pause(c);
    c.state.status = 'paused';
    this.save(c);
    this.events.publish('container', 'pause', c.id, this.attrs(c));
  }

  /** unpause for a caller that holds the container's lock (commit). */
  async unpauseHeld(c: ContainerRecord): Promise<void> {
    if (c.state.status !== 'paused') throw conflict(`Container ${c.id} is not paused`);
    await this.processes.resume(c);
    c.state.status = 'running';
    this.save(c);
    this.events.publish('container', 'unpause', c.id, this.attrs(c));
  }

  /** POST /containers/{id}/update (its body): kept in the record, and applied to a running container's cgroups at once. */
  async update(idOrName: string, body: Record<string, unknown>): Promise<{ Warnings: string[] }> {
    const req = parseUpdate(body);
    const c = this.get(idOrName);
    return this.withLock(c.id, async () => {
      if (c.state.status === 'removing' || c.state.status === 'dead') throw conflict(`Cannot update container ${c.id}: container is marked for removal and cannot be "update"`);
      const warnings: string[] = [];
      checkBlkioWeight(req, hostCgroupSupport(), warnings);
      const next = mergeUpdate(c.id, c.hostConfig, req);
      if (c.state.status === 'running' || c.state.status === 'paused') {
        await this.processes.runtime.lifecycle.update(c.id, updateResources(next)).catch((err: Error) => {
          throw new BerthError('internal', `Cannot update container ${c.id}: ${err.message}`);
        });
      }
      c.hostConfig = next;
      this.save(c);
      this.events.publish('container', 'update', c.id, this.attrs(c));
      return { Warnings: warnings };
    });
  }

  /** `docker rename`: see container-rename.ts. */
  rename(idOrName: string, newName: string): void {
    renameContainer(this.#table, this.events, this.get(idOrName), newName);
  }

  /** `docker rm --link`: drops a legacy link from its parent; both containers stay. */
  removeLink(linkName: string): void {
    const { parent, hostConfig } = withoutLink(linkName, (x) => this.find(x));
    parent.hostConfig = hostConfig;
    this.save(parent);
  }

  remove(idOrName: string, opts: RemoveOptions): Promise<void> {
    return this.#removal.remove(idOrName, opts);
  }

  /** After a daemon restart: see container-recovery.ts. */
  recover(): Promise<void> {
    return recoverContainers({
      table: this.#table,
      locks: this.#locks,
      processes: this.processes,
      starter: this.#starter,
      exits: this.#exits,
      removal: this.#removal,
      intents: this.intents,
      trash: this.#trash,
      dataRoot: this.dataRoot,
      containerDir: (id) => this.containerDir(id),
      start: (id) => this.start(id),
      unpause: (id) => this.unpause(id),
    });
  }

  /** `docker logs`: the container and a reader of its log; refused when its log driver keeps none. */
  logs(idOrName: string): { container: ContainerRecord; reader: ContainerLogReader } {
    const c = this.get(idOrName);
    if (c.hostConfig.LogConfig?.Type === 'none') throw notImplemented('configured logging driver does not support reading');
    return { container: c, reader: this.logReaderOf(c) };
  }

  logReaderOf(c: ContainerRecord): ContainerLogReader {
    return new ContainerLogReader(c.logPath, logLimits(c.hostConfig.LogConfig?.Config, this.#logOpts)?.maxFiles ?? 1);
  }

  top(idOrName: string, psArgs?: string): Promise<TopResult> {
    return containerTop(this, this.processes.runtime, idOrName, psArgs);
  }

  /** `docker diff`. */
  changes(idOrName: string): Promise<Change[]> {
    return containerChanges(containerLayerView(this, this.get(idOrName)));
  }

  /** `docker export`: the rootfs as a tar stream. */
  export(idOrName: string): Promise<Readable> {
    return exportContainer(this, idOrName);
  }

  /** `docker ps -s` and inspect's size: bytes written, and those plus the image's. */
  size(c: ContainerRecord): Promise<{ rw: number; rootFs: number }> {
    return containerSize(this, c);
  }

  /** A stats sample (CPU % from `previous`); undefined once the container is gone. */
  sampleStats(c: ContainerRecord, previous?: StatsJson): Promise<StatsJson | undefined> {
    return sampleStats(this.processes.runtime, c, previous);
  }

  /** Stats of a container that is not running. */
  emptyStats(c: ContainerRecord): StatsJson {
    return emptyStats(c);
  }

  /** `docker commit`: the container's changes as a new image. */
  commit(req: CommitRequest): Promise<{ imageId: string }> {
    return commitContainer(this, req);
  }

  counts(): { total: number; running: number; paused: number; stopped: number } {
    return this.#table.counts();
  }
}
