/**
 * The common `docker logs` read (no since, until, timestamps or tail) without an object per
 * record: a chunk of k8s-file lines (format in runtime/log-file.ts) is rewritten in place into the
 * bytes of the response. Each record's prefix is dropped and its payload moved down, with the
 * newline kept for an F record. Without a TTY, each run of records of one stream becomes one
 * stdcopy frame, its 8-byte header written where the run's first prefix was.
 *
 * Writing never overtakes reading: a valid prefix is at least 28 bytes, more than a header, so the
 * output so far always ends before the record being read. A malformed line is skipped, exactly the
 * lines parseLogLine rejects (the test checks both agree).
 */
import { StreamType } from './stdcopy.js';

export interface FrameOptions {
  stdout: boolean;
  stderr: boolean;
  /** Stdcopy frames (a container without a TTY); false gives the raw bytes. */
  framed: boolean;
}

/** Shortest valid line: 19 bytes of time, ` stdout F`. */
const MIN_LINE = 28;

/**
 * Rewrites `chunk` (whole lines, each ending in a newline; anything after the last newline is
 * ignored) in place; returns the view of it that holds the output, possibly empty. The bytes
 * after that view are left as garbage.
 */
export function frameLogChunk(chunk: Buffer, opts: FrameOptions): Buffer {
  let w = 0;
  let frameStart = -1;
  let frameType = 0;
  let start = 0;
  let nl: number;
  while ((nl = chunk.indexOf(0x0a, start)) >= 0) {
    const next = nl + 1;
    const sp1 = nl - start >= MIN_LINE && timeShaped(chunk, start) ? prefixEnd(chunk, start + 19, nl) : -1;
    if (sp1 < 0) {
      start = next;
      continue;
    }
    // prefixEnd checked the layout: `<time> std(out|err) <P|F>`, then a space or the line's end.
    const stream = chunk[sp1 + 4] === 0x6f ? StreamType.Stdout : StreamType.Stderr;
    const partial = chunk[sp1 + 8] === 0x50;
    const payloadStart = sp1 + 9 === nl ? nl : sp1 + 10;
    const payloadEnd = partial ? nl : next;
    if (payloadEnd > payloadStart && (stream === StreamType.Stdout ? opts.stdout : opts.stderr)) {
      if (opts.framed && stream !== frameType) {
        if (frameStart >= 0) chunk.writeUInt32BE(w - frameStart - 8, frameStart + 4);
        frameStart = w;
        frameType = stream;
        chunk[w] = stream;
        chunk[w + 1] = 0;
        chunk[w + 2] = 0;
        chunk[w + 3] = 0;
        w += 8;
      }
      chunk.copyWithin(w, payloadStart, payloadEnd);
      w += payloadEnd - payloadStart;
    }
    start = next;
  }
  if (frameStart >= 0) chunk.writeUInt32BE(w - frameStart - 8, frameStart + 4);
  return chunk.subarray(0, w);
}

/**
 * `\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}` at `at`, parseLogLine's check of the time. Written out
 * without helper calls: this runs for every line, and stays small enough for V8 to inline.
 * `(c ^ 0x30) < 10` holds exactly for the bytes 0-9: others differ from 0x30 above the low nibble.
 */
function timeShaped(b: Buffer, at: number): boolean {
  return (
    (b[at]! ^ 0x30) < 10 && (b[at + 1]! ^ 0x30) < 10 && (b[at + 2]! ^ 0x30) < 10 && (b[at + 3]! ^ 0x30) < 10 && b[at + 4] === 0x2d &&
    (b[at + 5]! ^ 0x30) < 10 && (b[at + 6]! ^ 0x30) < 10 && b[at + 7] === 0x2d &&
    (b[at + 8]! ^ 0x30) < 10 && (b[at + 9]! ^ 0x30) < 10 && b[at + 10] === 0x54 &&
    (b[at + 11]! ^ 0x30) < 10 && (b[at + 12]! ^ 0x30) < 10 && b[at + 13] === 0x3a &&
    (b[at + 14]! ^ 0x30) < 10 && (b[at + 15]! ^ 0x30) < 10 && b[at + 16] === 0x3a &&
    (b[at + 17]! ^ 0x30) < 10 && (b[at + 18]! ^ 0x30) < 10
  );
}

/**
 * From `from` (after the 19 time bytes), finds the first space and checks that ` stdout` or
 * ` stderr`, a space, P or F, then a space or the line's end `nl` follow. Returns that first
 * space's index, or -1 for a malformed line.
 */
function prefixEnd(b: Buffer, from: number, nl: number): number {
  let sp1 = from;
  while (sp1 < nl && b[sp1] !== 0x20) sp1++;
  if (sp1 + 9 > nl) return -1;
  if (b[sp1 + 1] !== 0x73 || b[sp1 + 2] !== 0x74 || b[sp1 + 3] !== 0x64 || b[sp1 + 7] !== 0x20) return -1; // "std", space
  const out = b[sp1 + 4] === 0x6f && b[sp1 + 5] === 0x75 && b[sp1 + 6] === 0x74;
  const err = b[sp1 + 4] === 0x65 && b[sp1 + 5] === 0x72 && b[sp1 + 6] === 0x72;
  if (!out && !err) return -1;
  const tag = b[sp1 + 8];
  if (tag !== 0x46 && tag !== 0x50) return -1; // F, P
  if (sp1 + 9 < nl && b[sp1 + 9] !== 0x20) return -1;
  return sp1;
}
