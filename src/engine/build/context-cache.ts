/**
 * Unpacked build contexts kept with their files' digests and the body they came from, so that a
 * context sent again byte for byte (the CLI's tar of unchanged files is) is neither written,
 * unpacked nor hashed file by file again. A body is compared with the kept ones as it arrives
 * (context-match.ts: with the kept body's bytes, or its block digests, BLAKE3 of each 1 MiB at fixed
 * offsets): while some entry still matches, nothing is written; where it stops matching, the matched
 * prefix is read back from that entry's kept body. Bounded
 * by count and bytes; the least recently used entry nobody holds goes first. Entries live in a dir
 * of the build work dir, which start-up empties (the digests are in memory only); prune empties it.
 */
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { randomHex } from '../../lib/random-hex.js';
import { contentHasher, type ContentHasher } from '../../lib/content-digest.js';
import { log } from '../../lib/log.js';
import type { ContextDigests } from './context-digests.js';

/** Block size of the body's digests: big enough that digests are few, small enough to hold one. */
export const BODY_BLOCK = 1024 * 1024;

/** A context as builds read it: the unpacked tree and what was taken from it. */
export interface UnpackedContext {
  dir: string;
  dockerfile: string;
  dockerfileName: string;
  digests: ContextDigests;
}

export interface CachedContext extends UnpackedContext {
  /** the body as received (a tar, maybe compressed) */
  body: string;
  /** digests of the body's blocks */
  blocks: readonly string[];
  bytes: number;
}

/** An entry held by one build: it stays on disk until released. */
export interface HeldContext {
  ctx: CachedContext;
  release(): Promise<void>;
}

interface Entry {
  ctx: CachedContext;
  key: string;
  /** the `dockerfile` query value it was built with: it decides what .dockerignore takes out */
  requested: string;
  users: number;
  lastUsed: number;
  /** pruned while held: out of the map, removed at its last release */
  doomed: boolean;
}

export interface ContextCacheLimits {
  entries: number;
  bytes: number;
}

const DEFAULT_LIMITS: ContextCacheLimits = { entries: 4, bytes: 512 * 1024 * 1024 };

export class ContextCache {
  readonly #entries = new Map<string, Entry>();
  /** keys of entries whose files are being moved in */
  readonly #adopting = new Set<string>();
  /** orders uses (lastUsed): a counter, as several can fall in one millisecond */
  #uses = 0;

  /** `dir`: where entries live, emptied by clear() at start-up. */
  constructor(private readonly dir: string, private readonly limits: ContextCacheLimits = DEFAULT_LIMITS) {}

  /** Every entry made with this `dockerfile` query value, each held. */
  candidates(requested: string | undefined): HeldContext[] {
    const out: HeldContext[] = [];
    for (const e of this.#entries.values()) if (e.requested === (requested ?? '')) out.push(this.#hold(e));
    return out;
  }

  /**
   * Takes `ctx`: its dir and body file move into the cache's dir, and it is returned held. When it
   * cannot be kept (too big, the cache full of held entries, the same body already there), returns
   * undefined and the caller keeps and removes its files.
   */
  async adopt(requested: string | undefined, ctx: CachedContext): Promise<HeldContext | undefined> {
    const key = `${requested ?? ''}\n${ctx.blocks.join(',')}`;
    if (this.#entries.has(key) || this.#adopting.has(key) || ctx.bytes > this.limits.bytes) return undefined;
    const victims: Entry[] = [];
    let count = this.#entries.size + this.#adopting.size + 1;
    let total = ctx.bytes + [...this.#entries.values()].reduce((n, e) => n + e.ctx.bytes, 0);
    for (const e of [...this.#entries.values()].sort((a, b) => a.lastUsed - b.lastUsed)) {
      if (count <= this.limits.entries && total <= this.limits.bytes) break;
      if (e.users > 0) continue;
      victims.push(e);
      count--;
      total -= e.ctx.bytes;
    }
    if (count > this.limits.entries || total > this.limits.bytes) return undefined;
    for (const v of victims) {
      this.#entries.delete(v.key);
      void removeFiles(v.ctx);
    }
    this.#adopting.add(key);
    try {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      const name = join(this.dir, randomHex(8));
      await rename(ctx.dir, name);
      await rename(ctx.body, `${name}.tar`);
      const e: Entry = { ctx: { ...ctx, dir: name, body: `${name}.tar` }, key, requested: requested ?? '', users: 0, lastUsed: ++this.#uses, doomed: false };
      this.#entries.set(key, e);
      return this.#hold(e);
    } catch (err) {
      log.warn('build: keeping a context failed', { err });
      return undefined;
    } finally {
      this.#adopting.delete(key);
    }
  }

  /** Empties the cache (prune); held entries go when released. */
  async clear(): Promise<void> {
    const idle: Entry[] = [];
    for (const e of this.#entries.values()) {
      if (e.users > 0) e.doomed = true;
      else idle.push(e);
    }
    this.#entries.clear();
    await Promise.all(idle.map((e) => removeFiles(e.ctx)));
  }

  get size(): number {
    return this.#entries.size;
  }

  #hold(e: Entry): HeldContext {
    e.users++;
    e.lastUsed = ++this.#uses;
    let released = false;
    return {
      ctx: e.ctx,
      release: async () => {
        if (released) return;
        released = true;
        e.users--;
        if (e.users === 0 && e.doomed) await removeFiles(e.ctx);
      },
    };
  }
}

async function removeFiles(ctx: CachedContext): Promise<void> {
  for (const p of [ctx.dir, ctx.body]) await rm(p, { recursive: true, force: true }).catch((err) => log.warn('build: removing a cached context failed', { path: p, err }));
}

/** The digests of a byte stream's BODY_BLOCK blocks, at fixed offsets, as the bytes pass. */
export class BlockDigests {
  readonly digests: string[] = [];
  #hash: ContentHasher = contentHasher();
  #filled = 0;

  update(chunk: Buffer): void {
    for (let off = 0; off < chunk.length; ) {
      const n = Math.min(BODY_BLOCK - this.#filled, chunk.length - off);
      this.#hash.update(n === chunk.length ? chunk : chunk.subarray(off, off + n));
      this.#filled += n;
      off += n;
      if (this.#filled === BODY_BLOCK) this.#close();
    }
  }

  /** Closes the last, partial block (an empty stream has one empty block). */
  finish(): readonly string[] {
    if (this.#filled > 0 || this.digests.length === 0) this.#close();
    return this.digests;
  }

  #close(): void {
    this.digests.push(this.#hash.digest('hex'));
    this.#hash = contentHasher();
    this.#filled = 0;
  }
}
