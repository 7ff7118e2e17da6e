import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { closeSync, fsyncSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MappedFile, readAhead } from './mapped-file.js';
import { loadLibc } from './libc.js';
import { tempDir } from '../../test/fixtures/tar.js';

test('MappedFile compares bytes at an offset with a file just written (so in the page cache)', async (t) => {
  const dir = await tempDir(t, 'berth-mapped-');
  const data = randomBytes(3 * 4096 + 100);
  writeFileSync(join(dir, 'body'), data);
  const m = MappedFile.openResident(join(dir, 'body'));
  assert.ok(m, 'mapped');
  try {
    assert.equal(m.size, data.length);
    assert.equal(m.equals(0, data), true);
    m.populate();
    assert.equal(m.equals(5000, data.subarray(5000, 9000)), true);
    assert.equal(m.equals(data.length, Buffer.alloc(0)), true);
    const changed = Buffer.from(data.subarray(5000, 9000));
    changed[3999]! ^= 1;
    assert.equal(m.equals(5000, changed), false, 'one bit differs');
    assert.equal(m.equals(5001, data.subarray(5000, 9000)), false, 'shifted by a byte');
    assert.equal(m.equals(data.length - 10, data.subarray(0, 11)), false, 'past the end');
  } finally {
    m.close();
    m.close();
  }
  assert.throws(() => m.equals(0, data.subarray(0, 1)), /after close/);
});

test('MappedFile maps no empty or missing file', async (t) => {
  const dir = await tempDir(t, 'berth-mapped-');
  writeFileSync(join(dir, 'empty'), '');
  assert.equal(MappedFile.openResident(join(dir, 'empty')), undefined);
  assert.equal(MappedFile.openResident(join(dir, 'missing')), undefined);
});

test('MappedFile maps no file whose pages the kernel dropped from the page cache; readAhead brings them back', async (t) => {
  const c = loadLibc();
  if (!c) return t.skip('libc is not callable');
  if (execFileSync('stat', ['-f', '-c', '%T', tmpdir()]).toString().trim() === 'tmpfs') return t.skip('tmpfs keeps its pages');
  const fadvise = c.lib.func('int posix_fadvise(int fd, intptr_t off, intptr_t len, int advice)');
  const dir = await tempDir(t, 'berth-mapped-');
  const path = join(dir, 'body');
  writeFileSync(path, randomBytes(64 * 1024));
  const fd = openSync(path, 'r+');
  try {
    fsyncSync(fd); // only clean pages can be dropped
    assert.equal(fadvise(fd, 0, 0, 4 /* POSIX_FADV_DONTNEED */), 0);
  } finally {
    closeSync(fd);
  }
  const m = MappedFile.openResident(path);
  m?.close();
  assert.equal(m, undefined);
  // read ahead on request, the file maps again
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(MappedFile.openResident(path), undefined, 'a refusal reads nothing back');
  readAhead(path);
  let again: MappedFile | undefined;
  for (let i = 0; i < 100 && !again; i++) {
    await new Promise((r) => setTimeout(r, 20));
    again = MappedFile.openResident(path);
  }
  again?.close();
  assert.ok(again, 'resident again after the read-ahead');
});
