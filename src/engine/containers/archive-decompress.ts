/**
 * The tar inside a PUT /containers/{id}/archive body: plain, gzip or zstd (images/decompress.ts),
 * or bzip2 and xz, which the Engine API also accepts, through the host's `bzip2 -dc` / `xz -dc`
 * (never a binary from the container). Streamed; the kind is read from the first bytes, which are
 * put back. Chunks go on by pipe, never through an async iterator: that reads everything buffered
 * at once and so concatenates the body's 64 KiB chunks into fresh buffers, a copy of the whole
 * upload and a full GC every few tens of MB.
 */
import { spawn } from 'node:child_process';
import { finished, PassThrough, Readable } from 'node:stream';
import { invalidArgument } from '../../lib/errors.js';
import { decompressLayer, readHead, sniffCompression } from '../../images/decompress.js';

export function decompressArchive(src: Readable): Readable {
  const out = new PassThrough({ highWaterMark: 1024 * 1024 });
  readHead(src, 6).then(
    (head) => {
      // Next tick: the source must first notice its 'readable' listener is gone, or pipe() stalls.
      process.nextTick(() => {
        if (out.destroyed) return;
        const kind = sniffCompression(head);
        if (kind === 'none') {
          // A plain tar (what the docker CLI sends) goes straight through: each PassThrough a chunk
          // crosses costs ~10 ms of CPU per 100 MB, and the layer decoder's path is three of them.
          // `out` is still a pipe of its own: tearing it down unpipes the request, never destroys it.
          finished(src, (err) => err && out.destroy(err)); // a client gone mid-body fails the copy
          src.pipe(out);
          return;
        }
        // Through a pipe of its own: what tears the decoders down must not destroy the request,
        // whose socket still carries the answer (a 400 for a bad archive).
        const body = src.pipe(new PassThrough({ highWaterMark: 1024 * 1024 }));
        finished(src, (err) => err && body.destroy(err)); // a client gone mid-body fails the copy
        const inner = kind === 'bzip2' || kind === 'xz' ? Readable.from(viaTool(kind, body), { objectMode: false }) : decompressLayer('archive', body);
        inner.once('error', (err) => out.destroy(err));
        out.once('close', () => inner.destroy());
        inner.pipe(out);
      });
    },
    (err) => out.destroy(err),
  );
  return out;
}

async function* viaTool(kind: 'bzip2' | 'xz', src: Readable): AsyncGenerator<Buffer> {
  const p = spawn(kind, ['-dc'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  p.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d.slice(0, 4096)));
  p.stdin.on('error', () => undefined); // the exit status tells
  src.on('error', () => p.kill('SIGKILL'));
  src.pipe(p.stdin);
  // Settles on the exit, or on a failure to run the tool at all (then 'close' may never come).
  const ended = new Promise<string | undefined>((resolve) => {
    p.once('close', (code) => resolve(code === 0 ? undefined : stderr.trim() || `exit ${code}`));
    p.once('error', (err) => resolve(err.message));
  });
  try {
    yield* p.stdout as AsyncIterable<Buffer>;
    const failed = await ended;
    if (failed !== undefined) throw invalidArgument(`decompressing the archive (${kind}): ${failed}`);
  } finally {
    if (p.exitCode === null) p.kill('SIGKILL');
  }
}
