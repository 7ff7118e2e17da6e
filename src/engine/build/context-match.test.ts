import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { tempDir } from '../../../test/fixtures/tar.js';
import { BlockDigests, type HeldContext } from './context-cache.js';
import { ContextDigests } from './context-digests.js';
import { matchKept, type Match } from './context-match.js';

/** A kept entry whose body file holds `body`, with the block digests receiveContext took of it. */
function kept(dir: string, name: string, body: Buffer): HeldContext {
  const path = join(dir, `${name}.tar`);
  writeFileSync(path, body);
  const blocks = new BlockDigests();
  blocks.update(body);
  return { ctx: { dir: join(dir, name), body: path, dockerfile: '', dockerfileName: 'Dockerfile', digests: new ContextDigests(), blocks: [...blocks.finish()], bytes: body.length }, release: async () => undefined };
}

/** `body` as a request streams it: 64 KiB chunks (the first shorter, as after the headers), each its own memory. */
function stream(body: Buffer): Readable {
  const chunks: Buffer[] = [];
  for (let at = 0; at < body.length; ) {
    const n = Math.min(at === 0 ? 1000 : 65536, body.length - at);
    chunks.push(Buffer.from(body.subarray(at, at + n)));
    at += n;
  }
  return Readable.from(chunks, { objectMode: false });
}

/** What a miss writes: the prefix read back from the entry, the pending chunks, the rest of the body. */
async function written(m: Match, body: Readable): Promise<Buffer> {
  const parts = [m.prefix && m.prefixBytes > 0 ? readFileSync(m.prefix.ctx.body).subarray(0, m.prefixBytes) : Buffer.alloc(0), ...m.pending.map((c) => Buffer.from(c))];
  if (!m.ended) {
    body.resume();
    for await (const c of body) parts.push(Buffer.from(c as Buffer));
  }
  return Buffer.concat(parts);
}

const MODES = { bytes: 'their mapped bytes', digests: 'their block digests, the bodies not mappable', mixed: 'one by its bytes, the other by its digests' };

for (const mode of ['bytes', 'digests', 'mixed'] as const) {
  test(`a body is matched with the kept ones (${MODES[mode]}): the same bytes hit, any change misses and is written as sent`, async (t) => {
    const dir = await tempDir(t, 'berth-ctx-match-');
    const body = randomBytes(3 * 1024 * 1024 + 12345);
    const other = Buffer.concat([body.subarray(0, 2 * 1024 * 1024), randomBytes(1024 * 1024)]);
    const entries = [kept(dir, 'other', other), kept(dir, 'same', body)];
    // Without its body file an entry cannot be mapped: only its digests are left to compare.
    const unmappable = mode === 'digests' ? [0, 1] : mode === 'mixed' ? [1] : [];
    const forget = (): void => {
      for (const i of unmappable) rmSync(entries[i]!.ctx.body, { force: true });
    };
    const restore = (): void => {
      for (const i of unmappable) writeFileSync(entries[i]!.ctx.body, [other, body][i]!);
    };

    forget();
    const hit = await matchKept(stream(body), entries);
    assert.equal(hit.hit, entries[1], 'the same body hits its entry');

    const changedAt = [5, 1024 * 1024 + 7, 2 * 1024 * 1024 + 70000, body.length - 1];
    for (const at of changedAt) {
      const sent = Buffer.from(body);
      sent[at]! ^= 0x20;
      forget();
      const src = stream(sent);
      const m = await matchKept(src, entries);
      assert.equal(m.hit, undefined, `a byte changed at ${at} misses`);
      assert.ok(m.prefixBytes <= at, 'the prefix ends before the change');
      restore();
      assert.ok((await written(m, src)).equals(sent), `what a miss writes is what was sent (change at ${at})`);
    }

    for (const sent of [body.subarray(0, body.length - 1), Buffer.concat([body, Buffer.from('x')]), Buffer.alloc(0)]) {
      forget();
      const src = stream(sent);
      const m = await matchKept(src, entries);
      assert.equal(m.hit, undefined, `a body of ${sent.length} bytes misses`);
      restore();
      assert.ok((await written(m, src)).equals(sent), 'a shorter or longer body is written as sent');
    }
  });
}

test('a body that fails or is cut off midway rejects the match', async (t) => {
  const dir = await tempDir(t, 'berth-ctx-match-');
  const body = randomBytes(256 * 1024);
  const src = new Readable({ read() {} });
  const p = matchKept(src, [kept(dir, 'a', body)]);
  src.push(body.subarray(0, 100_000));
  src.destroy(new Error('connection reset'));
  await assert.rejects(p, /connection reset/);
});
