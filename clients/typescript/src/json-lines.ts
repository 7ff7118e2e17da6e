/**
 * Reads a stream of JSON records (pull progress, events) one record at a time, as bytes arrive.
 * Records are separated by newlines (dockerd writes "\r\n"); blank lines are skipped.
 */
import type { Readable } from 'node:stream';

/** A single record larger than this is treated as a broken stream rather than buffered forever. */
const MAX_RECORD_BYTES = 16 * 1024 * 1024;

export async function* readJsonLines<T>(body: Readable): AsyncGenerator<T, void, undefined> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const chunk of body as AsyncIterable<Buffer>) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    let start = 0;
    for (let nl = pending.indexOf(0x0a, start); nl !== -1; nl = pending.indexOf(0x0a, start)) {
      const line = pending.subarray(start, nl).toString('utf8').trim();
      start = nl + 1;
      if (line) yield JSON.parse(line) as T;
    }
    pending = pending.subarray(start);
    if (pending.length > MAX_RECORD_BYTES) throw new Error(`JSON record larger than ${MAX_RECORD_BYTES} bytes in stream`);
  }
  const last = pending.toString('utf8').trim();
  if (last) yield JSON.parse(last) as T;
}
