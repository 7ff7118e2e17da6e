/**
 * Reading conmon's k8s-file container logs, as a stream and in follow mode.
 *
 * Format, one record per line: `<RFC3339Nano time> <stdout|stderr> <P|F> <bytes>\n`, e.g.
 *   2026-11-22T01:57:19.005229612+00:00 stdout F hi
 * F = the bytes end a line of output (the newline itself is not stored); P = a partial line (no
 * newline followed in the output, e.g. a prompt, or a line longer than conmon's buffer). A tty
 * container's output is all "stdout", with the tty's \r\n line ends (\r kept before the newline).
 * conmon starts a new file (new inode, same name) when --log-size-max is reached.
 */
import { watch, type FSWatcher } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname } from 'node:path';

export type LogStream = 'stdout' | 'stderr';

export interface LogRecord {
  /** Millisecond precision; see timeNs for the full value. */
  time: Date;
  /** Nanoseconds since the Unix epoch. */
  timeNs: bigint;
  stream: LogStream;
  /** True for a P record: the output had no newline here. */
  partial: boolean;
  /** The bytes as written by the container, without the newline conmon stripped. */
  data: Buffer;
  /** `data` as UTF-8 text. */
  text: string;
}

/** Parses an RFC 3339 time with up to nanosecond fraction and a Z or ±hh:mm offset. */
export function parseRfc3339Nano(s: string): bigint | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(s);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, sec, frac = '', zone = 'Z'] = m;
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(sec));
  if (Number.isNaN(ms)) return undefined;
  let offsetMin = 0;
  if (zone !== 'Z') {
    const sign = zone.startsWith('-') ? -1 : 1;
    offsetMin = sign * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6)));
  }
  const ns = BigInt(frac.padEnd(9, '0'));
  return (BigInt(ms) - BigInt(offsetMin) * 60_000n) * 1_000_000n + ns;
}

/** The form of `docker logs -t`: UTC and always nine fractional digits, so the columns line up. */
export function formatLogTimestamp(ns: bigint): string {
  const base = new Date(Number(ns / 1_000_000n)).toISOString().slice(0, 19);
  return `${base}.${(ns % 1_000_000_000n).toString().padStart(9, '0')}Z`;
}

/**
 * A parsed record. The time and the text are decoded only when asked for: reading a large log
 * back mostly needs just the stream and the bytes.
 */
class ParsedRecord implements LogRecord {
  #timeNs: bigint | undefined;
  #text: string | undefined;
  constructor(
    private readonly rawTime: string,
    readonly stream: LogStream,
    readonly partial: boolean,
    readonly data: Buffer,
  ) {}
  get timeNs(): bigint {
    return (this.#timeNs ??= parseRfc3339Nano(this.rawTime) ?? 0n);
  }
  get time(): Date {
    return new Date(Number(this.timeNs / 1_000_000n));
  }
  get text(): string {
    return (this.#text ??= this.data.toString('utf8'));
  }
}

/** The shape of conmon's timestamp, checked cheaply; the full parse waits until the time is needed. */
const TIME_SHAPE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/;

/**
 * One log line (without its newline) → record; undefined for a malformed line. `data` is a view
 * into `line`: callers that reuse the line's buffer must copy it (readLogBatches never reuses).
 */
export function parseLogLine(line: Buffer): LogRecord | undefined {
  const sp1 = line.indexOf(0x20);
  if (sp1 < 0) return undefined;
  const sp2 = line.indexOf(0x20, sp1 + 1);
  if (sp2 < 0) return undefined;
  const stream = line.toString('latin1', sp1 + 1, sp2);
  if (stream !== 'stdout' && stream !== 'stderr') return undefined;
  const tag = line[sp2 + 1];
  if (tag !== 0x50 && tag !== 0x46) return undefined; // P, F
  // The tag may be followed by a space and the bytes, or end the line for empty output.
  const after = line[sp2 + 2];
  if (after !== undefined && after !== 0x20) return undefined;
  const rawTime = line.toString('latin1', 0, sp1);
  if (!TIME_SHAPE.test(rawTime)) return undefined;
  return new ParsedRecord(rawTime, stream, tag === 0x50, line.subarray(Math.min(line.length, sp2 + 3)));
}

export interface ReadLogOptions {
  /** Keep reading as the file grows, until `until` settles and everything written is read. */
  follow?: boolean;
  /** Follow mode ends once this settles (e.g. the container's exit) and the file is drained. */
  until?: Promise<unknown>;
  signal?: AbortSignal;
  /** Bytes per read. */
  chunkSize?: number;
  /**
   * readLogChunks' buffers, e.g. from a pool the consumer refills: asked for `chunkSize` bytes,
   * or more for a line longer than that. Default: a fresh buffer each time.
   */
  allocate?: (size: number) => Buffer;
}

/** A one-shot "something changed" signal re-armed after each wait. */
class ChangeSignal {
  #pending = false;
  #wake: (() => void) | undefined;
  notify(): void {
    this.#pending = true;
    this.#wake?.();
  }
  wait(): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      this.#wake = () => {
        this.#wake = undefined;
        this.#pending = false;
        resolve();
      };
    });
  }
}

/**
 * The file's records in order. Never holds more than one chunk plus one partial line in memory.
 * Without follow, ends at the current end of file; a missing file yields nothing.
 */
export async function* readLogRecords(path: string, opts: ReadLogOptions = {}): AsyncGenerator<LogRecord> {
  for await (const batch of readLogBatches(path, opts)) yield* batch;
}

/** Like readLogRecords, a read's worth of records at a time: one await per chunk, not per line. */
export async function* readLogBatches(path: string, opts: ReadLogOptions = {}): AsyncGenerator<LogRecord[]> {
  for await (const chunk of readLogChunks(path, opts)) {
    const batch: LogRecord[] = [];
    let start = 0;
    let nl: number;
    while ((nl = chunk.indexOf(0x0a, start)) >= 0) {
      const rec = parseLogLine(chunk.subarray(start, nl));
      start = nl + 1;
      if (rec) batch.push(rec);
    }
    if (batch.length) yield batch;
  }
}

/**
 * The file's bytes a read at a time, cut after the last newline of each read: every chunk holds
 * whole lines (the rest waits for the next read, copied aside). The chunk's memory is the
 * consumer's once handed out: the reader never touches it again, so it may be kept, rewritten
 * in place, or reused for a later read (see `allocate`). Follow, until, abort and rotation
 * behave as described for readLogRecords.
 */
export async function* readLogChunks(path: string, opts: ReadLogOptions = {}): AsyncGenerator<Buffer> {
  const chunkSize = opts.chunkSize ?? 64 * 1024;
  const allocate = opts.allocate ?? ((n: number) => Buffer.allocUnsafe(n));
  const changed = new ChangeSignal();
  let watcher: FSWatcher | undefined;
  let finished = false;
  const onAbort = () => changed.notify();
  if (opts.follow) {
    // Watch the directory: it reports both appends to the file and its replacement on rotation.
    const name = basename(path);
    watcher = watch(dirname(path), (_e, f) => {
      if (!f || f.toString() === name) changed.notify();
    });
    opts.until?.then(
      () => ((finished = true), changed.notify()),
      () => ((finished = true), changed.notify()),
    );
    opts.signal?.addEventListener('abort', onAbort);
  }
  let fh: FileHandle | undefined;
  try {
    let ino: number | undefined;
    let pos = 0;
    // The unfinished line after the last chunk.
    let carry: Buffer = Buffer.alloc(0);
    let spare: Buffer | undefined;
    const reopen = async (): Promise<boolean> => {
      try {
        const h = await open(path, 'r');
        await fh?.close();
        fh = h;
        ino = (await h.stat()).ino;
        pos = 0;
        carry = Buffer.alloc(0);
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw err;
      }
    };
    await reopen();
    for (;;) {
      if (opts.signal?.aborted) return;
      // Sampled before reading: the writer was done before this read, so the read drains it all.
      const wasFinished = finished;
      // Read everything there is now.
      while (fh) {
        // Room for at least the carried line's length again: a line longer than a chunk costs linear time, not quadratic.
        const size = Math.max(chunkSize, 2 * carry.length);
        const buf = spare && spare.length >= size ? spare : allocate(size);
        spare = undefined;
        carry.copy(buf, 0);
        const { bytesRead } = await fh.read(buf, carry.length, buf.length - carry.length, pos);
        if (bytesRead === 0) {
          // Kept for the next read: in follow mode, most reads end at the end of the file.
          spare = buf;
          break;
        }
        pos += bytesRead;
        const end = carry.length + bytesRead;
        const lastNl = buf.lastIndexOf(0x0a, end - 1);
        if (lastNl < 0) {
          carry = buf.subarray(0, end);
          continue;
        }
        carry = Buffer.from(buf.subarray(lastNl + 1, end));
        yield buf.subarray(0, lastNl + 1);
        if (opts.signal?.aborted) return;
      }
      if (!opts.follow) return;
      // At end of file: was the file replaced (rotation) or truncated?
      const now = await stat(path).catch(() => undefined);
      if (now && (now.ino !== ino || now.size < pos)) {
        await reopen();
        continue;
      }
      if (wasFinished) return;
      await changed.wait();
    }
  } finally {
    watcher?.close();
    opts.signal?.removeEventListener('abort', onAbort);
    await fh?.close();
  }
}
