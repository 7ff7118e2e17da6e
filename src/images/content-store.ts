/**
 * Blobs (manifests, configs, compressed layers) stored by digest:
 *
 *   <root>/blobs/sha256/<hex>   committed blobs, read-only, content always matches the name
 *   <root>/ingest/<random>      writes in progress
 *
 * Lifecycle: a blob is written under ingest/, hashed on the way in, checked against the expected
 * digest (and size), fsynced, renamed into blobs/ and the directory fsynced. Readers never see a
 * blob before that rename. Writing a blob that already exists succeeds. Any failure removes the
 * temp file. Which blobs are in use is recorded elsewhere (state/); this store only holds bytes.
 */
import { createHash } from 'node:crypto';
import { createReadStream, mkdirSync } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough, Readable, Writable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomHex } from '../lib/random-hex.js';
import { DigestVerifier, hexOf, isDigest, parseDigest, sha256Of, type Digest } from '../lib/digest.js';
import { BerthError, notFound } from '../lib/errors.js';
import { fsyncDir } from './fs-durable.js';

export class ContentStore {
  readonly #blobs: string;
  readonly #ingest: string;

  /** What it takes to open this store again, e.g. in a worker thread: `new ContentStore(root)`. */
  readonly root: string;

  constructor(root: string) {
    this.root = root;
    this.#blobs = join(root, 'blobs', 'sha256');
    this.#ingest = join(root, 'ingest');
    // Once, at startup: constructors cannot await.
    mkdirSync(this.#blobs, { recursive: true });
    mkdirSync(this.#ingest, { recursive: true });
  }

  path(d: Digest): string {
    return join(this.#blobs, hexOf(parseDigest(d)));
  }

  async has(d: Digest): Promise<boolean> {
    return (await this.size(d)) !== undefined;
  }

  async size(d: Digest): Promise<number | undefined> {
    try {
      return (await fs.stat(this.path(d))).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /**
   * A pass-through that stores what flows through it as blob `expected`. Pipe a download into
   * it and consume its output elsewhere (e.g. decompress and unpack): the bytes are read once.
   * The blob is committed when the input ends and checks out, before the output ends; a wrong
   * digest or size (too many bytes fail at once) errors the stream and leaves nothing behind
   * (once it has emitted 'close'), as does destroying it. `verifiedUpstream`: the input comes
   * through a verifier that fails the stream before its end on a mismatch (a pull's BlobVerifier),
   * so the bytes are not hashed a second time here.
   */
  writer(expected: Digest, size?: number, opts: { verifiedUpstream?: boolean } = {}): BlobWriter {
    const d = parseDigest(expected);
    const tmp = join(this.#ingest, randomHex(12));
    return new BlobWriter(d, size, tmp, opts.verifiedUpstream ?? false, async () => {
      // An existing copy has the same bytes: replacing it is harmless.
      await fs.rename(tmp, this.path(d));
      await fsyncDir(this.#blobs);
    });
  }

  /** Store a blob from a stream that must hash to `expected` (and be `size` bytes when given). */
  async ingest(expected: Digest, src: Readable, size?: number): Promise<{ size: number }> {
    const w = this.writer(expected, size);
    try {
      await pipeline(src, w, discard());
    } catch (err) {
      // The temp file is gone once the writer has closed: wait for that before reporting.
      w.destroy();
      if (!w.closed) await new Promise((resolve) => w.once('close', resolve));
      throw err;
    }
    return { size: w.bytes };
  }

  /**
   * Store a stream whose digest is not known in advance (a layer Berth compresses itself): hashed
   * on the way to a temp file, then named by its digest. Nothing stays behind on failure.
   */
  async ingestComputed(src: Readable): Promise<{ digest: Digest; size: number }> {
    const tmp = join(this.#ingest, randomHex(12));
    const hash = createHash('sha256');
    let size = 0;
    const fh = await fs.open(tmp, 'wx', 0o600);
    try {
      for await (const chunk of src as AsyncIterable<Buffer>) {
        hash.update(chunk);
        size += chunk.length;
        await fh.write(chunk);
      }
      await fh.sync();
      await fh.chmod(0o444);
      await fh.close();
      const digest: Digest = `sha256:${hash.digest('hex')}`;
      await fs.rename(tmp, this.path(digest));
      await fsyncDir(this.#blobs);
      return { digest, size };
    } catch (err) {
      await fh.close().catch(() => {});
      await fs.rm(tmp, { force: true });
      throw err;
    }
  }

  /** A new empty directory under ingest/ for a caller's staging (removed at startup if left). */
  async stagingDir(): Promise<string> {
    const dir = join(this.#ingest, `stage-${randomHex(8)}`);
    await fs.mkdir(dir, { mode: 0o700 });
    return dir;
  }

  /**
   * Adopts a staged file (on this file system, e.g. under stagingDir()) as a blob; the caller has
   * hashed it as `d`. A blob already stored stays and the file is removed.
   */
  async adopt(file: string, d: Digest): Promise<void> {
    if (await this.has(d)) {
      await fs.rm(file, { force: true });
      return;
    }
    await fs.chmod(file, 0o444);
    await fs.rename(file, this.path(d));
    await fsyncDir(this.#blobs);
  }

  /** Store bytes Berth made itself (configs, manifests); returns their digest. */
  async writeBuffer(data: Buffer | string): Promise<Digest> {
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    const d = sha256Of(buf);
    if (!(await this.has(d))) await this.ingest(d, Readable.from([buf]), buf.length);
    return d;
  }

  /** Stream a blob. A missing blob errors the stream with not-found. */
  createReadStream(d: Digest): Readable {
    const out = new PassThrough();
    const src = createReadStream(this.path(d));
    src.once('error', (err) => {
      out.destroy((err as NodeJS.ErrnoException).code === 'ENOENT' ? notFound(`blob ${d} not found`) : err);
    });
    out.once('close', () => src.destroy());
    src.pipe(out);
    return out;
  }

  /** Read a small blob (a manifest or config) whole. */
  async readBuffer(d: Digest): Promise<Buffer> {
    try {
      return await fs.readFile(this.path(d));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw notFound(`blob ${d} not found`);
      throw err;
    }
  }

  /** Delete a blob; missing is fine. */
  async delete(d: Digest): Promise<void> {
    await fs.rm(this.path(d), { force: true });
  }

  async list(): Promise<Digest[]> {
    const names = await fs.readdir(this.#blobs);
    return names.map((n) => `sha256:${n}`).filter(isDigest);
  }

  /** Remove unfinished writes. Call at startup, before any write starts. */
  async cleanIngest(): Promise<void> {
    for (const name of await fs.readdir(this.#ingest)) await fs.rm(join(this.#ingest, name), { force: true, recursive: true });
  }
}

/**
 * The pass-through returned by ContentStore.writer(). It is a DigestVerifier (the same hashing
 * and the same error messages) that also writes every chunk to a temp file before passing it on,
 * and commits that file when the input ends and checks out.
 */
export class BlobWriter extends DigestVerifier {
  readonly #expected: Digest;
  readonly #size: number | undefined;
  readonly #tmp: string;
  readonly #publish: () => Promise<void>;
  readonly #trusted: boolean;
  #fh: FileHandle | undefined;
  #committed = false;

  /** Made by ContentStore.writer(): `publish` moves the verified temp file into place. */
  constructor(expected: Digest, size: number | undefined, tmp: string, trusted: boolean, publish: () => Promise<void>) {
    super({ expected, size, what: 'blob' });
    this.#trusted = trusted;
    this.#expected = expected;
    this.#size = size !== undefined && size >= 0 ? size : undefined;
    this.#tmp = tmp;
    this.#publish = publish;
  }

  override _construct(cb: (err?: Error | null) => void): void {
    fs.open(this.#tmp, 'wx', 0o600).then((fh) => {
      this.#fh = fh;
      cb();
    }, cb);
  }

  override _transform(chunk: Buffer, enc: BufferEncoding, cb: TransformCallback): void {
    if (this.#size !== undefined && this.bytes + chunk.length > this.#size) {
      cb(new BerthError('invalid-argument', `blob ${this.#expected} is larger than the expected ${this.#size} bytes`));
      return;
    }
    const pass = this.#trusted
      ? () => {
          this.bytes += chunk.length;
          cb(null, chunk);
        }
      : () => super._transform(chunk, enc, cb);
    this.#fh!.write(chunk).then(pass, cb);
  }

  override _flush(cb: TransformCallback): void {
    if (this.#trusted) {
      this.#commit().then(() => cb(), cb);
      return;
    }
    super._flush((err) => {
      if (err) return cb(err);
      this.#commit().then(() => cb(), cb);
    });
  }

  async #commit(): Promise<void> {
    const fh = this.#fh!;
    this.#fh = undefined;
    try {
      await fh.sync();
      await fh.chmod(0o444);
    } finally {
      await fh.close();
    }
    await this.#publish();
    this.#committed = true;
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    const fh = this.#fh;
    this.#fh = undefined;
    const cleanup = async () => {
      await fh?.close().catch(() => {});
      if (!this.#committed) await fs.rm(this.#tmp, { force: true });
    };
    cleanup().then(() => cb(err), () => cb(err));
  }
}

function discard(): Writable {
  return new Writable({
    write(_chunk, _enc, cb) {
      cb();
    },
  });
}
