/**
 * The tar inside a PUT /containers/{id}/archive body: plain, gzip or zstd (images/decompress.ts),
 * or bzip2 and xz, which the Engine API also accepts, through the host's `bzip2 -dc` / `xz -dc`
 * (never a binary from the container). Streamed; the kind is read from the first bytes.
 */
import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { invalidArgument } from '../../lib/errors.js';
import { decompressLayer, sniffCompression } from '../../images/decompress.js';

export function decompressArchive(src: Readable): Readable {
  const it = src[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  async function* chunks(first: Buffer): AsyncGenerator<Buffer> {
    if (first.length) yield first;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield r.value;
    }
  }
  async function* tar(): AsyncGenerator<Buffer> {
    let head = Buffer.alloc(0);
    while (head.length < 6) {
      const r = await it.next();
      if (r.done) break;
      head = Buffer.concat([head, r.value]);
    }
    const kind = sniffCompression(head);
    const rest = Readable.from(chunks(head), { objectMode: false });
    if (kind !== 'bzip2' && kind !== 'xz') {
      yield* decompressLayer('archive', rest) as AsyncIterable<Buffer>;
      return;
    }
    const p = spawn(kind, ['-dc'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    p.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d.slice(0, 4096)));
    p.stdin.on('error', () => undefined); // the exit status tells
    rest.on('error', () => p.kill('SIGKILL'));
    rest.pipe(p.stdin);
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
  return Readable.from(tar(), { objectMode: false });
}
