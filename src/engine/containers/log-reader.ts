/**
 * Reading a container's log: conmon's k8s-file log and the files rotation left beside it (rotated
 * files oldest first, then the live one). Routes frame and write what this yields; which files to
 * read, in what order, and the buffers they are read into are decided here.
 */
import { readLogBatches, readLogChunks, readLogRecords, formatLogTimestamp, type LogRecord } from '../../runtime/log-file.js';
import { readLastLines } from '../../runtime/log-tail.js';
import { logFiles } from './log-rotation.js';

export { formatLogTimestamp, type LogRecord };

export interface LogReadOptions {
  /** Keep reading the live file as it grows, until `until` settles. */
  follow: boolean;
  until?: Promise<unknown>;
  signal: AbortSignal;
}

/** Bytes per read when whole chunks are rewritten into the response: fewer, larger writes. */
const FAST_CHUNK = 1024 * 1024;

/**
 * Chunk buffers given back once the socket has taken them. A fresh 1 MiB buffer per read would
 * make a 200 MB log 200 allocations of external memory, each pushing V8 towards a full GC.
 */
class ChunkPool {
  readonly #free: ArrayBuffer[] = [];
  allocate = (size: number): Buffer => {
    const ab = size === FAST_CHUNK ? this.#free.pop() : undefined;
    return ab ? Buffer.from(ab) : Buffer.allocUnsafeSlow(size);
  };
  /** `b` is any view of a buffer from allocate(), no longer in use. */
  release(b: Buffer): void {
    if (b.buffer.byteLength === FAST_CHUNK && this.#free.length < 4) this.#free.push(b.buffer as ArrayBuffer);
  }
}

/** One reader per request: it holds the pool its chunks come from. */
export class ContainerLogReader {
  #pool: ChunkPool | undefined;

  constructor(
    /** The live file (conmon's). */
    readonly path: string,
    /** log-opts max-file: how many files rotation keeps, the live one included. */
    readonly maxFiles: number,
  ) {}

  /** Every file's records, a read's worth at a time. */
  async *batches(opts: LogReadOptions): AsyncGenerator<LogRecord[]> {
    const files = logFiles(this.path, this.maxFiles);
    for (const f of files.slice(0, -1)) yield* readLogBatches(f, { signal: opts.signal });
    yield* readLogBatches(this.path, opts);
  }

  /**
   * Every file as raw chunks of whole lines (for api/log-frames.ts to rewrite in place). Each chunk
   * is the caller's until it hands it (or any view of it) back with release().
   */
  async *chunks(opts: LogReadOptions): AsyncGenerator<Buffer> {
    const pool = (this.#pool ??= new ChunkPool());
    const files = logFiles(this.path, this.maxFiles);
    for (const f of files.slice(0, -1)) yield* readLogChunks(f, { signal: opts.signal, chunkSize: FAST_CHUNK, allocate: pool.allocate });
    yield* readLogChunks(this.path, { ...opts, chunkSize: FAST_CHUNK, allocate: pool.allocate });
  }

  release(b: Buffer): void {
    this.#pool?.release(b);
  }

  /** The records of the last `count` lines `keep` accepts, read backwards from the newest file. */
  lastLines(count: number, keep: (rec: LogRecord) => boolean, signal: AbortSignal): Promise<LogRecord[]> {
    return readLastLines(logFiles(this.path, this.maxFiles), count, keep, { signal });
  }

  /** The live file's records a read's worth at a time (after a tail: what follows it). */
  liveBatches(opts: LogReadOptions): AsyncGenerator<LogRecord[]> {
    return readLogBatches(this.path, opts);
  }

  /** The live file's records one by one. */
  liveRecords(opts: LogReadOptions | { signal: AbortSignal }): AsyncGenerator<LogRecord> {
    return readLogRecords(this.path, opts);
  }
}
