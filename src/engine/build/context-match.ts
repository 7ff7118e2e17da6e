/**
 * Whether a build context, as its body streams in, is byte for byte one that the ContextCache kept
 * (context-cache.ts). Each chunk is compared as it arrives with the kept entries still matching,
 * until the body ends (a hit when an entry matched every byte and has no more) or no entry matches
 * any more (the body is then left paused, for the caller to write). Nothing is written meanwhile,
 * and a chunk is freed as soon as its bytes are known to be an entry's (releaseBuffers): the next
 * chunk reuses its memory, and the body's megabytes of dead chunks never wait for the GC.
 *
 * Two ways to compare, the first where it can be used:
 * - with the kept bodies themselves, mapped where they lie in the page cache (MappedFile): one
 *   memcmp per chunk, about a third of hashing it;
 * - with the kept entries' block digests (BLAKE3 of each BODY_BLOCK at fixed offsets), for bodies
 *   not in the page cache (or no FFI): only the current block's chunks wait, until its digest.
 *
 * The body is read through 'data' events: a paused-mode read (async iteration) makes Node stop
 * and restart the socket for every 64 KiB chunk, ~2 ms of a 20 MiB context.
 */
import type { Readable } from 'node:stream';
import { MappedFile } from '../../lib/mapped-file.js';
import { releaseBuffers } from '../../lib/release-buffer.js';
import { BODY_BLOCK, BlockDigests, type HeldContext } from './context-cache.js';

export interface Match {
  /** the kept entry the whole body matched */
  hit: HeldContext | undefined;
  /** the body ended (a miss by length, or the hit) */
  ended: boolean;
  /** an entry whose kept body holds the body's first `prefixBytes` bytes */
  prefix: HeldContext | undefined;
  prefixBytes: number;
  /** the bytes received after the prefix and not yet written */
  pending: Buffer[];
}

/** Chunks freed in one message: a postMessage per 64 KiB chunk would cost more than it saves. */
const RELEASE_BATCH = 16;

export async function matchKept(body: Readable, held: HeldContext[]): Promise<Match> {
  const mapped: MappedFile[] = [];
  for (const h of held) {
    const m = MappedFile.openResident(h.ctx.body);
    if (!m) break;
    mapped.push(m);
  }
  if (mapped.length < held.length) {
    for (const m of mapped) m.close();
    return matchDigests(body, held);
  }
  try {
    return await matchBytes(body, held.map((h, i) => ({ h, body: mapped[i]! })));
  } finally {
    // Unmapping tens of MiB takes a few tenths of a millisecond: not before the build's first
    // step, but on the loop's next turn (the mappings are this function's alone).
    setImmediate(() => {
      for (const m of mapped) m.close();
    });
  }
}

/** Runs `onData` over the body's chunks until `settle` is called (or the body fails). */
function follow(body: Readable, onData: (chunk: Buffer, settle: (m: Match, pause: boolean) => void) => void, onEnd: () => Match): Promise<Match> {
  return new Promise<Match>((resolve, reject) => {
    const settle = (m: Match, pause: boolean): void => {
      if (pause) body.pause();
      stop();
      resolve(m);
    };
    const data = (chunk: Buffer): void => onData(chunk, settle);
    const end = (): void => {
      stop();
      resolve(onEnd());
    };
    const error = (err: Error): void => {
      stop();
      reject(err);
    };
    const close = (): void => error(new Error('the build context ended early: the client closed the connection'));
    const stop = (): void => {
      body.off('data', data).off('end', end).off('error', error).off('close', close);
    };
    body.on('data', data).on('end', end).on('error', error).on('close', close);
  });
}

/** Compares every chunk with the mapped kept bodies at the same offset. */
function matchBytes(body: Readable, entries: { h: HeldContext; body: MappedFile }[]): Promise<Match> {
  let matching = entries;
  // bytes received so far, all of them every matching entry's
  let at = 0;
  const matched: Buffer[] = [];
  return follow(
    body,
    (chunk, settle) => {
      const still = matching.filter((e) => e.body.equals(at, chunk));
      if (still.length === 0) {
        releaseBuffers(matched.splice(0));
        settle({ hit: undefined, ended: false, prefix: matching[0]!.h, prefixBytes: at, pending: [chunk] }, true);
        return;
      }
      // the first chunk matched: the whole body probably will
      if (at === 0) for (const e of still) e.body.populate();
      matching = still;
      at += chunk.length;
      matched.push(chunk);
      if (matched.length >= RELEASE_BATCH) releaseBuffers(matched.splice(0));
    },
    () => {
      releaseBuffers(matched.splice(0));
      const hit = matching.find((e) => e.body.size === at);
      if (hit) return { hit: hit.h, ended: true, prefix: undefined, prefixBytes: 0, pending: [] };
      return { hit: undefined, ended: true, prefix: matching[0]!.h, prefixBytes: at, pending: [] };
    },
  );
}

/** Compares the body's block digests with the kept entries' as its blocks complete. */
function matchDigests(body: Readable, held: HeldContext[]): Promise<Match> {
  const blocks = new BlockDigests();
  let matching = held;
  // the entries that matched every block confirmed so far, and the bytes those blocks cover
  let lastMatched = held;
  let confirmed = 0;
  // whole chunks from the body offset pendingAt on (the first may start before `confirmed`)
  const pending: Buffer[] = [];
  let pendingAt = 0;
  let checked = 0;
  const same = (h: HeldContext, from: number, to: number): boolean => {
    for (let i = from; i < to; i++) if (h.ctx.blocks[i] !== blocks.digests[i]) return false;
    return true;
  };
  const miss = (ended: boolean): Match => {
    // the bytes after the matched prefix, which starts inside the first pending chunk
    if (pending.length > 0 && pendingAt < confirmed) pending[0] = pending[0]!.subarray(confirmed - pendingAt);
    return { hit: undefined, ended, prefix: lastMatched[0], prefixBytes: confirmed, pending };
  };
  return follow(
    body,
    (chunk, settle) => {
      const before = blocks.digests.length;
      blocks.update(chunk);
      pending.push(chunk);
      const n = blocks.digests.length;
      if (n === before) return;
      matching = matching.filter((h) => same(h, checked, n));
      checked = n;
      if (matching.length === 0) {
        settle(miss(false), true);
        return;
      }
      lastMatched = matching;
      // the confirmed blocks' bytes are the entries' own: their chunks are not needed any more
      confirmed = n * BODY_BLOCK;
      let done = 0;
      while (done < pending.length && pendingAt + pending[done]!.length <= confirmed) pendingAt += pending[done++]!.length;
      releaseBuffers(pending.splice(0, done));
    },
    () => {
      blocks.finish();
      const n = blocks.digests.length;
      const hit = matching.find((h) => h.ctx.blocks.length === n && same(h, checked, n));
      if (!hit) return miss(true);
      releaseBuffers(pending.splice(0));
      return { hit, ended: true, prefix: undefined, prefixBytes: 0, pending: [] };
    },
  );
}
