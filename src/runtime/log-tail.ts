/**
 * The last lines of a k8s-file log, read backwards from the end of its newest file: `docker logs
 * --tail 10` on a large log costs a read or two instead of a pass over every file.
 *
 * `--tail` counts lines of output, not conmon's records: a line conmon wrote as P records before
 * its F record (a long line, or a write cut by a pipe read) counts once and comes out whole, even
 * when a rotation put its beginning in the older file.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { parseLogLine, type LogRecord, type LogStream } from './log-file.js';

export interface TailOptions {
  signal?: AbortSignal;
  /** Bytes per read (tests use small ones). */
  chunkSize?: number;
}

/**
 * Once `count` lines are found, how far further back (bytes of records) the beginnings of the
 * oldest ones are looked for. A line's P records normally sit right before its end; one whose
 * beginning lies further back than this, past other output, is shown from where the search stopped.
 */
const CONTINUATION_BYTES = 1024 * 1024;

/**
 * The records of the last `count` lines that `keep` accepts, oldest first, across `files` (oldest
 * file first, as logFiles gives them; missing ones have none). Lines are told apart per stream: a
 * P record belongs to the next record of its own stream. A trailing run of P records (a prompt, a
 * line still being written) is a line. The records are views into the chunks read.
 */
export async function readLastLines(files: string[], count: number, keep: (rec: LogRecord) => boolean, opts: TailOptions = {}): Promise<LogRecord[]> {
  if (count <= 0) return [];
  const newestFirst: LogRecord[] = [];
  let lines = 0;
  // Per stream, whether the oldest record taken so far may still have P records before it that belong to its line.
  const open = new Map<LogStream, boolean>();
  let searched = 0;
  outer: for (const file of [...files].reverse()) {
    for await (const rec of recordsBackwards(file, opts)) {
      if (!keep(rec)) continue;
      const continues = rec.partial && open.get(rec.stream) === true;
      if (lines >= count) {
        searched += rec.data.length + 1;
        if (continues) newestFirst.push(rec);
        else open.set(rec.stream, false);
        if (!(open.get('stdout') || open.get('stderr')) || searched > CONTINUATION_BYTES) break outer;
        continue;
      }
      if (!continues) lines++;
      newestFirst.push(rec);
      // Whatever was taken, a P record of this stream before it belongs to the same line.
      open.set(rec.stream, true);
    }
    if (opts.signal?.aborted) break;
  }
  return newestFirst.reverse();
}

/**
 * A file's records, newest first. Bytes after the last newline (a line still being written) are
 * no record, as in readLogRecords; unparsable lines are skipped; a missing file has none.
 */
async function* recordsBackwards(path: string, opts: TailOptions): AsyncGenerator<LogRecord> {
  const chunkSize = opts.chunkSize ?? 256 * 1024;
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  try {
    let end = (await fh.stat()).size;
    // The line cut by the last read's start: its end (with its newline), waiting for its beginning.
    let head: Buffer = Buffer.alloc(0);
    while (end > 0) {
      if (opts.signal?.aborted) return;
      const start = Math.max(0, end - chunkSize);
      const buf = await readAt(fh, start, end - start);
      end = start;
      const data = head.length ? Buffer.concat([buf, head]) : buf;
      // The first line may have begun in an earlier chunk: it waits for that one.
      const from = start === 0 ? 0 : data.indexOf(0x0a) + 1;
      if (from === 0 && start > 0) {
        head = data;
        continue;
      }
      head = data.subarray(0, from);
      // Lines end at a newline: bytes after the file's last one are in none.
      const ends: number[] = [];
      for (let nl = data.indexOf(0x0a, from); nl >= 0; nl = data.indexOf(0x0a, nl + 1)) ends.push(nl);
      for (let i = ends.length - 1; i >= 0; i--) {
        const rec = parseLogLine(data.subarray(i === 0 ? from : ends[i - 1]! + 1, ends[i]));
        if (rec) yield rec;
      }
    }
  } finally {
    await fh.close();
  }
}

/** Exactly `length` bytes at `position` (fewer only if the file shrank meanwhile). */
async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(buf, got, length - got, position + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return buf.subarray(0, got);
}
