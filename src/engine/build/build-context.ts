/**
 * The build context: the request body (a tar, plain or gzip/bzip2/xz). A body seen before, byte
 * for byte, takes its unpacked tree from the ContextCache (context-match.ts says how it is matched
 * as it streams in); otherwise it is written to a file, which is unpacked into a directory of its
 * own under the data root by the layer unpacker, which refuses hostile entries
 * (`..`, escaping links, devices), each file hashed on the way (ContextDigests) so COPY's cache key
 * needs no second read. Then the Dockerfile is read.
 */
import { lstat, mkdir, open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createReadStream, createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { randomHex } from '../../lib/random-hex.js';
import { decompressArchive } from '../../images/decompress.js';
import { isArchiveHead } from './copy-files.js';
import { unpackLayer } from '../../images/unpack-layer.js';
import { writeBatched } from '../../lib/batched-write.js';
import { BerthError, invalidArgument, notImplemented } from '../../lib/errors.js';
import { DockerIgnore, readIgnorePatterns } from './dockerfile/dockerignore.js';
import { ContextDigests } from './context-digests.js';
import { BlockDigests, type ContextCache, type HeldContext, type UnpackedContext } from './context-cache.js';
import { matchKept } from './context-match.js';
import { resolveInRoot } from './fs-in-root.js';
import { httpGet } from './http-get.js';

export interface BuildContext {
  /** The unpacked context. */
  dir: string;
  dockerfile: string;
  dockerfileName: string;
  /** Digests of the context's files, hashed as they were unpacked. */
  digests: ContextDigests;
  /** Removes the context from disk, or hands it back to the cache. */
  dispose(): Promise<void>;
}

/** Read size of the body file when it is unpacked or read back: big chunks cost the tar parser least. */
const FILE_READ = 1024 * 1024;

export async function receiveContext(workDir: string, body: Readable, dockerfileName: string | undefined, cache?: ContextCache): Promise<BuildContext> {
  const held = cache?.candidates(dockerfileName) ?? [];
  let kept: HeldContext | undefined;
  try {
    const m = held.length > 0 ? await matchKept(body, held) : { hit: undefined, ended: false, prefix: undefined, prefixBytes: 0, pending: [] };
    if (m.hit) {
      kept = m.hit;
      return { ...m.hit.ctx, dispose: m.hit.release };
    }
    // A miss: the body goes to a file (the matched prefix read back from an entry's), then is
    // unpacked; the block digests that will find it again are taken of everything written.
    const { prefix, prefixBytes, ended } = m;
    const blocks = new BlockDigests();
    async function* bytes(): AsyncGenerator<Buffer> {
      if (prefix && prefixBytes > 0) {
        for await (const chunk of createReadStream(prefix.ctx.body, { start: 0, end: prefixBytes - 1, highWaterMark: FILE_READ }) as AsyncIterable<Buffer>) {
          blocks.update(chunk);
          yield chunk;
        }
      }
      for (const chunk of m.pending.splice(0)) {
        blocks.update(chunk);
        yield chunk;
      }
      if (!ended) {
        // next() by hand: a for-await that stopped early would destroy the request
        const it = body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
        for (let r = await it.next(); !r.done; r = await it.next()) {
          blocks.update(r.value);
          yield r.value;
        }
      }
      blocks.finish();
    }
    const file = join(workDir, `ctx-${randomHex(8)}.tar`);
    try {
      const size = await writeFile(file, bytes());
      const ctx = await unpackContext(workDir, createReadStream(file, { highWaterMark: FILE_READ }), dockerfileName);
      kept = await cache?.adopt(dockerfileName, { ...ctx, body: file, blocks: blocks.digests, bytes: size });
      if (kept) return { ...kept.ctx, dispose: kept.release };
      rm(file, { force: true }).catch(() => undefined);
      return ctx;
    } catch (err) {
      await rm(file, { force: true });
      throw err;
    }
  } finally {
    for (const h of held) if (h !== kept) await h.release();
  }
}

/** Writes the chunks to a new file in order, a batch at a time; returns the bytes written. */
async function writeFile(path: string, chunks: AsyncIterable<Buffer>): Promise<number> {
  let size = 0;
  const fh = await open(path, 'wx', 0o600);
  try {
    await writeBatched(fh.fd, chunks, (c) => (size += c.length));
  } finally {
    await fh.close();
  }
  return size;
}

async function unpackContext(workDir: string, tar: Readable, dockerfileName: string | undefined): Promise<BuildContext & UnpackedContext> {
  const dir = join(workDir, `ctx-${randomHex(8)}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const dispose = () => rm(dir, { recursive: true, force: true });
  const digests = new ContextDigests();
  try {
    try {
      await unpackLayer(decompressArchive('build context', tar), dir, { onFileDigest: (st, digest) => digests.add(st, digest) });
    } catch (err) {
      if (err instanceof BerthError) throw invalidArgument(`invalid build context: ${err.message.replace(/layer entry/, 'context entry')}`);
      throw err;
    }
    let name = dockerfileName || 'Dockerfile';
    let text = await readInside(dir, name);
    if (text === undefined && !dockerfileName) {
      name = 'dockerfile';
      text = await readInside(dir, name);
    }
    if (text === undefined) throw invalidArgument(`Cannot locate specified Dockerfile: ${dockerfileName || 'Dockerfile'}`);
    // As dockerd: the client filters the context by .dockerignore; the daemon only takes out the
    // .dockerignore and the Dockerfile themselves when the patterns name them.
    const ignoreText = await readInside(dir, '.dockerignore');
    if (ignoreText !== undefined) {
      const ig = new DockerIgnore(readIgnorePatterns(ignoreText));
      for (const f of ['.dockerignore', name]) if (ig.ignores(f)) await rm(resolveInRoot(dir, f, false), { force: true });
    }
    return { dir, dockerfile: text, dockerfileName: name, digests, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

/** A Dockerfile or .dockerignore bigger than this is refused rather than read into memory. */
const MAX_TEXT = 16 * 1024 * 1024;

async function readInside(root: string, rel: string): Promise<string | undefined> {
  const abs = resolveInRoot(root, rel);
  try {
    const st = await lstat(abs);
    if (!st.isFile()) return undefined;
    if (st.size > MAX_TEXT) throw invalidArgument(`${rel} is too large (${st.size} bytes; at most ${MAX_TEXT})`);
    return await readFile(abs, 'utf8');
  } catch (err) {
    if (err instanceof BerthError) throw err;
    return undefined;
  }
}

/** The URL forms dockerd reads as git repositories. */
const GIT_URL = /^(git:\/\/|git@|github\.com\/)|\.git(#.*)?$/;

/**
 * `remote=<url>`: a tar (plain or compressed) fetched over http(s) is the context; anything else
 * fetched is taken as the Dockerfile of an otherwise empty context, as dockerd does. Git URLs are
 * not supported.
 */
export async function receiveRemoteContext(workDir: string, url: string, dockerfileName: string | undefined, signal: AbortSignal, cache?: ContextCache): Promise<BuildContext> {
  if (GIT_URL.test(url)) throw notImplemented(`git build contexts (remote=${url}) are not supported: send the context as the request body`);
  if (!/^https?:\/\//.test(url)) throw invalidArgument(`remote context ${url} is not an http(s) URL`);
  const { body } = await httpGet(url, signal);
  const { head, rest } = await peek(body, 512);
  if (isArchiveHead(head)) return receiveContext(workDir, rest, dockerfileName, cache);
  const dir = join(workDir, `ctx-${randomHex(8)}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const dispose = () => rm(dir, { recursive: true, force: true });
  try {
    let size = 0;
    const capped = rest.map((chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_TEXT) throw invalidArgument(`the Dockerfile at ${url} is too large (at most ${MAX_TEXT} bytes)`);
      return chunk;
    });
    await pipeline(capped, createWriteStream(join(dir, 'Dockerfile')));
    const text = await readInside(dir, 'Dockerfile');
    return { dir, dockerfile: text ?? '', dockerfileName: 'Dockerfile', digests: new ContextDigests(), dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

/** The first `n` bytes (fewer at the end) and a stream of everything, those bytes included. */
async function peek(src: Readable, n: number): Promise<{ head: Buffer; rest: Readable }> {
  const it = src[Symbol.asyncIterator]();
  const parts: Buffer[] = [];
  let have = 0;
  let done = false;
  while (have < n) {
    const r = await it.next();
    if (r.done) { done = true; break; }
    parts.push(r.value as Buffer);
    have += (r.value as Buffer).length;
  }
  const head = Buffer.concat(parts);
  async function* all(): AsyncGenerator<Buffer> {
    if (head.length) yield head;
    if (done) return;
    for (let r = await it.next(); !r.done; r = await it.next()) yield r.value as Buffer;
  }
  return { head, rest: Readable.from(all()) };
}
