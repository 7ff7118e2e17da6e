/**
 * log-opts max-size / max-file for conmon's log file. conmon alone would start the file afresh at
 * its size limit, losing what was there; instead Berth renames the full file to `<log>.1` (shifting
 * older ones up to max-file) and asks conmon to reopen the log. conmon gets no size limit of its
 * own: its reopen at the limit would replace the live file and lose what Berth had not yet rotated.
 * A writer that cannot be asked to reopen (etcd, writing to an inherited O_APPEND descriptor) gets
 * its file copied to `<log>.1` and truncated instead: its next write lands at the new end.
 */
import { watch, type FSWatcher } from 'node:fs';
import { copyFile, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { log } from '../../lib/log.js';

export interface LogLimits {
  maxSize: number;
  maxFiles: number;
}

/** Parses `10m`, `512k`, `1g`, `100` (bytes). */
export function parseSize(v: string | undefined): number | undefined {
  const m = v ? /^(\d+(?:\.\d+)?)\s*([kmg]?)b?$/i.exec(v.trim()) : null;
  if (!m) return undefined;
  return Math.floor(Number(m[1]) * { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g']);
}

export function logLimits(opts: Record<string, string> | undefined, defaults: Record<string, string>): LogLimits | undefined {
  const maxSize = parseSize(opts?.['max-size'] ?? defaults['max-size']);
  if (!maxSize) return undefined;
  const maxFiles = Math.max(1, Number.parseInt(opts?.['max-file'] ?? defaults['max-file'] ?? '1', 10) || 1);
  return { maxSize, maxFiles };
}

/** The rotated files then the current one, oldest first (only those that exist are read). */
export function logFiles(path: string, maxFiles: number): string[] {
  const out: string[] = [];
  for (let i = maxFiles - 1; i >= 1; i--) out.push(`${path}.${i}`);
  out.push(path);
  return out;
}

export class LogRotator {
  #watcher: FSWatcher | undefined;
  #checking = false;
  #lastCheck = 0;
  #trailing: NodeJS.Timeout | undefined;

  constructor(
    private readonly path: string,
    private readonly limits: LogLimits,
    /** Makes conmon reopen the log path (the runtime driver's reopenLog); undefined: copy and truncate. */
    private readonly reopen: (() => Promise<void>) | undefined,
  ) {}

  start(): void {
    const name = basename(this.path);
    this.#watcher = watch(dirname(this.path), (_e, f) => {
      if (f?.toString() === name) void this.#check();
    });
    void this.#check();
  }

  stop(): void {
    this.#watcher?.close();
    this.#watcher = undefined;
    clearTimeout(this.#trailing);
    this.#trailing = undefined;
  }

  async #check(): Promise<void> {
    const now = Date.now();
    if (this.#checking || now - this.#lastCheck < 20) {
      // Not dropped: a burst that ends inside the pause would otherwise leave the file over its
      // limit until the writer's next write, which may never come.
      this.#trailing ??= setTimeout(() => {
        this.#trailing = undefined;
        void this.#check();
      }, 25);
      this.#trailing.unref();
      return;
    }
    this.#checking = true;
    this.#lastCheck = now;
    try {
      const st = await stat(this.path).catch(() => undefined);
      if (st && st.size >= this.limits.maxSize) await this.#rotate();
    } catch (err) {
      log.warn('log rotation failed', { path: this.path, err });
    } finally {
      this.#checking = false;
    }
  }

  async #rotate(): Promise<void> {
    const { maxFiles } = this.limits;
    if (!this.reopen) return this.#copyTruncate(maxFiles);
    if (maxFiles <= 1) {
      await rm(this.path, { force: true });
    } else {
      await this.#shift(maxFiles);
      await rename(this.path, `${this.path}.1`);
    }
    // conmon keeps writing to the renamed file until it reopens the path.
    try {
      await this.reopen();
    } finally {
      // A container that exited meanwhile never reopens: the live file must still exist, as
      // dockerd's does. Appending nothing creates it and never truncates what conmon wrote.
      await writeFile(this.path, '', { flag: 'a' });
    }
  }

  /** Lines written between the copy and the truncation are lost: the price of a writer that never reopens. */
  async #copyTruncate(maxFiles: number): Promise<void> {
    if (maxFiles > 1) {
      await this.#shift(maxFiles);
      await copyFile(this.path, `${this.path}.1`);
    }
    await truncate(this.path, 0);
  }

  /** `<log>.1` … move up one, the oldest goes: `<log>.1` is free. */
  async #shift(maxFiles: number): Promise<void> {
    await rm(`${this.path}.${maxFiles - 1}`, { force: true });
    for (let i = maxFiles - 2; i >= 1; i--) await rename(`${this.path}.${i}`, `${this.path}.${i + 1}`).catch(() => undefined);
  }
}
