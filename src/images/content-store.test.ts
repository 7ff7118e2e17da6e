import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough, Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { sha256Of } from '../lib/digest.js';
import { BerthError, isKind } from '../lib/errors.js';
import { ContentStore } from './content-store.js';
import { tempDir } from '../../test/fixtures/tar.js';

const body = Buffer.from('{"hello":"blob"}'.repeat(5000));
const D = sha256Of(body);

function chunks(buf: Buffer, n = 4096): Readable {
  const parts: Buffer[] = [];
  for (let i = 0; i < buf.length; i += n) parts.push(buf.subarray(i, i + n));
  return Readable.from(parts);
}

async function leftovers(root: string): Promise<{ blobs: string[]; ingest: string[] }> {
  return { blobs: await fs.readdir(join(root, 'blobs', 'sha256')), ingest: await fs.readdir(join(root, 'ingest')) };
}

test('ingest stores a blob under its digest, read-only, and reads it back', async (t) => {
  const root = await tempDir(t);
  const store = new ContentStore(root);
  assert.equal(await store.has(D), false);
  assert.deepEqual(await store.ingest(D, chunks(body), body.length), { size: body.length });
  assert.equal(await store.has(D), true);
  assert.equal(await store.size(D), body.length);
  assert.deepEqual(await store.readBuffer(D), body);
  assert.deepEqual(await store.list(), [D]);
  assert.equal((await fs.stat(store.path(D))).mode & 0o777, 0o444);
  const read: Buffer[] = [];
  for await (const c of store.createReadStream(D)) read.push(c as Buffer);
  assert.deepEqual(Buffer.concat(read), body);
  assert.deepEqual((await leftovers(root)).ingest, []);
  // Same blob again: fine, nothing changes.
  await store.ingest(D, chunks(body));
  assert.deepEqual(await store.list(), [D]);
});

test('a wrong digest leaves nothing in blobs/ or ingest/', async (t) => {
  const root = await tempDir(t);
  const store = new ContentStore(root);
  const wrong = sha256Of('something else');
  await assert.rejects(store.ingest(wrong, chunks(body)), (err: unknown) => {
    assert.ok(isKind(err, 'invalid-argument'), String(err));
    assert.match((err as Error).message, /verification failed/);
    return true;
  });
  assert.deepEqual(await leftovers(root), { blobs: [], ingest: [] });
});

test('a wrong size fails: too long fails early, too short at the end', async (t) => {
  const root = await tempDir(t);
  const store = new ContentStore(root);
  let pulled = 0;
  const endless = new Readable({
    read() {
      pulled += 1;
      this.push(Buffer.alloc(64 * 1024, 1));
    },
  });
  await assert.rejects(store.ingest(D, endless, 100), (err: unknown) => isKind(err, 'invalid-argument'));
  assert.ok(pulled < 10, `stopped early (read ${pulled} chunks)`);
  await assert.rejects(store.ingest(D, chunks(body), body.length + 1), (err: unknown) => isKind(err, 'invalid-argument'));
  assert.deepEqual(await leftovers(root), { blobs: [], ingest: [] });
});

test('a failing source removes the temp file', async (t) => {
  const root = await tempDir(t);
  const store = new ContentStore(root);
  const src = new PassThrough();
  const p = store.ingest(D, src);
  src.write(body.subarray(0, 1000));
  setTimeout(() => src.destroy(new Error('connection reset')), 20);
  await assert.rejects(p, /connection reset/);
  assert.deepEqual(await leftovers(root), { blobs: [], ingest: [] });
});

test('two ingests of the same blob in parallel both succeed', async (t) => {
  const root = await tempDir(t);
  const store = new ContentStore(root);
  const results = await Promise.all([store.ingest(D, chunks(body, 1000)), store.ingest(D, chunks(body, 777)), store.ingest(D, chunks(body))]);
  for (const r of results) assert.equal(r.size, body.length);
  assert.deepEqual(await store.readBuffer(D), body);
  assert.deepEqual(await leftovers(root), { blobs: [D.slice(7)], ingest: [] });
});

test('writer() tees: the consumer gets every byte and the blob is committed before its end', async (t) => {
  const root = await tempDir(t);
  const store = new ContentStore(root);
  const w = store.writer(D, body.length);
  const got: Buffer[] = [];
  let committedAtEnd = false;
  const consumer = new Writable({
    write(chunk: Buffer, _e, cb) {
      got.push(chunk);
      cb();
    },
    final(cb) {
      store.has(D).then((h) => {
        committedAtEnd = h;
        cb();
      }, cb);
    },
  });
  await pipeline(chunks(body), w, consumer);
  assert.deepEqual(Buffer.concat(got), body);
  assert.equal(committedAtEnd, true);
  assert.equal(w.digest, D);
});

test('destroying a writer mid-way removes its temp file', async (t) => {
  const root = await tempDir(t);
  const store = new ContentStore(root);
  const w = store.writer(D);
  w.resume();
  w.write(body.subarray(0, 5000));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal((await leftovers(root)).ingest.length, 1);
  w.destroy();
  await new Promise((r) => w.once('close', r));
  assert.deepEqual(await leftovers(root), { blobs: [], ingest: [] });
});

test('writeBuffer, missing blobs, delete and cleanIngest', async (t) => {
  const root = await tempDir(t);
  const store = new ContentStore(root);
  const d = await store.writeBuffer('{"a":1}');
  assert.equal(d, sha256Of('{"a":1}'));
  assert.equal((await store.readBuffer(d)).toString(), '{"a":1}');
  assert.equal(await store.writeBuffer('{"a":1}'), d);

  const missing = sha256Of('missing');
  assert.equal(await store.size(missing), undefined);
  await assert.rejects(store.readBuffer(missing), (err: unknown) => isKind(err, 'not-found'));
  const rs = store.createReadStream(missing);
  await assert.rejects(async () => {
    for await (const _ of rs) void _;
  }, (err: unknown) => err instanceof BerthError && err.kind === 'not-found');

  await store.delete(d);
  await store.delete(d);
  assert.equal(await store.has(d), false);
  assert.throws(() => store.path('sha256:nothex' as never), (err: unknown) => isKind(err, 'invalid-argument'));

  await fs.writeFile(join(root, 'ingest', 'leftover'), 'x');
  await store.cleanIngest();
  assert.deepEqual((await leftovers(root)).ingest, []);
});
