import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { frameLogChunk, type FrameOptions } from '../../src/api/log-frames.js';
import { parseLogLine, readLogChunks, readLogRecords } from '../../src/runtime/log-file.js';
import { removeDir, tempDir } from '../fixtures/runtime.js';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await removeDir(d);
});

const FRAMED: FrameOptions = { stdout: true, stderr: true, framed: true };

/** Splits a stdcopy stream into [type, payload] frames; fails on a torn frame. */
function frames(b: Buffer): [number, string][] {
  const out: [number, string][] = [];
  let i = 0;
  while (i < b.length) {
    assert.ok(i + 8 <= b.length, 'torn header');
    assert.deepEqual([...b.subarray(i + 1, i + 4)], [0, 0, 0]);
    const len = b.readUInt32BE(i + 4);
    assert.ok(len > 0, 'empty frame');
    assert.ok(i + 8 + len <= b.length, 'torn payload');
    out.push([b[i]!, b.toString('latin1', i + 8, i + 8 + len)]);
    i += 8 + len;
  }
  return out;
}

/** What the record path (parseLogLine) makes of the same lines: runs of one stream, as frames. */
function expected(lines: Buffer[], opts: FrameOptions): [number, string][] {
  const out: [number, string][] = [];
  for (const line of lines) {
    const rec = parseLogLine(line);
    if (!rec || !(rec.stream === 'stdout' ? opts.stdout : opts.stderr)) continue;
    const text = rec.data.toString('latin1') + (rec.partial ? '' : '\n');
    if (!text) continue;
    const type = rec.stream === 'stdout' ? 1 : 2;
    const last = out[out.length - 1];
    if (last && (last[0] === type || !opts.framed)) last[1] += text;
    else out.push([opts.framed ? type : 0, text]);
  }
  return out;
}

function run(lines: Buffer[], opts: FrameOptions): [number, string][] {
  const chunk = Buffer.concat(lines.flatMap((l) => [l, Buffer.from('\n')]));
  const out = frameLogChunk(chunk, opts);
  if (opts.framed) return frames(out);
  return out.length ? [[0, out.toString('latin1')]] : [];
}

const T = '2026-11-22T01:57:19.005229612+00:00';

test('frames: prefixes dropped, F keeps its newline, P joins, one frame per run of a stream', () => {
  const lines = [`${T} stdout F one`, `${T} stdout P tw`, `${T} stdout F o`, `${T} stderr F err`, `${T} stderr P  `, `${T} stderr P `, `${T} stdout F`, `${T} stdout P`].map((l) => Buffer.from(l));
  assert.deepEqual(run(lines, FRAMED), [
    [1, 'one\ntwo\n'],
    [2, 'err\n '],
    [1, '\n'],
  ]);
  assert.deepEqual(run(lines, { stdout: true, stderr: true, framed: false }), [[0, 'one\ntwo\nerr\n \n']]);
  assert.deepEqual(run(lines, { stdout: false, stderr: true, framed: true }), [[2, 'err\n ']]);
  assert.deepEqual(run(lines, { stdout: true, stderr: false, framed: true }), [[1, 'one\ntwo\n\n']]);
  // Only an empty P: nothing at all, not an empty frame.
  assert.equal(frameLogChunk(Buffer.from(`${T} stdout P\n`), FRAMED).length, 0);
});

test('frames: malformed lines are skipped, exactly those parseLogLine rejects', () => {
  const lines = [
    'nonsense',
    '',
    `${T} stdin F x`,
    `${T} stdout X x`,
    `${T} stdout Fx`,
    `${T}  stdout F x`,
    `${T} stdoutF x`,
    `${T} stdout F`,
    `2026-11-22T01:57:1 stdout F short time`,
    `2026-11-22 01:57:19 stdout F space in time`,
    `2026-11-22T01:57:1/ stdout F slash for a digit`,
    `2026-11-22T01:57:1: stdout F colon for a digit`,
    `2026/11/22T01:57:19 stdout F slashes`,
    `\u0000026-11-22T01:57:19 stdout F nul`,
    `2026-11-22T01:57:19 stdout F plain`,
    `2026-11-22T01:57:19junk stdout F junk after the time`,
    `2026-11-22T01:57:19Z stderr P \u00ff binary`,
    `${T} stderr F a\rb`,
    `${T} stdout P`,
    `${T} stdout F trailing `,
    'x'.repeat(40),
  ].map((l) => Buffer.from(l, 'latin1'));
  for (const opts of [FRAMED, { stdout: true, stderr: true, framed: false }, { stdout: false, stderr: true, framed: true }]) {
    assert.deepEqual(run(lines, opts), expected(lines, opts));
  }
});

test('frames: random lines agree with parseLogLine', () => {
  // A fixed-seed generator: failures reproduce.
  let seed = 42;
  const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed % n);
  const pieces = [T, '2026-11-22T01:57:19Z', '2026-11-22T01:57', ' ', '  ', 'stdout', 'stderr', 'stdo', 'F', 'P', 'X', 'payload', '\u00e9', '\r', '0'];
  for (let round = 0; round < 200; round++) {
    const lines: Buffer[] = [];
    for (let i = 0; i < 30; i++) {
      let s: string;
      if (rand(3) === 0) s = Array.from({ length: rand(8) }, () => pieces[rand(pieces.length)]).join('');
      else s = `${rand(2) ? T : '2026-11-22T01:57:19Z'} ${rand(2) ? 'stdout' : 'stderr'} ${rand(3) ? 'F' : 'P'}${rand(4) ? ' ' + 'p'.repeat(rand(5)) + pieces[rand(pieces.length)] : ''}`;
      lines.push(Buffer.from(s, 'latin1'));
    }
    const opts = { stdout: rand(4) !== 0, stderr: rand(4) !== 0, framed: rand(2) === 0 };
    assert.deepEqual(run(lines, opts), expected(lines, opts), `round ${round}`);
  }
});

test('chunks: every read cut after a newline, whatever the chunk size; framed output as the records say', async () => {
  const d = await tempDir('berth-frames-');
  dirs.push(d);
  const path = join(d, 'c.log');
  const lines = Array.from({ length: 60 }, (_, i) => `2026-11-22T01:57:19.${String(i).padStart(9, '0')}Z ${i % 3 ? 'stdout' : 'stderr'} ${i % 7 ? 'F' : 'P'} line ${i} ${'y'.repeat(i * 3)}`);
  // An unfinished last line (the writer is mid-record) is not handed out.
  await writeFile(path, lines.join('\n') + '\n' + lines[0]!.slice(0, 20));
  let want = '';
  for await (const r of readLogRecords(path)) want += r.text + (r.partial ? '' : '\n');
  for (const chunkSize of [1, 5, 29, 64, 1000, 1 << 20]) {
    let got = '';
    let n = 0;
    for await (const chunk of readLogChunks(path, { chunkSize })) {
      assert.equal(chunk[chunk.length - 1], 0x0a, `chunk ends a line (size ${chunkSize})`);
      n++;
      for (const [, text] of frames(frameLogChunk(chunk, FRAMED))) got += text;
    }
    assert.equal(got, want, `chunk size ${chunkSize}`);
    if (chunkSize === 1 << 20) assert.equal(n, 1);
  }
});
