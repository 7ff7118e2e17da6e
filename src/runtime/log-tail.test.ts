import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readLogRecords, type LogRecord, type LogStream } from './log-file.js';
import { readLastLines } from './log-tail.js';
import { removeDir, tempDir } from '../../test/fixtures/runtime.js';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await removeDir(d);
});

const show = (r: LogRecord) => `${r.stream}:${r.partial ? 'P' : 'F'}:${r.text}`;

/**
 * The reference, read forwards: every kept record joins its stream's open line, an F record ends
 * it; the last `count` lines by where they end, their records in file order.
 */
async function forward(files: string[], count: number, keep: (r: LogRecord) => boolean): Promise<string[]> {
  const recs: { rec: string; line: number }[] = [];
  const lineEnds: number[] = [];
  const openLine = new Map<LogStream, number>();
  for (const f of files) {
    for await (const r of readLogRecords(f)) {
      if (!keep(r)) continue;
      let line = openLine.get(r.stream);
      if (line === undefined) {
        line = lineEnds.length;
        lineEnds.push(0);
        openLine.set(r.stream, line);
      }
      lineEnds[line] = recs.length;
      recs.push({ rec: show(r), line });
      if (!r.partial) openLine.delete(r.stream);
    }
  }
  if (count <= 0) return [];
  const wanted = new Set(lineEnds.map((end, line) => ({ end, line })).sort((a, b) => a.end - b.end).slice(-count).map((l) => l.line));
  return recs.filter((r) => wanted.has(r.line)).map((r) => r.rec);
}

const keepers: [string, (r: LogRecord) => boolean][] = [
  ['all', () => true],
  ['stderr', (r) => r.stream === 'stderr'],
  ['none', () => false],
];

const record = (i: number, stream: string, pf: string, text: string) => `2026-11-22T01:57:19.${String(i).padStart(9, '0')}Z ${stream} ${pf} ${text}`;

test('the last lines, as a forward read would give them, whatever the chunk size', async () => {
  const d = await tempDir('berth-tail-');
  dirs.push(d);
  const lines = Array.from({ length: 80 }, (_, i) =>
    i % 17 === 5 ? 'garbage line' : record(i, i % 4 ? 'stdout' : 'stderr', i % 6 ? 'F' : 'P', `${i} ${'q'.repeat((i * 7) % 90)}`),
  );
  // A line cut by rotation: its P records end the older file, its F record begins the newer one.
  const older = [record(90, 'stderr', 'F', 'e-whole'), record(91, 'stderr', 'P', 'e-be'), record(92, 'stdout', 'F', 'o1'), record(93, 'stderr', 'P', 'gin')];
  const newer = [record(94, 'stdout', 'F', 'o2'), record(95, 'stderr', 'F', ''), record(96, 'stderr', 'F', 'e-last'), record(97, 'stdout', 'P', 'prompt> ')];
  const sets: [string, string[]][] = [
    ['whole', [lines.join('\n') + '\n']],
    // A line still being written, longer than the small chunks: not a record.
    ['unfinished', [lines.join('\n') + '\n2026-11-22T01:58:00Z stdout F ' + 'u'.repeat(300)]],
    ['no newline at all', ['2026-11-22T01:58:00Z stdout F only']],
    ['empty lines', ['\n\n' + lines.slice(0, 3).join('\n') + '\n\n']],
    ['empty', ['']],
    ['rotated', [lines.join('\n') + '\n', older.join('\n') + '\n', newer.join('\n') + '\n']],
    ['rotated, oldest missing', ['', older.join('\n') + '\n', newer.join('\n') + '\n']],
  ];
  for (const [name, texts] of sets) {
    const paths: string[] = [];
    for (const [i, text] of texts.entries()) {
      const path = join(d, `${name.replace(/\W/g, '-')}.${i}.log`);
      if (text || !name.includes('missing')) await writeFile(path, text);
      paths.push(path);
    }
    for (const chunkSize of [1, 7, 64, 100, 4096]) {
      for (const count of [0, 1, 2, 3, 20, 79, 1000]) {
        for (const [kname, keep] of keepers) {
          const got = (await readLastLines(paths, count, keep, { chunkSize })).map(show);
          assert.deepEqual(got, await forward(paths, count, keep), `${name}, chunk ${chunkSize}, last ${count}, ${kname}`);
        }
      }
    }
  }
  assert.deepEqual(await readLastLines([join(d, 'missing.log')], 5, () => true), []);
});

test('a line cut by rotation comes out whole', async () => {
  const d = await tempDir('berth-tail-');
  dirs.push(d);
  const older = join(d, 'c.log.1');
  const newer = join(d, 'c.log');
  await writeFile(older, [record(1, 'stderr', 'F', 'e1'), record(2, 'stderr', 'P', 'e2'), record(3, 'stdout', 'F', 'o3')].join('\n') + '\n');
  await writeFile(newer, [record(4, 'stderr', 'F', ''), record(5, 'stderr', 'F', 'e5')].join('\n') + '\n');
  const stderr = (r: LogRecord) => r.stream === 'stderr';
  assert.deepEqual((await readLastLines([older, newer], 2, stderr)).map(show), ['stderr:P:e2', 'stderr:F:', 'stderr:F:e5']);
  assert.deepEqual((await readLastLines([older, newer], 1, stderr)).map(show), ['stderr:F:e5']);
});
