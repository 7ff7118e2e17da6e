/**
 * A stream of chunks written to a file descriptor off the event loop, gathered into one writev per
 * BATCH bytes: a thread-pool round trip per input chunk (typically 64 KiB) costs several times
 * what the disk takes. One writev is in flight while the next batch is gathered; the next waits
 * for it (file order). `seen` sees each chunk as it passes (e.g. to hash it).
 */
import fs from 'node:fs';

const BATCH = 1024 * 1024;

export async function writeBatched(fd: number, data: AsyncIterable<Buffer>, seen?: (chunk: Buffer) => void): Promise<void> {
  let batch: Buffer[] = [];
  let bytes = 0;
  let inFlight: Promise<void> = Promise.resolve();
  try {
    for await (const chunk of data) {
      seen?.(chunk);
      batch.push(chunk);
      bytes += chunk.length;
      if (bytes >= BATCH) {
        await inFlight;
        inFlight = writevAll(fd, batch, bytes);
        inFlight.catch(() => undefined); // a failure surfaces at the next await, not as unhandled
        batch = [];
        bytes = 0;
      }
    }
    await inFlight;
  } finally {
    await inFlight.catch(() => undefined); // never let the caller close the fd under a pending write
  }
  if (bytes > 0) await writevAll(fd, batch, bytes);
}

async function writevAll(fd: number, bufs: Buffer[], total: number): Promise<void> {
  const n = await new Promise<number>((resolve, reject) => fs.writev(fd, bufs, (err, written) => (err ? reject(err) : resolve(written))));
  if (n < total) await writeAll(fd, Buffer.concat(bufs, total).subarray(n));
}

async function writeAll(fd: number, buf: Buffer): Promise<void> {
  for (let off = 0; off < buf.length; ) {
    off += await new Promise<number>((resolve, reject) => fs.write(fd, buf, off, buf.length - off, null, (err, n) => (err ? reject(err) : resolve(n))));
  }
}
