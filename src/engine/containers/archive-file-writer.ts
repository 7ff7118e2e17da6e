/**
 * The small files of a `docker cp` into a container, written by a worker thread
 * (archive-file-worker.ts) in batches: creating a file costs the main thread tens to hundreds of
 * microseconds in the file system, a tree of 16 KiB files as much as parsing the request, and
 * the two can run side by side. A file's data is copied into the batch's buffer (so the request's
 * chunks die young), a batch goes out at BATCH bytes or MAX_FILES files, and at most IN_FLIGHT
 * batches are out at once: memory stays bounded, the archive is never held whole.
 *
 * One worker serves the whole process: started on first use, unref'd, ended after IDLE_MS idle. A
 * worker that dies fails the batches it held.
 */
import { Worker } from 'node:worker_threads';
import type { BatchIn, BatchOut, FileJob } from './archive-file-worker.js';

export type { FileJob };

/** Data bytes in one batch; also the largest file a batch takes. */
export const BATCH = 1024 * 1024;
const MAX_FILES = 256;
const IN_FLIGHT = 2;
const IDLE_MS = 30_000;
/**
 * The first files of a copy are left to the caller while the thread starts (~25–35 ms): a copy of
 * a handful of files never waits for it.
 */
const START_AFTER = 32;
/** Batch buffers kept for reuse (they come back from the worker). */
const FREE_MAX = 4;

interface Waiter {
  resolve: (out: BatchOut) => void;
  reject: (err: unknown) => void;
}

class SharedWorker {
  #worker: Worker | undefined;
  readonly #waiting = new Map<number, Waiter>();
  #next = 1;
  #idle: NodeJS.Timeout | undefined;
  readonly free: ArrayBuffer[] = [];

  /** Starts the thread if it is not running (it ends again after IDLE_MS unused). */
  warm(): void {
    if (this.#worker) return;
    this.#worker = this.#spawn();
    this.#armIdle(this.#worker);
  }

  run(jobs: FileJob[], data: ArrayBuffer): Promise<BatchOut> {
    const worker = (this.#worker ??= this.#spawn());
    clearTimeout(this.#idle);
    const id = this.#next++;
    return new Promise<BatchOut>((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      const m: BatchIn = { id, jobs, data };
      worker.postMessage(m, [data]);
    });
  }

  #spawn(): Worker {
    const worker = new Worker(new URL('./archive-file-worker.js', import.meta.url));
    worker.unref();
    worker.on('message', (m: BatchOut) => {
      const w = this.#waiting.get(m.id);
      this.#waiting.delete(m.id);
      w?.resolve(m);
      if (this.#waiting.size === 0) this.#armIdle(worker);
    });
    const fail = (err: unknown) => {
      if (this.#worker !== worker) return;
      this.#worker = undefined;
      const waiting = [...this.#waiting.values()];
      this.#waiting.clear();
      for (const w of waiting) w.reject(err);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the file writer thread exited (${code})`)));
    return worker;
  }

  #armIdle(worker: Worker): void {
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => {
      if (this.#waiting.size > 0 || this.#worker !== worker) return;
      this.#worker = undefined;
      void worker.terminate();
    }, IDLE_MS).unref();
  }
}

const shared = new SharedWorker();

/**
 * The batches of one extraction. Files go in with add(); flush() waits until everything added is
 * written (and throws the first failure); settle() waits without throwing, for clean-up: the
 * directory descriptors the jobs name must stay open until then.
 */
export class SmallFileWriter {
  #buf: Buffer | undefined;
  #len = 0;
  #jobs: (FileJob & { cpath: string })[] = [];
  readonly #out: Promise<void>[] = [];
  #failure: Error | undefined;
  #offered = 0;

  /** Whether the writer takes the next file the caller could give it (see START_AFTER). */
  wants(): boolean {
    if (++this.#offered === 1) shared.warm();
    return this.#offered > START_AFTER;
  }

  /** Adds a file of `size` bytes (at most BATCH) whose data `data` yields. */
  async add(job: Omit<FileJob, 'offset' | 'length'> & { cpath: string }, size: number, data: AsyncIterable<Buffer>): Promise<void> {
    if (this.#failure) throw this.#failure;
    if (this.#len + size > BATCH || this.#jobs.length >= MAX_FILES) await this.#send();
    const buf = (this.#buf ??= Buffer.from(shared.free.pop() ?? new ArrayBuffer(BATCH)));
    const offset = this.#len;
    let end = offset;
    for await (const chunk of data) {
      if (end + chunk.length > offset + size) throw new Error(`${job.cpath}: more data than its header's size`);
      end += chunk.copy(buf, end);
    }
    this.#jobs.push({ ...job, offset, length: end - offset });
    this.#len = end;
  }

  /** Everything added is on disk; the first failure is thrown. */
  async flush(): Promise<void> {
    await this.#send();
    while (this.#out.length > 0) await this.#out.shift();
    if (this.#failure) throw this.#failure;
  }

  /** Nothing of this extraction is still being written (failures are dropped). */
  async settle(): Promise<void> {
    this.#jobs = [];
    this.#len = 0;
    while (this.#out.length > 0) await this.#out.shift()!.catch(() => undefined);
  }

  async #send(): Promise<void> {
    if (this.#jobs.length === 0) return;
    while (this.#out.length >= IN_FLIGHT) await this.#out.shift();
    if (this.#failure) throw this.#failure;
    const jobs = this.#jobs;
    const data = this.#buf!.buffer as ArrayBuffer;
    this.#jobs = [];
    this.#buf = undefined;
    this.#len = 0;
    const done = shared.run(
      jobs.map(({ cpath: _, ...j }) => j),
      data,
    ).then(
      (r) => {
        if (shared.free.length < FREE_MAX) shared.free.push(r.data);
        if (r.error && !this.#failure) {
          const at = r.error.index === undefined ? undefined : jobs[r.error.index];
          this.#failure = Object.assign(new Error(`${at?.cpath ?? 'a file'}: ${r.error.message}`), { code: r.error.code });
        }
      },
      (err: unknown) => {
        this.#failure ??= err instanceof Error ? err : new Error(String(err));
      },
    );
    this.#out.push(done);
  }
}
