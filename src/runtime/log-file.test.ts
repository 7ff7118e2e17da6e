import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { formatLogTimestamp, parseLogLine, parseRfc3339Nano, readLogChunks, readLogRecords, type LogRecord } from './log-file.js';
import { removeDir, tempDir } from '../../test/fixtures/runtime.js';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await removeDir(d);
});

async function dir(): Promise<string> {
  const d = await tempDir('berth-log-');
  dirs.push(d);
  return d;
}

async function collect(it: AsyncIterable<LogRecord>): Promise<string[]> {
  const out: string[] = [];
  for await (const r of it) out.push(`${r.stream}:${r.partial ? 'P' : 'F'}:${r.text}`);
  return out;
}

test('RFC 3339 with nanoseconds and offsets', () => {
  const ns = parseRfc3339Nano('2026-11-22T01:57:19.005229612+00:00');
  assert.equal(ns, 1795312639005229612n);
  assert.equal(parseRfc3339Nano('2026-11-22T02:57:19.005229612+01:00'), ns);
  assert.equal(parseRfc3339Nano('2026-11-22T01:57:19.005229612Z'), ns);
  assert.equal(parseRfc3339Nano('2026-11-22T01:57:19Z'), 1795312639000000000n);
  assert.equal(parseRfc3339Nano('yesterday'), undefined);
  assert.equal(formatLogTimestamp(ns ?? 0n), '2026-11-22T01:57:19.005229612Z');
  assert.equal(formatLogTimestamp(1795312639100000000n), '2026-11-22T01:57:19.100000000Z');
  assert.equal(formatLogTimestamp(1795312639000000000n), '2026-11-22T01:57:19.000000000Z');
});

test('parses lines: stream, partial flag, raw bytes including spaces; rejects garbage', () => {
  const r = parseLogLine(Buffer.from('2026-11-22T01:57:19.005229612+00:00 stderr P  two  spaces '));
  assert.equal(r?.stream, 'stderr');
  assert.equal(r?.partial, true);
  assert.equal(r?.text, ' two  spaces ');
  assert.equal(r?.time.toISOString(), '2026-11-22T01:57:19.005Z');
  const empty = parseLogLine(Buffer.from('2026-11-22T01:57:19Z stdout F'));
  assert.equal(empty?.text, '');
  const bin = parseLogLine(Buffer.concat([Buffer.from('2026-11-22T01:57:19Z stdout F '), Buffer.from([0xff, 0x00, 0x01])]));
  assert.deepEqual([...(bin?.data ?? [])], [0xff, 0x00, 0x01]);
  assert.equal(parseLogLine(Buffer.from('2026-11-22T01:57:19Z stdin F x')), undefined);
  assert.equal(parseLogLine(Buffer.from('2026-11-22T01:57:19Z stdout X x')), undefined);
  assert.equal(parseLogLine(Buffer.from('2026-11-22T01:57:19Z stdout Fx')), undefined);
  assert.equal(parseLogLine(Buffer.from('nonsense')), undefined);
});

test('reads a file in small chunks without losing line boundaries; a missing file is empty', async () => {
  const d = await dir();
  const path = join(d, 'c.log');
  const lines = Array.from({ length: 50 }, (_, i) => `2026-11-22T01:57:19.${String(i).padStart(9, '0')}Z ${i % 2 ? 'stderr' : 'stdout'} ${i % 5 ? 'F' : 'P'} line ${i} ${'x'.repeat(i)}`);
  await writeFile(path, lines.join('\n') + '\n');
  const got = await collect(readLogRecords(path, { chunkSize: 7 }));
  assert.equal(got.length, 50);
  assert.equal(got[3], `stderr:F:line 3 xxx`);
  assert.equal(got[5], `stderr:P:line 5 xxxxx`);
  assert.deepEqual(await collect(readLogRecords(join(d, 'none.log'))), []);
});

test('chunks: whole lines; the consumer owns all of a chunk\'s memory; long lines get bigger buffers', async () => {
  const d = await dir();
  const path = join(d, 'c.log');
  const lines = Array.from({ length: 40 }, (_, i) => `2026-11-22T01:57:19Z stdout F ${i} ${'z'.repeat(i * 5)}\n`);
  await writeFile(path, lines.join('') + '2026-11-22T01:57:20Z stdout F unfinished');
  const sizes: number[] = [];
  const allocate = (n: number) => (sizes.push(n), Buffer.alloc(n));
  let got = '';
  for await (const chunk of readLogChunks(path, { chunkSize: 50, allocate })) {
    assert.equal(chunk[chunk.length - 1], 0x0a);
    got += chunk.toString();
    // The consumer may reuse the whole buffer, past the chunk too: the carried line must not live there.
    new Uint8Array(chunk.buffer, chunk.byteOffset).fill(0x21);
  }
  assert.equal(got, lines.join(''));
  assert.ok(sizes.every((n) => n >= 50));
  assert.ok(sizes.some((n) => n > 50), 'a line longer than a chunk gets a bigger buffer');
});

test('follow: new lines, a rotated file, and the end after `until` once drained', async () => {
  const d = await dir();
  const path = join(d, 'c.log');
  await writeFile(path, '2026-11-22T01:00:00Z stdout F one\n');
  let done!: () => void;
  const until = new Promise<void>((r) => (done = r));
  const seen: string[] = [];
  const reader = (async () => {
    for await (const r of readLogRecords(path, { follow: true, until })) seen.push(r.text);
  })();
  await waitFor(() => seen.length === 1);
  await appendFile(path, '2026-11-22T01:00:01Z stdout F two\n2026-11-22T01:00:02Z stdout P thr');
  await waitFor(() => seen.length === 2);
  await appendFile(path, 'ee\n');
  await waitFor(() => seen.length === 3);
  // Rotation as conmon does it: a new file renamed over the old name.
  await writeFile(join(d, 'c.log.tmp'), '2026-11-22T01:00:03Z stderr F four\n');
  await rename(join(d, 'c.log.tmp'), path);
  await waitFor(() => seen.length === 4);
  // Written just before the writer is done: must still be read.
  await appendFile(path, '2026-11-22T01:00:04Z stdout F five\n');
  done();
  await reader;
  assert.deepEqual(seen, ['one', 'two', 'three', 'four', 'five']);
});

test('follow: waits for a file that does not exist yet; abort stops it', async () => {
  const d = await dir();
  const path = join(d, 'later.log');
  const ac = new AbortController();
  const seen: string[] = [];
  const reader = (async () => {
    for await (const r of readLogRecords(path, { follow: true, signal: ac.signal })) seen.push(r.text);
  })();
  await writeFile(path, '2026-11-22T01:00:00Z stdout F hello\n');
  await waitFor(() => seen.length === 1);
  ac.abort();
  await reader;
  assert.deepEqual(seen, ['hello']);
});

/** Waits for a condition driven by fs events; fails the test after 5 s. */
async function waitFor(cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}
