/**
 * The containers aggregate's facade, the one object routes call: lifecycle (create, start, stop,
 * kill, wait, restart, pause, rename, remove, and what happens when a process exits: restart
 * policies, auto-remove), the views beside it (logs, top, stats, diff, export, size, commit), and
 * the attach, exec and archive services it builds. Every container is held in memory and written
 * through to SQLite on each change; lookups by name or id prefix never hit the disk.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { conflict, invalidArgument, notFound, notImplemented, notModified, BerthError } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { ContainerRecords } from '../../state/container-records.js';
import type { ContainerIntents } from '../intents/container-intents.js';
import { sweepOrphans } from '../intents/orphans.js';
import type { ImageService } from '../images/image-service.js';
import { lookupImage } from '../images/image-lookup.js';
import type { EventBus } from '../events.js';
import { mergeImageConfig, validateHostConfig, validateName, generateName } from './container-create.js';
import { normalizeNamespaceModes, validateNamespaceModes } from './container-namespaces.js';
import { normalizeLinks, renamedLinks, withoutLink } from './container-links.js';
import type { ContainerRecord, CreateConfig, HostConfig } from './container-model.js';
import { isRunningLike, shortId } from './container-model.js';
import { Waiters, type WaitCondition, type WaitResult } from './container-waiters.js';
import { rootfsPaths, mountRootfs, unmountRootfs, forgetRootfs } from './rootfs-mount.js';
import type { RuntimeProcesses } from './container-processes.js';
import { Trash } from './container-trash.js';
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

const ZERO_TIME = '0001-01-01T00:00:00Z';
/** How long an exited container's rootfs stays mounted when nothing asks for its unmount (#release). */
const UNMOUNT_GRACE_MS = 2_000;

/** An exit's release under way: `now()` has the unmount start at once, and resolves once all is released. */
interface Release {
  done: Promise<void>;
  now: () => Promise<void>;
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
  readonly #byId = new Map<string, ContainerRecord>();
  readonly #byName = new Map<string, string>();
  readonly #locks = new Map<string, Promise<unknown>>();
  /** What an exit releases (runtime state, network, rootfs mount), by container, until it is done. */
  readonly #releasing = new Map<string, Release>();
  /** Bumped by every save and removal: views derived from records (the list's JSON) compare it. */
  #revision = 0;
  readonly #revisions = new WeakMap<ContainerRecord, number>();
  readonly waiters = new Waiters();
  readonly #trash: Trash;
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
  }

  /** The exec sessions of a container (inspect's ExecIDs). */
  execIds(containerId: string): string[] {
    return this.execs.idsFor(containerId);
  }

  /** The containers of an image, running and not (image removal and list's Containers count). */
  imageUsage(imageId: string): { running: string[]; stopped: string[] } {
    const running: string[] = [];
    const stopped: string[] = [];
    for (const c of this.#byId.values()) if (c.imageId === imageId) (isRunningLike(c.state) ? running : stopped).push(c.id);
    return { running, stopped };
  }

  /** Loads every stored container into memory. */
  load(): void {
    this.#trash.empty();
    for (const row of this.records.loadAll()) {
      const c = repairStoredRecord(row.data, row, this.containerDir(row.id), this.defaultRuntime);
      this.#byId.set(c.id, c);
      this.#byName.set(c.name, c.id);
    }
  }

  all(): ContainerRecord[] {
    return [...this.#byId.values()];
  }

  containerDir(id: string): string {
    return join(this.dataRoot, 'containers', id);
  }

  /** By full id, name (with or without '/'), or unique id prefix, as dockerd resolves them. */
  get(idOrName: string): ContainerRecord {
    const c = this.find(idOrName);
    if (!c) throw notFound(`No such container: ${idOrName}`);
    return c;
  }

  find(idOrName: string): ContainerRecord | undefined {
    if (!idOrName) return undefined;
    const exact = this.#byId.get(idOrName);
    if (exact) return exact;
    const name = idOrName.startsWith('/') ? idOrName.slice(1) : idOrName;
    const byName = this.#byName.get(name);
    if (byName) return this.#byId.get(byName);
    if (!/^[a-f0-9]+$/.test(idOrName)) return undefined;
    let found: ContainerRecord | undefined;
    for (const [id, c] of this.#byId) {
      if (id.startsWith(idOrName)) {
        if (found) throw invalidArgument(`multiple IDs found with provided prefix: ${idOrName}`);
        found = c;
      }
    }
    return found;
  }

  /** Changes with every save, creation or removal of any container. */
  get revision(): number {
    return this.#revision;
  }

  /** Changes with every save of this record (0 for a record unchanged since load). */
  revisionOf(c: ContainerRecord): number {
    return this.#revisions.get(c) ?? 0;
  }

  save(c: ContainerRecord): void {
    this.#revisions.set(c, ++this.#revision);
    this.records.save({ id: c.id, name: c.name, createdAt: Date.parse(c.created), data: c });
  }

  /**
   * Serializes operations on one container (start vs remove, stop vs kill...). After an exit they
   * also wait for its release to end, and have its unmount run at once, except with
   * `alongsideRelease` (commit: it reads the upper dir only, which no release touches).
   */
  async withLock<T>(id: string, fn: () => Promise<T>, opts: { alongsideRelease?: boolean } = {}): Promise<T> {
    const prev = this.#locks.get(id) ?? Promise.resolve();
    const next = prev
      .catch(() => undefined)
      .then(() => (opts.alongsideRelease ? undefined : this.#releasing.get(id)?.now()))
      .then(fn);
    this.#locks.set(id, next);
    try {
      return await next;
    } finally {
      if (this.#locks.get(id) === next) this.#locks.delete(id);
    }
  }

  create(req: CreateRequest): { Id: string; Warnings: string[] } {
    const name = req.name ? validateName(req.name) : generateName((n) => this.#byName.has(n));
    const taken = this.#byName.get(name);
    if (taken) {
      throw conflict(`Conflict. The container name "/${name}" is already in use by container "${taken}". You have to remove (or rename) that container to be able to reuse that name.`);
    }
    if (!req.config.Image) throw invalidArgument('config.Image: image name is required');
    const image = lookupImage(this.images.records, req.config.Image).image;
    const warnings = validateHostConfig(req.hostConfig);
    validateNamespaceModes(req.hostConfig, !!req.config.Hostname);
    const config = mergeImageConfig(req.config, this.images.config(image));
    const id = randomBytes(32).toString('hex');
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
    const c: ContainerRecord = {
      id,
      name,
      created: new Date().toISOString(),
      imageId: image.id,
      config,
      hostConfig: hc,
      networkingConfig: req.networkingConfig,
      state: { status: 'created', pid: 0, exitCode: 0, error: '', oomKilled: false, startedAt: ZERO_TIME, finishedAt: ZERO_TIME },
      runtime: (hc.Runtime as 'crun' | 'runc' | undefined) || this.defaultRuntime,
      restartCount: 0,
      manuallyStopped: false,
      network: { endpoints: {}, ports: {}, sandboxKey: '' },
      logPath: join(dir, 'ctr.log'),
      hostnamePath: join(dir, 'hostname'),
      hostsPath: join(dir, 'hosts'),
      resolvConfPath: join(dir, 'resolv.conf'),
      mountPoints,
    };
    if (config.Healthcheck?.Test?.length && config.Healthcheck.Test[0] !== 'NONE') {
      c.state.health = { status: 'starting', failingStreak: 0, log: [] };
    }
    try {
      this.save(c);
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') {
        throw conflict(`Conflict. The container name "/${name}" is already in use. You have to remove (or rename) that container to be able to reuse that name.`);
      }
      throw err;
    }
    this.#byId.set(id, c);
    this.#byName.set(name, id);
    this.events.publish('container', 'create', id, this.attrs(c));
    return { Id: id, Warnings: warnings };
  }

  /** Event attributes dockerd sends for a container: image, name and labels. */
  attrs(c: ContainerRecord, extra: Record<string, string> = {}): Record<string, string> {
    return { ...(c.config.Labels ?? {}), image: c.config.Image ?? '', name: c.name, ...extra };
  }

  async start(idOrName: string): Promise<void> {
    const c = this.get(idOrName);
    await this.withLock(c.id, async () => {
      if (c.state.status === 'paused') throw conflict('cannot start a paused container, try unpause instead');
      if (c.state.status === 'running' || c.state.status === 'restarting') throw notModified();
      if (c.state.status === 'removing' || c.state.status === 'dead') throw conflict(`container ${c.id} is marked for removal and cannot be started`);
      c.manuallyStopped = false;
      try {
        await this.#startProcess(c);
      } catch (err) {
        // As dockerd: an AutoRemove container that fails to start is removed (`docker run --rm`
        // waits for condition=removed). Outside the lock, which remove() takes too.
        if (c.hostConfig.AutoRemove) setImmediate(() => void this.remove(c.id, { force: true, volumes: true }).catch((e) => log.warn('auto-remove after a failed start failed', { id: c.id, err: e })));
        throw err;
      }
    });
  }

  /**
   * The start path, in order: the overlay is mounted here (rootfs-mount.ts), volumes once it is
   * there; RuntimeProcesses.start (container-processes.ts) meanwhile prepares the network and,
   * after the mount, the spec input (user and working dir: container-user.ts), writes the /etc
   * files (container-rootfs.ts), builds the spec and has the runtime create and start the process.
   * This method then records the start, or the failure.
   */
  async #startProcess(c: ContainerRecord): Promise<void> {
    const image = this.images.records.getImage(c.imageId);
    if (!image) throw new BerthError('internal', `image ${c.imageId} of container ${c.name} is gone`);
    const paths = rootfsPaths(this.containerDir(c.id));
    await mkdir(paths.dir, { recursive: true });
    const lowers = [...image.chainIds].reverse().map((id) => this.images.layers.diffDir(id as `sha256:${string}`));
    // The mount runs alongside the network set-up inside processes.start.
    let mountFailed = false;
    const mounted = mountRootfs(paths, lowers, { volatile: !!c.hostConfig.AutoRemove });
    mounted.catch(() => (mountFailed = true));
    // Volumes mount (and copy up the image's content) once the rootfs is there, alongside the network set-up.
    const ready = c.mountPoints?.some((m) => m.Type === 'volume') ? mounted.then(() => this.volumes.mountFor(c, paths.merged)).then(() => undefined) : mounted;
    try {
      const { pid } = await this.processes.start(c, paths.merged, ready);
      c.state = { ...c.state, status: 'running', pid, exitCode: 0, error: '', oomKilled: false, startedAt: new Date().toISOString(), finishedAt: ZERO_TIME };
      if (c.state.health) c.state.health = { status: 'starting', failingStreak: 0, log: [] };
      this.save(c);
      this.events.publish('container', 'start', c.id, this.attrs(c));
    } catch (err) {
      await this.volumes.unmountFor(c).catch(() => undefined);
      if (mountFailed) {
        // As before the mount ran in parallel: a failed mount leaves the record as it was.
        await this.processes.cleanup(c).catch(() => undefined);
        throw err;
      }
      c.state = { ...c.state, status: c.state.status === 'restarting' ? 'exited' : c.state.status, exitCode: 127, error: (err as Error).message, pid: 0 };
      this.save(c);
      await this.processes.cleanup(c).catch(() => undefined);
      await unmountRootfs(paths).catch(() => undefined);
      throw err;
    }
  }

  /** Called by the process watcher when a container's process has exited. */
  async handleExit(id: string, exit: { exitCode: number; exitedAt: Date; oomKilled: boolean }): Promise<void> {
    const c = this.#byId.get(id);
    if (!c) return;
    const finished = { ...c.state, status: 'exited' as const, pid: 0, exitCode: exit.exitCode, oomKilled: exit.oomKilled, finishedAt: exit.exitedAt.toISOString() };
    c.state = finished;
    if (c.state.health) c.state.health.status = 'unhealthy';
    const restart = this.#shouldRestart(c);
    const autoRemove = !!c.hostConfig.AutoRemove && !restart;
    if (restart) {
      c.state.status = 'restarting';
      c.restartCount++;
    }
    this.save(c);
    this.events.publish('container', 'die', c.id, this.attrs(c, { exitCode: String(exit.exitCode) }));
    // Waiters hear of the exit at once; releasing the runtime state and the mount follows.
    this.waiters.exited(id, { StatusCode: exit.exitCode });
    const release = await this.withLock(id, async () => {
      const r = this.#release(c);
      this.#releasing.set(id, r);
      void r.done.then(() => {
        if (this.#releasing.get(id) === r) this.#releasing.delete(id);
      });
      return r; // not a promise: the lock is not held until the release ends
    });
    // A restart or a removal needs the mount gone; otherwise the unmount follows on its own.
    if (!restart && !autoRemove) return;
    await release.now();
    if (restart) {
      const delay = Math.min(100 * 2 ** Math.min(c.restartCount - 1, 10), 60_000);
      setTimeout(() => {
        this.withLock(c.id, async () => {
          if (c.state.status !== 'restarting' || c.manuallyStopped || !this.#byId.has(c.id)) return;
          await this.#startProcess(c);
        }).catch((err) => log.warn('restart failed', { id, err }));
      }, delay).unref();
    } else if (autoRemove) {
      await this.remove(id, { force: true, volumes: true }).catch((err) => log.warn('auto-remove failed', { id, err }));
    }
  }

  /**
   * Releases what an exited container held: its runtime state and network at once, its rootfs
   * mount after UNMOUNT_GRACE_MS unless an operation on the container asks for it sooner (now()).
   * Unmounting an overlay syncs the whole upper file system (~100 ms after a container wrote 50
   * MiB); a commit of a container that just exited then runs without that flush competing for
   * the disk.
   */
  #release(c: ContainerRecord): Release {
    const id = c.id;
    let unmountNow = (): void => undefined;
    let unmounted: Promise<void> | undefined;
    // Unless started again meanwhile (a start queued before this exit's turn): the mount is in use.
    if (c.state.status !== 'running') {
      const asked = new Promise<void>((resolve) => (unmountNow = resolve));
      const timer = setTimeout(unmountNow, UNMOUNT_GRACE_MS).unref();
      unmounted = asked.then(() => {
        clearTimeout(timer);
        return unmountRootfs(rootfsPaths(this.containerDir(id))).catch((err) => log.warn('unmount failed', { id, err }));
      });
    }
    const done = Promise.all([this.processes.cleanup(c).catch((err) => log.warn('container cleanup failed', { id, err })), unmounted, this.volumes.unmountFor(c)]).then(() => undefined);
    return {
      done,
      now: () => {
        unmountNow();
        return done;
      },
    };
  }

  /** Ends every release still under way (at shutdown: no mount is left behind for an exited container). */
  async finishReleases(): Promise<void> {
    await Promise.all([...this.#releasing.values()].map((r) => r.now()));
  }

  #shouldRestart(c: ContainerRecord): boolean {
    const p = c.hostConfig.RestartPolicy ?? {};
    if (c.manuallyStopped) return false;
    switch (p.Name) {
      case 'always':
      case 'unless-stopped':
        return true;
      case 'on-failure':
        return c.state.exitCode !== 0 && (!p.MaximumRetryCount || c.restartCount < p.MaximumRetryCount);
      default:
        return false;
    }
  }

  wait(idOrName: string, condition: WaitCondition): { immediate?: WaitResult; pending?: Promise<WaitResult> } {
    const c = this.get(idOrName);
    if (condition === 'not-running' && !isRunningLike(c.state)) return { immediate: { StatusCode: c.state.exitCode } };
    return { pending: this.waiters.add(c.id, condition) };
  }

  async stop(idOrName: string, opts: { timeout?: number; signal?: string }): Promise<void> {
    const c = this.get(idOrName);
    if (!isRunningLike(c.state)) throw notModified();
    c.manuallyStopped = true;
    if (c.state.status === 'restarting') {
      c.state.status = 'exited';
      this.save(c);
      this.events.publish('container', 'stop', c.id, this.attrs(c));
      return;
    }
    this.save(c);
    const timeout = opts.timeout ?? c.config.StopTimeout ?? 10;
    const signal = opts.signal || c.config.StopSignal || 'SIGTERM';
    const exited = this.waiters.add(c.id, 'next-exit');
    if (c.state.status === 'paused') await this.processes.resume(c).catch(() => undefined);
    await this.processes.kill(c, signal).catch(() => undefined);
    this.events.publish('container', 'kill', c.id, this.attrs(c, { signal: signalNumber(signal) }));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = timeout < 0 ? new Promise<never>(() => undefined) : new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), timeout * 1000)));
    const first = await Promise.race([exited, timedOut]);
    if (timer) clearTimeout(timer);
    if (first === 'timeout') {
      await this.processes.kill(c, 'SIGKILL').catch(() => undefined);
      this.events.publish('container', 'kill', c.id, this.attrs(c, { signal: '9' }));
      await exited;
    }
    this.events.publish('container', 'stop', c.id, this.attrs(c));
  }

  async kill(idOrName: string, signal: string | undefined): Promise<void> {
    const c = this.get(idOrName);
    if (!isRunningLike(c.state) || c.state.status === 'restarting') {
      throw conflict(`cannot kill container: ${idOrName}: container ${c.id} is not running`);
    }
    const sig = signal || 'SIGKILL';
    const num = signalNumber(sig);
    if (num === '') throw invalidArgument(`Invalid signal: ${sig}`);
    if (num === '9' || num === '15') c.manuallyStopped = c.manuallyStopped || false;
    const exited = num === '9' ? this.waiters.add(c.id, 'next-exit') : undefined;
    await this.processes.kill(c, sig);
    this.events.publish('container', 'kill', c.id, this.attrs(c, { signal: num }));
    // dockerd returns from a SIGKILL only once the process is gone.
    if (exited) await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000).unref())]);
  }

  async restart(idOrName: string, opts: { timeout?: number; signal?: string }): Promise<void> {
    const c = this.get(idOrName);
    // Between the stop and the start the container looks stopped: a crash there is finished on restart.
    await this.intents.around(c.id, 'restart', async () => {
      if (isRunningLike(c.state)) await this.stop(c.id, opts).catch((err) => { if (!(err instanceof BerthError && err.kind === 'not-modified')) throw err; });
      await this.start(c.id);
    });
    this.events.publish('container', 'restart', c.id, this.attrs(c));
  }

  async pause(idOrName: string): Promise<void> {
    const c = this.get(idOrName);
    if (c.state.status === 'paused') throw conflict(`Container ${c.id} is already paused`);
    if (c.state.status !== 'running') throw conflict(`Container ${c.id} is not running`);
    await this.processes.pause(c);
    c.state.status = 'paused';
    this.save(c);
    this.events.publish('container', 'pause', c.id, this.attrs(c));
  }

  async unpause(idOrName: string): Promise<void> {
    const c = this.get(idOrName);
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

  rename(idOrName: string, newName: string): void {
    const c = this.get(idOrName);
    if (!newName) throw invalidArgument('Neither old nor new names may be empty');
    const name = validateName(newName);
    if (name === c.name) throw conflict(`Renaming a container with the same name as its current name`);
    const taken = this.#byName.get(name);
    if (taken) throw conflict(`Conflict. The container name "/${name}" is already in use by container "${taken}". You have to remove (or rename) that container to be able to reuse that name.`);
    const old = c.name;
    c.name = name;
    this.save(c);
    this.#byName.delete(old);
    this.#byName.set(name, c.id);
    // Legacy links follow the container, as parent and as child.
    for (const other of this.#byId.values()) {
      const links = renamedLinks(other.hostConfig, old, name);
      if (!links) continue;
      other.hostConfig = { ...other.hostConfig, Links: links };
      this.save(other);
    }
    this.events.publish('container', 'rename', c.id, this.attrs(c, { oldName: `/${old}` }));
  }

  /** `docker rm --link`: drops a legacy link from its parent; both containers stay. */
  removeLink(linkName: string): void {
    const { parent, hostConfig } = withoutLink(linkName, (x) => this.find(x));
    parent.hostConfig = hostConfig;
    this.save(parent);
  }

  async remove(idOrName: string, opts: { force: boolean; volumes: boolean }): Promise<void> {
    const c = this.get(idOrName);
    // A container between restarts counts as running, as in dockerd: no removal without force.
    if (isRunningLike(c.state) && !opts.force) {
      if (c.state.status === 'paused') throw conflict(`cannot remove container "${idOrName}": container is paused and must be unpaused first`);
      throw conflict(`cannot remove container "${idOrName}": container is ${c.state.status}: stop the container before removing or force remove`);
    }
    // A remove cut off by a crash (container killed, record still there) is finished on restart.
    await this.intents.around(c.id, 'remove', () => this.#remove(c, idOrName, opts));
  }

  async #remove(c: ContainerRecord, idOrName: string, opts: { force: boolean; volumes: boolean }): Promise<void> {
    if (isRunningLike(c.state) && c.state.status !== 'restarting') {
      c.manuallyStopped = true;
      const exited = this.waiters.add(c.id, 'next-exit');
      if (c.state.status === 'paused') await this.processes.resume(c).catch(() => undefined);
      await this.processes.kill(c, 'SIGKILL').catch(() => undefined);
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000).unref())]);
    }
    await this.withLock(c.id, async () => {
      if (!this.#byId.has(c.id)) return;
      c.manuallyStopped = true;
      await this.processes.cleanup(c).catch(() => undefined);
      await unmountRootfs(rootfsPaths(this.containerDir(c.id)));
      this.records.delete(c.id);
      this.#byId.delete(c.id);
      this.#revision++;
      if (this.#byName.get(c.name) === c.id) this.#byName.delete(c.name);
      await this.#trash.discard(this.containerDir(c.id));
      forgetRootfs(rootfsPaths(this.containerDir(c.id)));
      await this.volumes.containerRemoved(c, { anonymous: opts.volumes }).catch((err) => log.warn('releasing volumes failed', { id: c.id, err }));
      this.events.publish('container', 'destroy', c.id, this.attrs(c));
      this.waiters.removed(c.id, { StatusCode: c.state.exitCode });
    });
  }

  /**
   * After a daemon restart: re-adopt containers whose process still runs, record the exits that
   * happened while the daemon was down (applying restart policies), and restart those that were
   * between restarts.
   */
  async recover(): Promise<void> {
    const runtime = this.processes.runtime.lifecycle;
    await Promise.all(
      this.all().map(async (c) => {
        try {
          if (c.state.status === 'running' || c.state.status === 'paused') {
            const st = await runtime.state(c.id).catch(() => undefined);
            if (st && (st.status === 'running' || st.status === 'paused')) {
              if (st.status !== c.state.status) {
                c.state.status = st.status;
                this.save(c);
              }
              this.processes.watch(c);
              return;
            }
            const exit = (await runtime.exitStatus(c.id).catch(() => undefined)) ?? { exitCode: 255, exitedAt: new Date(), oomKilled: false };
            await this.handleExit(c.id, exit);
          } else if (c.state.status === 'restarting' && !c.manuallyStopped) {
            await this.withLock(c.id, () => this.#startProcess(c));
          } else if (c.state.status === 'removing') {
            await this.remove(c.id, { force: true, volumes: false });
          } else {
            // Exited while the previous daemon still meant to unmount its rootfs (#release): do it now.
            await unmountRootfs(rootfsPaths(this.containerDir(c.id)));
          }
        } catch (err) {
          log.warn('container recovery failed', { id: c.id, err });
        }
      }),
    );
    await sweepOrphans({
      known: (id) => this.#byId.has(id),
      containersDir: join(this.dataRoot, 'containers'),
      runtimeIds: () => runtime.containerIds(),
      runtimeCleanup: (id) => runtime.cleanup(id),
      discard: (dir) => this.#trash.discard(dir),
    });
    await this.intents.recover({
      status: (id) => this.find(id)?.state.status,
      unpause: (id) => this.unpause(id),
      start: (id) => this.start(id),
      remove: (id) => this.remove(id, { force: true, volumes: false }),
      abandonExec: (id, execId) => (this.processes as RuntimeProcesses).runtime.execs.abandon(id, execId, this.find(id)?.state.pid ?? 0),
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
    let running = 0;
    let paused = 0;
    for (const c of this.#byId.values()) {
      if (c.state.status === 'running' || c.state.status === 'restarting') running++;
      else if (c.state.status === 'paused') paused++;
    }
    return { total: this.#byId.size, running, paused, stopped: this.#byId.size - running - paused };
  }
}

const SIGNALS: Record<string, number> = {
  HUP: 1, INT: 2, QUIT: 3, ILL: 4, TRAP: 5, ABRT: 6, IOT: 6, BUS: 7, FPE: 8, KILL: 9, USR1: 10, SEGV: 11, USR2: 12,
  PIPE: 13, ALRM: 14, TERM: 15, STKFLT: 16, CHLD: 17, CONT: 18, STOP: 19, TSTP: 20, TTIN: 21, TTOU: 22, URG: 23,
  XCPU: 24, XFSZ: 25, VTALRM: 26, PROF: 27, WINCH: 28, IO: 29, POLL: 29, PWR: 30, SYS: 31,
};

/** `SIGTERM`, `TERM`, `15` → "15"; unknown → "". */
export function signalNumber(sig: string): string {
  if (/^\d+$/.test(sig)) return Number(sig) > 0 && Number(sig) <= 64 ? String(Number(sig)) : '';
  const name = sig.toUpperCase().replace(/^SIG/, '');
  const rt = /^RTMIN(\+(\d+))?$/.exec(name);
  if (rt) return String(34 + Number(rt[2] ?? 0));
  return SIGNALS[name] !== undefined ? String(SIGNALS[name]) : '';
}
