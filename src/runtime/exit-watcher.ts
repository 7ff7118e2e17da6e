/**
 * Watches conmon's exit directory. conmon writes `<dir>/<container id>` holding the exit code as
 * decimal text (128+n after a signal n) when the container's main process has exited; the file's
 * mtime is the exit time. One inotify watch (fs.watch) covers every container, also those created
 * by an earlier berthd: nothing polls.
 */
import { lstatSync, watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

export interface ExitRecord {
  exitCode: number;
  exitedAt: Date;
}

/** Reads an exit file; undefined while it does not exist (or is still empty). */
export async function readExitFile(path: string): Promise<ExitRecord | undefined> {
  // Usually asked right after a start, when there is none: an lstat, not two failing reads.
  if (!lstatSync(path, { throwIfNoEntry: false })) return undefined;
  let text: string;
  let mtime: Date;
  try {
    [text, mtime] = await Promise.all([readFile(path, 'utf8'), stat(path).then((s) => s.mtime)]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const t = text.trim();
  if (!/^-?\d+$/.test(t)) return undefined;
  return { exitCode: Number(t), exitedAt: mtime };
}

interface Waiter {
  resolve: (r: ExitRecord) => void;
  reject: (err: unknown) => void;
}

export class ExitWatcher {
  readonly dir: string;
  #watcher: FSWatcher | undefined;
  #waiters = new Map<string, Waiter[]>();

  constructor(dir: string) {
    this.dir = dir;
  }

  /** Starts the watch; the directory must exist. */
  start(): void {
    if (this.#watcher) return;
    this.#watcher = watch(this.dir, { persistent: true }, (_event, filename) => {
      if (filename) this.#check(filename.toString());
      else for (const id of this.#waiters.keys()) this.#check(id); // name unknown: check everyone
    });
    this.#watcher.on('error', (err) => {
      for (const list of this.#waiters.values()) for (const w of list) w.reject(err);
      this.#waiters.clear();
    });
    this.#watcher.unref();
  }

  close(): void {
    this.#watcher?.close();
    this.#watcher = undefined;
  }

  pathOf(id: string): string {
    return join(this.dir, id);
  }

  read(id: string): Promise<ExitRecord | undefined> {
    return readExitFile(this.pathOf(id));
  }

  /**
   * Resolves when the exit file for `id` appears. The waiter is registered before the first read,
   * so an exit between the two cannot be missed.
   */
  wait(id: string): Promise<ExitRecord> {
    if (!this.#watcher) throw new Error('ExitWatcher not started');
    return new Promise<ExitRecord>((resolve, reject) => {
      const list = this.#waiters.get(id) ?? [];
      list.push({ resolve, reject });
      this.#waiters.set(id, list);
      this.#watcher?.ref(); // keep the process alive while someone waits
      this.#check(id);
    });
  }

  /** Settles every waiter of `id` with a result found some other way (e.g. conmon is gone). */
  settle(id: string, record: ExitRecord): void {
    const list = this.#waiters.get(id);
    if (!list) return;
    this.#waiters.delete(id);
    this.#updateRef();
    for (const w of list) w.resolve(record);
  }

  #updateRef(): void {
    if (this.#waiters.size === 0) this.#watcher?.unref();
  }

  #check(id: string): void {
    if (!this.#waiters.has(id)) return;
    this.read(id).then(
      (rec) => {
        if (rec) this.settle(id, rec);
      },
      (err) => {
        const list = this.#waiters.get(id) ?? [];
        this.#waiters.delete(id);
        this.#updateRef();
        for (const w of list) w.reject(err);
      },
    );
  }
}
