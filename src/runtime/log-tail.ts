/**
 * The last records of a k8s-file log, read backwards from its end: `docker logs --tail 10` on a
 * large log costs a read or two instead of a pass over the whole file.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { parseLogLine, type LogRecord } from './log-file.js';

export interface TailOptions {
  signal?: AbortSignal;
  /** Bytes per read (tests use small ones). */
  chunkSize?: number;
}

/**
 * The last `count` records that `keep` accepts, oldest first: the records readLogRecords would
 * give, filtered, then the last `count` of them. Bytes after the last newline (a line still being
 * written) are no record, as there. A missing file has none. The records are views into the
 * chunks read, so a long tail holds its chunks.
 */
export async function readLastRecords(path: string, count: number, keep: (rec: LogRecord) => boolean, opts: TailOptions = {}): Promise<LogRecord[]> {
  if (count <= 0) return [];
  const chunkSize = opts.chunkSize ?? 256 * 1024;
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  try {
    const newestFirst: LogRecord[] = [];
    let end = (await fh.stat()).size;
    // The line cut by the last read's start: its end (with its newline), waiting for its beginning.
    let head: Buffer = Buffer.alloc(0);
    while (end > 0 && newestFirst.length < count) {
      if (opts.signal?.aborted) break;
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
      for (let i = ends.length - 1; i >= 0 && newestFirst.length < count; i--) {
        const rec = parseLogLine(data.subarray(i === 0 ? from : ends[i - 1]! + 1, ends[i]));
        if (rec && keep(rec)) newestFirst.push(rec);
      }
    }
    return newestFirst.reverse();
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
