/**
 * A few worker threads that pull layers whole (layer-pull-worker.ts): fetch, verify, decompress,
 * hash and unpack. Hashing, gunzip callbacks, tar parsing and the garbage of ~1 MiB buffers are
 * most of a pull's CPU; here the layers of a pull share the machine's cores instead of queueing
 * on the main thread. Workers start when a pull needs them and end after half a minute idle: each
 * holds a heap of its own (tens of MiB after a big pull), which an idle daemon should not keep.
 * They are unref'd, so they never keep the process alive; a job goes to the least busy one. A
 * worker that dies fails its jobs.
 */
import { Worker } from 'node:worker_threads';
import { BerthError } from '../../lib/errors.js';
import type { Digest } from '../../lib/digest.js';
import { releaseFreedMemory } from '../../lib/malloc-trim.js';
import type { Descriptor } from '../../lib/oci.js';
import type { LayerStoreOptions } from '../layer-store.js';
import type { PlannedRequest } from '../../registry/registry-client.js';
import type { FromWorker, ToWorker, WireError } from './layer-pull-worker.js';

export interface LayerJob {
  request: PlannedRequest;
  desc: Descriptor;
  chainId: Digest;
  diffId: Digest;
  store: { root: string; opts: LayerStoreOptions };
  /** The content store's root, where the worker keeps the compressed blob. */
  content?: string;
}

export interface LayerJobEvents {
  onBytes: (received: number) => void;
  onDownloaded: () => void;
}

interface Pending {
  events: LayerJobEvents;
  resolve: (r: { size: number } | 'fallback') => void;
  reject: (err: unknown) => void;
}

interface Slot {
  worker: Worker;
  jobs: Map<number, Pending>;
  idle?: NodeJS.Timeout;
}

/** How long an idle worker is kept for the next pull: starting three workers costs a pull 0.2–0.3 s, and pulls come in bursts (compose, CI). */
const IDLE_MS = 30_000;

export class LayerPullPool {
  readonly #max: number;
  readonly #slots: Slot[] = [];
  #nextJob = 1;

  constructor(max: number) {
    this.#max = max;
  }

  /**
   * Runs one layer job. Resolves with the unpacked size, or 'fallback' when the registry did not
   * answer 200 (nothing was written); rejects with the job's error. Settles only once the worker
   * is done with the job, so nothing is still writing when the caller cleans up.
   */
  run(job: LayerJob, events: LayerJobEvents, signal: AbortSignal): Promise<{ size: number } | 'fallback'> {
    const slot = this.#pick();
    const id = this.#nextJob++;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const r: unknown = signal.reason;
        slot.worker.postMessage({ type: 'abort', job: id, reason: r instanceof Error ? r.message : 'pull cancelled' } satisfies ToWorker);
      };
      const settle = () => signal.removeEventListener('abort', onAbort);
      slot.jobs.set(id, {
        events,
        resolve: (v) => (settle(), resolve(v)),
        reject: (e) => (settle(), reject(e)),
      });
      slot.worker.postMessage({ type: 'pull', job: id, ...job } satisfies ToWorker);
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  #pick(): Slot {
    const slot =
      this.#slots.find((s) => s.jobs.size === 0) ??
      (this.#slots.length < this.#max ? this.#spawn() : this.#slots.reduce((a, b) => (b.jobs.size < a.jobs.size ? b : a)));
    clearTimeout(slot.idle);
    slot.idle = undefined;
    return slot;
  }

  /** A job ended: a worker left with none ends after IDLE_MS unless a job comes first. */
  #jobEnded(slot: Slot): void {
    if (slot.jobs.size > 0) return;
    clearTimeout(slot.idle);
    slot.idle = setTimeout(() => {
      if (slot.jobs.size > 0) return;
      this.#remove(slot);
      // Once the last one is gone, what the workers' buffers took can go back to the system.
      void slot.worker.terminate().then(() => {
        if (this.#slots.length === 0) releaseFreedMemory();
      });
    }, IDLE_MS).unref();
  }

  #remove(slot: Slot): void {
    const i = this.#slots.indexOf(slot);
    if (i >= 0) this.#slots.splice(i, 1);
  }

  #spawn(): Slot {
    const worker = new Worker(new URL('./layer-pull-worker.js', import.meta.url));
    worker.unref();
    const slot: Slot = { worker, jobs: new Map() };
    this.#slots.push(slot);
    worker.on('message', (m: FromWorker) => {
      const p = slot.jobs.get(m.job);
      if (!p) return;
      switch (m.type) {
        case 'bytes':
          p.events.onBytes(m.received);
          break;
        case 'downloaded':
          p.events.onDownloaded();
          break;
        case 'done':
          slot.jobs.delete(m.job);
          p.resolve({ size: m.size });
          this.#jobEnded(slot);
          break;
        case 'fallback':
          slot.jobs.delete(m.job);
          p.resolve('fallback');
          this.#jobEnded(slot);
          break;
        case 'error':
          slot.jobs.delete(m.job);
          p.reject(fromWire(m.error));
          this.#jobEnded(slot);
          break;
      }
    });
    const fail = (err: unknown) => {
      clearTimeout(slot.idle);
      this.#remove(slot);
      const jobs = [...slot.jobs.values()];
      slot.jobs.clear();
      const reason = new BerthError('internal', `layer pull worker failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      for (const p of jobs) p.reject(reason);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`exited with code ${code}`)));
    return slot;
  }
}

function fromWire(e: WireError): Error {
  if (e.kind !== undefined) return new BerthError(e.kind, e.message);
  const err = new Error(e.message);
  err.name = e.name;
  return err;
}
