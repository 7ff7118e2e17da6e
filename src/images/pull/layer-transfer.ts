/**
 * One layer's bytes from the verified blob stream to an unpacked layer: download, decompression
 * and unpacking run as one stream, so extraction overlaps the download. The same code runs on the
 * main thread and in the pull workers (layer-pull-worker.ts).
 */
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { decompressLayer } from '../decompress.js';

export interface TransferOptions {
  mediaType: string;
  /** Unpacks the layer's tar (LayerStore.unpack) and resolves with its size. */
  unpack: (tar: Readable) => Promise<{ size: number }>;
  /** Compressed bytes received so far (after verification of the size so far). */
  onBytes: (received: number) => void;
  /** The whole blob arrived and its digest checked out. */
  onDownloaded: () => void;
  signal: AbortSignal;
  /**
   * Where the compressed blob is kept as it flows (ContentStore.writer): a pulled image pushes
   * back and saves as the very bytes it came as. The blob is stored before the download counts as done.
   */
  keep?: Transform | undefined;
}

/** Resolves with the unpacked size once both the download and the unpack have finished. */
export async function transferLayer(blob: Readable, o: TransferOptions): Promise<number> {
  let received = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      received += chunk.length;
      o.onBytes(received);
      cb(null, chunk);
    },
    flush(cb) {
      o.onDownloaded();
      cb();
    },
  });
  blob.once('error', (err) => counter.destroy(err));
  const downloaded = new Promise<void>((resolve, reject) => {
    counter.once('error', reject);
    counter.once('end', resolve);
    // Torn down from downstream (the unpack gave up): no 'end' will come.
    counter.once('close', () => reject(new Error('layer download interrupted')));
    blob.once('error', reject);
  });
  const keep = o.keep;
  if (keep) {
    blob.once('error', (err) => keep.destroy(err));
    keep.once('error', (err) => counter.destroy(err));
    counter.once('close', () => {
      if (!keep.writableFinished) keep.destroy();
    });
    blob.pipe(keep).pipe(counter);
  } else {
    blob.pipe(counter);
  }
  const tar = decompressLayer(o.mediaType, counter);
  // The unpacker starts listening only after some async set-up; a failure before that (a short
  // layer failing its digest) must reach it through the stream's state, not crash the process.
  tar.on('error', () => {});
  const signal = o.signal;
  const onAbort = () => blob.destroy(signal.reason instanceof Error ? signal.reason : new Error('pull cancelled'));
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  try {
    // Both must settle: the unpack removes its temp dir before it reports, and the caller cleans
    // up after this returns. The download's error (a digest mismatch) says more than the unpack's.
    const [dl, unpacked] = await Promise.allSettled([downloaded, o.unpack(tar)]);
    if (dl.status === 'rejected' && unpacked.status === 'rejected') throw preferred(dl.reason, unpacked.reason);
    if (unpacked.status === 'rejected') throw unpacked.reason;
    if (dl.status === 'rejected') throw dl.reason;
    return unpacked.value.size;
  } catch (err) {
    blob.destroy();
    throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** Of two failures, the one that names the cause: not a cancellation or an interruption. */
function preferred(download: unknown, unpack: unknown): unknown {
  const msg = (e: unknown) => (e instanceof Error ? e.message : String(e));
  return /interrupted|cancel|abort|premature/i.test(msg(download)) && !/interrupted|cancel|abort|premature/i.test(msg(unpack)) ? unpack : download;
}
