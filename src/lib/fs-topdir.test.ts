import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { markTopDir } from './fs-topdir.js';

const fsType = (dir: string) => execFileSync('stat', ['-f', '-c', '%T', dir]).toString().trim();
/** The flags as e2fsprogs' lsattr reads them (independent of the code under test). */
const hasTopDirFlag = (dir: string) => (execFileSync('lsattr', ['-d', dir]).toString().split(' ')[0] ?? '').includes('T');

test('markTopDir sets ext4 TOPDIR on a directory, leaves its subdirectories alone, and is idempotent', { skip: !/^ext[234]/.test(fsType(tmpdir())) && `${tmpdir()} is not ext2/3/4` }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-topdir-'));
  try {
    const sub = join(dir, 'layer');
    mkdirSync(sub);
    assert.equal(hasTopDirFlag(dir), false);
    assert.equal(markTopDir(dir), true);
    assert.equal(hasTopDirFlag(dir), true);
    assert.equal(markTopDir(dir), true, 'already set');
    assert.equal(hasTopDirFlag(dir), true);
    mkdirSync(join(dir, 'later'));
    assert.equal(hasTopDirFlag(join(dir, 'later')), false, 'not inherited');
    assert.equal(hasTopDirFlag(sub), false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('markTopDir answers false on a file system without the flag (tmpfs), and throws for a missing directory', { skip: fsType('/dev/shm') !== 'tmpfs' && '/dev/shm is not tmpfs' }, () => {
  const dir = mkdtempSync('/dev/shm/berth-topdir-');
  try {
    assert.equal(markTopDir(dir), false);
    assert.throws(() => markTopDir(join(dir, 'missing')), /ENOENT/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
