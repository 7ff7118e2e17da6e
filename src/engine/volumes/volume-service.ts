/**
 * The volumes aggregate's facade: owns the volume records, the mount reference counts and the
 * volume events; the local driver only makes and mounts directories. Containers reach volumes only
 * through here (mount points resolved at create, mounted at start, released at exit and removal).
 */
import { readdir } from 'node:fs/promises';
import { randomHex } from '../../lib/random-hex.js';
import { conflict, invalidArgument, notFound } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { WorkGate } from '../../lib/work-gate.js';
import type { VolumeRecords } from '../../state/volume-records.js';
import type { EventBus } from '../events.js';
import type { LocalDriver } from './local-driver.js';
import { ANONYMOUS_LABEL, isAnonymous, type MountPointRecord, type VolumeRecord } from './volume-model.js';
import { resolveMountPoints, type MountRequest } from './mount-points.js';
import { copyUp } from './copy-up.js';
import { repairVolumeRow } from './volume-record-repair.js';

export interface VolumeCreateRequest {
  name?: string;
  driver?: string;
  driverOpts?: Record<string, string>;
  labels?: Record<string, string>;
}

/** A container as the volume service sees it. */
export interface VolumeUser {
  id: string;
  mountPoints?: MountPointRecord[];
}

export interface VolumeServiceDeps {
  records: VolumeRecords;
  driver: LocalDriver;
  events: EventBus;
  /** Ids of the containers (any state) whose mount points name the volume. */
  users: (name: string) => string[];
}

const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;

export class VolumeService {
  readonly #volumes = new Map<string, VolumeRecord>();
  /** Containers that have a volume mounted now (started and not yet released), by volume. */
  readonly #active = new Map<string, Set<string>>();
  /** A queue per volume with mounts or unmounts under way or waiting (#serially); idle ones go. */
  readonly #queues = new Map<string, WorkGate>();
  readonly #deps: VolumeServiceDeps;

  constructor(deps: VolumeServiceDeps) {
    this.#deps = deps;
    for (const row of deps.records.loadAll()) {
      const { volume, problem } = repairVolumeRow(row);
      if (problem) log.warn('a stored volume record was damaged; read what could be', { volume: row.name, problem });
      this.#volumes.set(volume.name, volume);
    }
  }

  list(): VolumeRecord[] {
    return [...this.#volumes.values()];
  }

  get(name: string): VolumeRecord {
    const v = this.#volumes.get(name);
    if (!v) throw notFound(`get ${name}: no such volume`);
    return v;
  }

  mountpoint(v: VolumeRecord): string {
    return this.#deps.driver.dataPath(v.name);
  }

  usedBy(name: string): string[] {
    return this.#deps.users(name);
  }

  size(v: VolumeRecord): Promise<number> {
    return this.#deps.driver.size(v.name);
  }

  /** Creates a volume, or returns the one of that name (dockerd: creating an existing name returns it). */
  create(req: VolumeCreateRequest): VolumeRecord {
    const driver = req.driver || 'local';
    let labels = req.labels ? { ...req.labels } : null;
    let name = req.name ?? '';
    if (!name) {
      name = randomHex(32);
      labels = { ...labels, [ANONYMOUS_LABEL]: '' };
    }
    if (driver !== 'local') throw notFound(`create ${name}: error looking up volume plugin ${driver}: plugin "${driver}" not found`);
    const existing = this.#volumes.get(name);
    if (existing) return existing;
    if (name.length === 1) throw invalidArgument(`create ${name}: volume name is too short, names should be at least two alphanumeric characters`);
    if (!NAME_RE.test(name)) {
      throw invalidArgument(`create ${name}: ${JSON.stringify(name)} includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to pass a host directory, use absolute path`);
    }
    const options = req.driverOpts ? { ...req.driverOpts } : null;
    try {
      this.#deps.driver.validateOptions(options ?? {});
    } catch (err) {
      throw invalidArgument(`create ${name}: ${(err as Error).message}`);
    }
    const v: VolumeRecord = { name, driver: 'local', createdAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), labels, options };
    this.#deps.driver.create(name);
    this.#deps.records.save({ name, createdAt: Date.now(), data: v });
    this.#volumes.set(name, v);
    this.#deps.events.publish('volume', 'create', name, { driver: v.driver });
    return v;
  }

  /** DELETE /volumes/{name}: 409 while a container refers to it (also with force, as dockerd). */
  async remove(name: string, opts: { force?: boolean } = {}): Promise<void> {
    const v = this.#volumes.get(name);
    if (!v) {
      if (opts.force) return;
      throw notFound(`get ${name}: no such volume`);
    }
    const users = this.#deps.users(name);
    if (users.length) throw conflict(`remove ${name}: volume is in use - [${users.join(', ')}]`);
    await this.#destroy(v);
  }

  async #destroy(v: VolumeRecord): Promise<void> {
    await this.#deps.driver.remove(v.name, v.options ?? {});
    this.#deps.records.delete(v.name);
    this.#volumes.delete(v.name);
    this.#active.delete(v.name);
    this.#deps.events.publish('volume', 'destroy', v.name, { driver: v.driver });
  }

  /** Removes the unused volumes `match` accepts; their sizes are the space reclaimed. */
  async prune(match: (v: VolumeRecord) => boolean): Promise<{ deleted: string[]; reclaimed: number }> {
    const deleted: string[] = [];
    let reclaimed = 0;
    for (const v of this.list()) {
      if (!match(v) || this.#deps.users(v.name).length) continue;
      const size = await this.size(v).catch(() => 0);
      try {
        await this.#destroy(v);
        deleted.push(v.name);
        reclaimed += size;
      } catch (err) {
        log.warn('volume prune: removal failed', { name: v.name, err });
      }
    }
    this.#deps.events.publish('volume', 'prune', '', { reclaimed: String(reclaimed) });
    return { deleted, reclaimed };
  }

  /**
   * A container's mount points from its create request (binds, Mounts, VolumesFrom, the image's
   * VOLUMEs), creating the volumes they name. Throws before creating anything for a bad spec.
   */
  resolveMounts(req: MountRequest): MountPointRecord[] {
    const resolved = resolveMountPoints(req);
    const created: VolumeRecord[] = [];
    try {
      for (const mp of resolved) {
        if (mp.Type !== 'volume' || mp.Source) continue;
        const had = mp.Name ? this.#volumes.has(mp.Name) : false;
        const v = this.create({ name: mp.Name, driver: mp.Driver || 'local', driverOpts: mp.volumeOptions?.driverOpts, labels: mp.volumeOptions?.labels });
        if (!had) created.push(v);
        mp.Name = v.name;
        mp.Driver = v.driver;
        mp.Source = this.mountpoint(v);
      }
    } catch (err) {
      for (const v of created) void this.#destroy(v).catch(() => undefined);
      throw err;
    }
    return resolved.map(({ volumeOptions: _, ...mp }) => mp);
  }

  /**
   * Before a container's process starts: mounts what volume options ask for (first user only) and
   * copies the image's content into empty volumes marked CopyData, turning CopyData off on the mount
   * point (the caller saves the record).
   */
  async mountFor(c: VolumeUser, rootfs: string): Promise<void> {
    for (const mp of c.mountPoints ?? []) {
      if (mp.Type !== 'volume') continue;
      const v = this.#volumes.get(mp.Name);
      if (!v) throw notFound(`get ${mp.Name}: no such volume`);
      await this.#serially(v.name, async () => {
        const users = this.#active.get(v.name) ?? new Set<string>();
        if (users.size === 0) {
          // The data dir is made again if something removed it behind our back (a crash mid-removal).
          this.#deps.driver.create(v.name);
          await this.#deps.driver.mount(v.name, v.options ?? {});
        }
        users.add(c.id);
        this.#active.set(v.name, users);
        if (mp.CopyData) {
          if (!mp.Subpath && (await isEmptyDir(mp.Source))) await copyUp(rootfs, mp.Destination, mp.Source);
          mp.CopyData = false;
        }
      });
      this.#deps.events.publish('volume', 'mount', v.name, { container: c.id, destination: mp.Destination, driver: v.driver, propagation: mp.Propagation, 'read/write': String(mp.RW) });
    }
  }

  /** After a container's process ended: the last user of a volume with options unmounts it. */
  async unmountFor(c: VolumeUser): Promise<void> {
    for (const mp of c.mountPoints ?? []) {
      if (mp.Type !== 'volume') continue;
      await this.#serially(mp.Name, async () => {
        const users = this.#active.get(mp.Name);
        if (!users?.delete(c.id)) return;
        const v = this.#volumes.get(mp.Name);
        if (!v) return;
        this.#deps.events.publish('volume', 'unmount', v.name, { container: c.id, driver: v.driver });
        if (users.size === 0) await this.#deps.driver.unmount(v.name, v.options ?? {}).catch((err) => log.warn('volume unmount failed', { name: v.name, err }));
      });
    }
  }

  /**
   * Mounts, unmounts and copy-ups of one volume run one after another: a start must not find a
   * volume half unmounted by the previous user's exit, nor two starts mount (or fill) it twice.
   */
  #serially(name: string, fn: () => Promise<void>): Promise<void> {
    const queue = this.#queues.get(name) ?? new WorkGate(1);
    this.#queues.set(name, queue);
    return queue.run(fn).finally(() => {
      const { running, waiting } = queue.load;
      if (running === 0 && waiting === 0 && this.#queues.get(name) === queue) this.#queues.delete(name);
    });
  }

  /** After a daemon restart: containers still running hold their volumes' mounts; others are released. */
  async adopt(running: VolumeUser[]): Promise<void> {
    for (const c of running) {
      for (const mp of c.mountPoints ?? []) {
        if (mp.Type !== 'volume') continue;
        const users = this.#active.get(mp.Name) ?? new Set<string>();
        users.add(c.id);
        this.#active.set(mp.Name, users);
      }
    }
    for (const v of this.#volumes.values()) {
      if (!this.#active.get(v.name)?.size) await this.#deps.driver.unmount(v.name, v.options ?? {}).catch(() => undefined);
    }
  }

  /**
   * A container is gone: with `anonymous`, its anonymous volumes no other container uses go too
   * (`rm -v`, auto-remove). Named volumes are never removed here.
   */
  async containerRemoved(c: VolumeUser, opts: { anonymous: boolean }): Promise<void> {
    await this.unmountFor(c);
    if (!opts.anonymous) return;
    for (const mp of c.mountPoints ?? []) {
      if (mp.Type !== 'volume') continue;
      const v = this.#volumes.get(mp.Name);
      if (!v || !isAnonymous(v)) continue;
      if (this.#deps.users(v.name).some((id) => id !== c.id)) continue;
      await this.#destroy(v).catch((err) => log.warn('removing an anonymous volume failed', { name: v.name, err }));
    }
  }
}

async function isEmptyDir(dir: string): Promise<boolean> {
  const entries = await readdir(dir).catch(() => ['?']);
  return entries.length === 0;
}
