/**
 * Whether a build context, as its body streams in, is byte for byte one that the ContextCache kept
 * (context-cache.ts). Each chunk is compared as it arrives with the kept entries still matching,
 * until the body ends (a hit when an entry matched every byte and has no more) or no entry matches
 * any more (the body is then left paused, for the caller to write). Nothing is written meanwhile,
 * and a chunk is freed as soon as its bytes are known to be an entry's (releaseBuffers): the next
 * chunk reuses its memory, and the body's megabytes of dead chunks never wait for the GC.
 *
 * Each entry is compared one of two ways:
 * - with its kept body itself, mapped where it lies in the page cache (MappedFile): one memcmp per
 *   chunk, about a third of hashing it;
 * - with its block digests (BLAKE3 of each BODY_BLOCK at fixed offsets) when its body is not in the
 *   page cache (or there is no FFI): the body is hashed while such an entry still matches, and
 *   only the current block's chunks wait for its digest. An entry hit that way has its body read
 *   ahead, to be compared by its bytes the next time.
 *
 * The body is read through 'data' events: a paused-mode read (async iteration) makes Node stop
 * and restart the socket for every 64 KiB chunk, ~2 ms of a 20 MiB context.
 */
import type { Readable } from 'node:stream';
import { MappedFile, readAhead } from '../../lib/mapped-file.js';
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

interface Candidate {
  h: HeldContext;
  /** its body, mapped; undefined: compared by its block digests */
  mapped: MappedFile | undefined;
  /** still equal to everything received (for digests: to every block closed) */
  alive: boolean;
  /** how many of the body's first bytes are known to be this entry's */
  matched: number;
}

/** Chunks freed in one message: a postMessage per 64 KiB chunk would cost more than it saves. */
const RELEASE_BATCH = 16;

export async function matchKept(body: Readable, held: HeldContext[]): Promise<Match> {
  const cands: Candidate[] = held.map((h) => ({ h, mapped: MappedFile.openResident(h.ctx.body), alive: true, matched: 0 }));
  try {
    const m = await compare(body, cands);
    if (m.hit && !cands.find((c) => c.h === m.hit)!.mapped) readAhead(m.hit.ctx.body);
    return m;
  } finally {
    // Unmapping tens of MiB takes a few tenths of a millisecond: not before the build's first
    // step, but on the loop's next turn (the mappings are this function's alone).
    setImmediate(() => {
      for (const c of cands) c.mapped?.close();
    });
  }
}

function compare(body: Readable, cands: Candidate[]): Promise<Match> {
  // the body's digests, taken while an entry compared by its digests still matches
  const blocks = new BlockDigests();
  let hashing = cands.some((c) => !c.mapped);
  let checked = 0;
  let received = 0;
  // the entry known to hold the longest prefix of the body
  let best: Candidate | undefined;
  // whole chunks from the body offset pendingAt on (the first may start inside best's prefix)
  const pending: Buffer[] = [];
  let pendingAt = 0;
  const same = (c: Candidate, from: number, to: number): boolean => {
    for (let i = from; i < to; i++) if (c.h.ctx.blocks[i] !== blocks.digests[i]) return false;
    return true;
  };
  const miss = (ended: boolean): Match => {
    const prefixBytes = best?.matched ?? 0;
    // what the prefix holds is read back from it: the rest starts inside the first chunk left
    let done = 0;
    while (done < pending.length && pendingAt + pending[done]!.length <= prefixBytes) pendingAt += pending[done++]!.length;
    releaseBuffers(pending.splice(0, done));
    if (pending.length > 0 && pendingAt < prefixBytes) pending[0] = pending[0]!.subarray(prefixBytes - pendingAt);
    return { hit: undefined, ended, prefix: best?.h, prefixBytes, pending };
  };
  return new Promise<Match>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      for (const c of cands) {
        if (!c.alive || !c.mapped) continue;
        if (!c.mapped.equals(received, chunk)) c.alive = false;
        else {
          // the first chunk matched: the whole body probably will
          if (received === 0) c.mapped.populate();
          c.matched = received + chunk.length;
        }
      }
      received += chunk.length;
      pending.push(chunk);
      if (hashing) {
        blocks.update(chunk);
        const n = blocks.digests.length;
        if (n > checked) {
          for (const c of cands) {
            if (!c.alive || c.mapped) continue;
            if (same(c, checked, n)) c.matched = n * BODY_BLOCK;
            else c.alive = false;
          }
          checked = n;
          hashing = cands.some((c) => c.alive && !c.mapped);
        }
      }
      for (const c of cands) if (c.matched > (best?.matched ?? 0)) best = c;
      // the chunks of best's prefix are its own: not needed any more
      let done = 0;
      let bytes = 0;
      while (done < pending.length && pendingAt + bytes + pending[done]!.length <= (best?.matched ?? 0)) bytes += pending[done++]!.length;
      if (done >= RELEASE_BATCH) {
        releaseBuffers(pending.splice(0, done));
        pendingAt += bytes;
      }
      if (cands.some((c) => c.alive)) return;
      body.pause();
      stop();
      resolve(miss(false));
    };
    const onEnd = (): void => {
      stop();
      if (hashing) {
        blocks.finish();
        const n = blocks.digests.length;
        for (const c of cands) if (c.alive && !c.mapped && !(c.h.ctx.blocks.length === n && same(c, checked, n))) c.alive = false;
      }
      const hit = cands.find((c) => c.alive && (c.mapped ? c.mapped.size === received : true));
      if (!hit) {
        resolve(miss(true));
        return;
      }
      releaseBuffers(pending.splice(0));
      resolve({ hit: hit.h, ended: true, prefix: undefined, prefixBytes: 0, pending: [] });
    };
    const onError = (err: Error): void => {
      stop();
      reject(err);
    };
    const onClose = (): void => onError(new Error('the build context ended early: the client closed the connection'));
    const stop = (): void => {
      body.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
    };
    body.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}
