import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../../../test/fixtures/tar.js';
import { BlockDigests, BODY_BLOCK, ContextCache, type CachedContext } from './context-cache.js';
import { ContextDigests } from './context-digests.js';

let n = 0;
/** A context's two files as receiveContext leaves them in the work dir. */
function made(work: string, bytes: number, blocks: string[]): CachedContext {
  const dir = join(work, `ctx-${++n}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'Dockerfile'), 'FROM scratch\n');
  writeFileSync(`${dir}.tar`, 'body');
  return { dir, body: `${dir}.tar`, dockerfile: 'FROM scratch\n', dockerfileName: 'Dockerfile', digests: new ContextDigests(), blocks, bytes };
}

test('the context cache keeps its bound, evicting the least recently used entry nobody holds', async (t) => {
  const work = await tempDir(t, 'berth-ctx-cache-');
  const cache = new ContextCache(join(work, 'contexts'), { entries: 2, bytes: 100 });
  const a = (await cache.adopt(undefined, made(work, 10, ['a'])))!;
  const b = (await cache.adopt(undefined, made(work, 10, ['b'])))!;
  assert.ok(a && b);
  assert.equal(existsSync(a.ctx.dir) && existsSync(a.ctx.body), true, 'moved into the cache dir');
  assert.equal(a.ctx.dir.startsWith(join(work, 'contexts')), true);
  // both held: a third cannot be kept, and the caller keeps its files
  const c = made(work, 10, ['c']);
  assert.equal(await cache.adopt(undefined, c), undefined);
  assert.equal(existsSync(c.dir), true);
  await a.release();
  await b.release();
  assert.equal(await cache.adopt(undefined, made(work, 10, ['b'])), undefined, 'the same body is kept once');
  assert.equal(await cache.adopt(undefined, made(work, 101, ['big'])), undefined, 'too big');
  const held = cache.candidates(undefined); // holds both, a first: b is now the most recently used
  assert.deepEqual(held.map((h) => h.ctx.blocks[0]), ['a', 'b']);
  for (const h of held) await h.release();
  const d = (await cache.adopt(undefined, made(work, 10, ['d'])))!;
  assert.ok(d);
  assert.equal(cache.size, 2);
  assert.deepEqual(cache.candidates(undefined).map((h) => (void h.release(), h.ctx.blocks[0])).sort(), ['b', 'd']);
  assert.deepEqual(cache.candidates('other.Dockerfile'), [], 'entries are per Dockerfile name');
  // clear: idle entries go now, held ones at their release
  await cache.clear();
  assert.equal(cache.size, 0);
  assert.equal(existsSync(d.ctx.dir), true);
  await d.release();
  assert.equal(existsSync(d.ctx.dir), false);
  assert.deepEqual(readdirSync(join(work, 'contexts')), []);
});

test('block digests are taken at fixed offsets, whatever the chunking', () => {
  const data = Buffer.alloc(BODY_BLOCK * 2 + 5, 7);
  const whole = new BlockDigests();
  whole.update(data);
  const bits = new BlockDigests();
  for (let i = 0; i < data.length; i += 65_521) bits.update(data.subarray(i, i + 65_521));
  assert.equal(whole.finish().length, 3);
  assert.deepEqual(bits.finish(), whole.digests);
  assert.notEqual(whole.digests[2], whole.digests[0]);
  assert.equal(new BlockDigests().finish().length, 1, 'an empty body has one empty block');
});
