/**
 * Turn a layer blob into its tar stream. The compression is read from the first bytes, like
 * dockerd does, because registries and old tools mislabel layers (docker media types all say
 * gzip, and some "gzip" layers are plain tar); the media type only names the layer in errors.
 * gzip: node:zlib. zstd: the Debian `zstd -dc` process (Node 20 has no zstd), streamed with
 * backpressure and killed when the stream is destroyed; archives that are not layers (a build
 * context, ADD) may also be bzip2 or xz, through `bzip2 -dc` and `xz -dc` the same way. Plain tar
 * passes through.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Duplex, PassThrough, pipeline, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { BerthError, errorMessage, internal } from '../lib/errors.js';

type Compression = 'gzip' | 'zstd' | 'none';

/**
 * Output chunk size: each gunzip call is a thread-pool round trip and each chunk a trip through
 * the hash, the tar parser and a write, so big chunks (fed by big input chunks) cost least.
 */
const OUT_CHUNK = 1024 * 1024;

export function sniffCompression(head: Buffer): Compression | 'bzip2' | 'xz' {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'zstd';
  // zstd skippable frames (0x184D2A50-5F) may come first
  if (head.length >= 4 && (head.readUInt32LE(0) & 0xfffffff0) === 0x184d2a50) return 'zstd';
  if (head.length >= 3 && head.toString('latin1', 0, 3) === 'BZh') return 'bzip2';
  if (head.length >= 6 && head.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) return 'xz';
  return 'none';
}

/**
 * The uncompressed tar of a layer blob stream. Errors (corrupt data, unsupported compression,
 * a failing source) arrive as errors on the returned stream; destroying it stops the source.
 */
export function decompressLayer(mediaType: string, src: Readable): Readable {
  return decompress(`layer (${mediaType})`, src, (kind) => `unsupported layer compression ${kind} (${mediaType})`);
}

/** Like decompressLayer, for archives that may also be bzip2 or xz (a `docker build` context, ADD). */
export function decompressArchive(what: string, src: Readable): Readable {
  return decompress(what, src);
}

/** `refuse` names why bzip2 and xz are not taken (layers); without it they are decompressed too. */
function decompress(what: string, src: Readable, refuse?: (kind: 'bzip2' | 'xz') => string): Readable {
  const out = new PassThrough({ highWaterMark: OUT_CHUNK });
  // The source's own errors (network, digest) pass unchanged; the decoder's mean a bad layer.
  let srcError: unknown;
  src.once('error', (err) => (srcError = err));
  const fail = (err: unknown) =>
    out.destroy(
      err instanceof BerthError || err === srcError
        ? (err as Error)
        : new BerthError('invalid-argument', `decompressing ${what}: ${errorMessage(err)}`, { cause: err }),
    );
  out.once('close', () => {
    if (!src.destroyed && !src.readableEnded) src.destroy();
  });
  readHead(src, 6).then((head) => {
    // Next tick: the stream must first notice its 'readable' listener is gone, or pipe() stalls.
    process.nextTick(() => start(head));
  }, fail);
  const start = (head: Buffer) => {
    if (out.destroyed) return;
    const kind = sniffCompression(head);
    if ((kind === 'bzip2' || kind === 'xz') && refuse) {
      fail(new BerthError('invalid-argument', refuse(kind)));
      return;
    }
    const decoder: Duplex =
      kind === 'gzip' ? zlib.createGunzip({ chunkSize: OUT_CHUNK }) : kind === 'none' ? new PassThrough() : new ToolDecoder(kind);
    // out stays outside the pipeline so errors reach it wrapped (a pipeline would destroy it
    // with the raw error first); a consumer that stops early tears the pipeline down.
    pipeline(src, decoder, (err) => {
      if (err) fail(err);
    });
    // The pipeline only watches the decoder's input side; zstd's verdict comes after that.
    decoder.on('error', fail);
    decoder.pipe(out);
    out.once('close', () => decoder.destroy());
  };
  return out;
}

/** Read at least n bytes (fewer at EOF), then put them back so the stream starts over. */
export function readHead(src: Readable, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let have = 0;
    const done = (err?: Error) => {
      src.off('readable', onReadable);
      src.off('end', onEnd);
      src.off('error', done);
      if (err) return reject(err);
      const head = Buffer.concat(parts);
      if (head.length) src.unshift(head);
      resolve(head);
    };
    const onEnd = () => done();
    const onReadable = () => {
      let chunk: Buffer | null;
      while (have < n && (chunk = src.read() as Buffer | null) !== null) {
        parts.push(chunk);
        have += chunk.length;
      }
      if (have >= n) done();
    };
    src.on('readable', onReadable);
    src.once('end', onEnd);
    src.once('error', done);
  });
}

/** `zstd -dc` (or bzip2, xz) as a Duplex: compressed bytes in, tar out. Fails unless the tool exits 0. */
class ToolDecoder extends Duplex {
  readonly #child: ChildProcess;
  #stderr = '';
  #exited = false;

  constructor(readonly tool: 'zstd' | 'bzip2' | 'xz') {
    super({ readableHighWaterMark: 256 * 1024 });
    this.#child = spawn(tool, tool === 'zstd' ? ['-dc', '-q', '--no-progress'] : ['-dc'], { stdio: ['pipe', 'pipe', 'pipe'] });
    const child = this.#child;
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      if (this.#stderr.length < 4096) this.#stderr += d;
    });
    child.stdout!.on('data', (d: Buffer) => {
      if (!this.push(d)) child.stdout!.pause();
    });
    child.stdin!.on('error', () => {}); // EPIPE after zstd gave up: its exit status says why
    child.on('error', (err) => this.destroy(internal(`cannot run ${tool}: ${err.message}`, err)));
    // 'close' comes after the output is fully read and the process has exited.
    child.on('close', (code, signal) => {
      this.#exited = true;
      if (code === 0) this.push(null);
      else if (!this.destroyed) this.destroy(new Error(`${tool}: ${this.#stderr.trim() || `exited ${code ?? signal}`}`));
    });
  }

  override _read(): void {
    this.#child.stdout!.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.#exited) return cb(new Error(`${this.tool}: ${this.#stderr.trim() || 'exited early'}`));
    this.#child.stdin!.write(chunk, () => cb());
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.#child.stdin!.end(() => cb());
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    if (!this.#exited) this.#child.kill('SIGKILL');
    cb(err);
  }
}
