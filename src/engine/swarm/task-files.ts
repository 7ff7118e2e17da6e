/**
 * The files a task's secrets and configs become: written per task on a tmpfs under the data root (so
 * secrets never reach a disk) with the reference's uid, gid and mode, and bind-mounted read-only into
 * the task container (secrets at /run/secrets/<name> unless the target is absolute, configs at their
 * target, relative to /). The tmpfs stays mounted across daemon restarts: running tasks use its files.
 */
import { chmod, chown, mkdir, rm, writeFile } from 'node:fs/promises';
import { isAbsolute, join, posix } from 'node:path';
import { invalidArgument } from '../../lib/errors.js';
import { mount, unmount } from '../../runtime/mount-syscall.js';
import { isMounted } from '../containers/rootfs-mount.js';
import type { MountSpec } from '../containers/container-model.js';
import { refId, refName, refsOf, type BlobKind } from './secrets.js';
import type { TaskRecord } from './swarm-model.js';

const DEFAULT_MODE = 0o444;

/** The data of the secrets or configs a task refers to, by kind and id. */
export type BlobData = (kind: BlobKind, id: string) => Buffer | undefined;

export class TaskFiles {
  #mounting: Promise<void> | undefined;

  constructor(
    private readonly root: string,
    /** The task's secrets and configs: this node's own, or (a worker) opened by a manager. */
    private readonly dataOf: (t: TaskRecord) => Promise<BlobData>,
  ) {}

  /** Writes the task's files and returns the mounts that put them in its container. */
  async write(t: TaskRecord): Promise<MountSpec[]> {
    const spec = { TaskTemplate: t.spec };
    const mounts: MountSpec[] = [];
    const dir = this.#dir(t.id);
    if (refsOf(spec, 'secret').length + refsOf(spec, 'config').length === 0) return mounts;
    await this.#tmpfs();
    const blobs = await this.dataOf(t);
    for (const kind of ['secret', 'config'] as const) {
      for (const [n, ref] of refsOf(spec, kind).entries()) {
        if (!ref.File?.Name) continue; // runtime targets (credential specs) are no files
        const id = refId(ref, kind) ?? '';
        const data = blobs(kind, id);
        if (!data) throw invalidArgument(`${kind} ${refName(ref, kind)} not found`);
        const uid = ownerId(ref.File.UID);
        const gid = ownerId(ref.File.GID);
        await mkdir(join(dir, kind), { recursive: true, mode: 0o700 });
        // One file per reference: two references to one secret may differ in owner and mode.
        const source = join(dir, kind, String(n));
        await writeFile(source, data, { mode: 0o600 });
        await chown(source, uid, gid);
        // chmod after chown: chown clears set-id bits.
        await chmod(source, (ref.File.Mode ?? DEFAULT_MODE) & 0o7777);
        const name = ref.File.Name;
        const target = isAbsolute(name) ? posix.normalize(name) : kind === 'secret' ? posix.join('/run/secrets', name) : posix.join('/', name);
        mounts.push({ Type: 'bind', Source: source, Target: target, ReadOnly: true });
      }
    }
    return mounts;
  }

  async remove(taskId: string): Promise<void> {
    await rm(this.#dir(taskId), { recursive: true, force: true });
  }

  /** Leaving the swarm: every task's files go, and the tmpfs with them. */
  async clear(): Promise<void> {
    this.#mounting = undefined;
    if (await isMounted(this.root)) await unmount(this.root).catch(() => unmount(this.root, { lazy: true }));
    await rm(this.root, { recursive: true, force: true });
  }

  /** Mounts the tmpfs once; concurrent preparations share the one attempt (a second mount would hide the first's files). */
  #tmpfs(): Promise<void> {
    this.#mounting ??= (async () => {
      await mkdir(this.root, { recursive: true, mode: 0o700 });
      if (!(await isMounted(this.root))) await mount('tmpfs', this.root, 'tmpfs', 'mode=0700');
    })().catch((err: unknown) => {
      this.#mounting = undefined;
      throw err;
    });
    return this.#mounting;
  }

  #dir(taskId: string): string {
    if (!/^[a-z0-9]+$/.test(taskId)) throw invalidArgument(`invalid task id ${taskId}`);
    return join(this.root, taskId);
  }
}

function ownerId(v: string | undefined): number {
  if (v === undefined || v === '') return 0;
  if (!/^\d+$/.test(v)) throw invalidArgument(`invalid uid or gid ${JSON.stringify(v)}`);
  return Number(v);
}
