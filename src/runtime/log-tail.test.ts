import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readLogRecords, type LogRecord } from './log-file.js';
import { readLastRecords } from './log-tail.js';
import { removeDir, tempDir } from './test-support.js';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await removeDir(d);
});

const show = (r: LogRecord) => `${r.stream}:${r.partial ? 'P' : 'F'}:${r.text}`;

/** The reference: every record forwards, filtered, the last `count`. */
async function forward(path: string, count: number, keep: (r: LogRecord) => boolean): Promise<string[]> {
  const all: string[] = [];
  for await (const r of readLogRecords(path)) if (keep(r)) all.push(show(r));
  return count <= 0 ? [] : all.slice(-count);
}

const keepers: [string, (r: LogRecord) => boolean][] = [
  ['all', () => true],
  ['stderr', (r) => r.stream === 'stderr'],
  ['none', () => false],
];

test('the last records, as a forward read would give them, whatever the chunk size', async () => {
  const d = await tempDir('berth-tail-');
  dirs.push(d);
  const lines = Array.from({ length: 80 }, (_, i) =>
    i % 17 === 5 ? 'garbage line' : `2026-11-22T01:57:19.${String(i).padStart(9, '0')}Z ${i % 4 ? 'stdout' : 'stderr'} ${i % 6 ? 'F' : 'P'} ${i} ${'q'.repeat((i * 7) % 90)}`,
  );
  const files: [string, string][] = [
    ['whole', lines.join('\n') + '\n'],
    // A line still being written, longer than the small chunks: not a record.
    ['unfinished', lines.join('\n') + '\n2026-11-22T01:58:00Z stdout F ' + 'u'.repeat(300)],
    ['no newline at all', '2026-11-22T01:58:00Z stdout F only'],
    ['empty lines', '\n\n' + lines.slice(0, 3).join('\n') + '\n\n'],
    ['empty', ''],
  ];
  for (const [name, text] of files) {
    const path = join(d, `${name.replace(/ /g, '-')}.log`);
    await writeFile(path, text);
    for (const chunkSize of [1, 7, 64, 100, 4096]) {
      for (const count of [0, 1, 3, 20, 79, 1000]) {
        for (const [kname, keep] of keepers) {
          const got = (await readLastRecords(path, count, keep, { chunkSize })).map(show);
          assert.deepEqual(got, await forward(path, count, keep), `${name}, chunk ${chunkSize}, last ${count}, ${kname}`);
        }
      }
    }
  }
  assert.deepEqual(await readLastRecords(join(d, 'missing.log'), 5, () => true), []);
});
