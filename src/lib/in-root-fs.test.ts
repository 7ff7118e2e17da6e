import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, closeSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mkdirAllInRoot, readFileInRoot, resolveInRoot, statInRoot, useOpenat2ForTests, InRootError } from './in-root-fs.js';

for (const mode of ['openat2', 'walk'] as const) {
  describe(`in-root file access (${mode})`, () => {
    let base: string;
    let root: string;
    let outside: string;
    before(() => {
      useOpenat2ForTests(mode === 'openat2');
      base = mkdtempSync(join(tmpdir(), 'berth-inroot-'));
      root = join(base, 'root');
      outside = join(base, 'outside');
      mkdirSync(join(root, 'etc'), { recursive: true });
      mkdirSync(join(root, 'usr/share'), { recursive: true });
      mkdirSync(outside);
      writeFileSync(join(outside, 'secret'), 'host secret\n');
      writeFileSync(join(root, 'usr/share/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
      writeFileSync(join(root, 'secret'), 'in-root secret\n');
      symlinkSync('../usr/share/passwd', join(root, 'etc/passwd'));
      execFileSync('mkfifo', [join(root, 'etc/fifo')]);
      mkdirSync(join(root, 'etc/dir'));
      symlinkSync('/dev/zero', join(root, 'etc/zero'));
      symlinkSync(join(outside, 'secret'), join(root, 'etc/abs-out'));
      symlinkSync('../../../../../../../../secret', join(root, 'etc/rel-out'));
      symlinkSync('loop2', join(root, 'etc/loop1'));
      symlinkSync('loop1', join(root, 'etc/loop2'));
      writeFileSync(join(root, 'etc/huge'), Buffer.alloc(64 * 1024, 'x'));
      symlinkSync(outside, join(root, 'work'));
    });
    after(() => {
      useOpenat2ForTests(true);
      rmSync(base, { recursive: true, force: true });
    });

    it('reads a regular file through a symlink that stays inside the root', async () => {
      assert.equal((await readFileInRoot(root, '/etc/passwd'))?.toString(), 'root:x:0:0:root:/root:/bin/sh\n');
    });

    it('answers undefined for a missing file and refuses a FIFO, a directory and a device without blocking', async () => {
      assert.equal(await readFileInRoot(root, '/etc/missing'), undefined);
      assert.equal(await readFileInRoot(root, '/etc/passwd/x'), undefined);
      await assert.rejects(readFileInRoot(root, '/etc/fifo'), (err: InRootError) => err.code === 'ENOTREG' && /not a regular file/.test(err.message));
      await assert.rejects(readFileInRoot(root, '/etc/dir'), (err: InRootError) => err.code === 'EISDIR');
      // /dev/zero resolves inside the root, where there is no such device.
      assert.equal(await readFileInRoot(root, '/etc/zero'), undefined);
      mkdirSync(join(root, 'dev'));
      execFileSync('mknod', [join(root, 'dev/zero'), 'c', '1', '5']);
      try {
        await assert.rejects(readFileInRoot(root, '/etc/zero'), (err: InRootError) => err.code === 'ENOTREG');
      } finally {
        rmSync(join(root, 'dev'), { recursive: true });
      }
    });

    it('keeps absolute and relative links inside the root', async () => {
      assert.equal(await readFileInRoot(root, '/etc/abs-out'), undefined, 'the host path, taken inside the root, does not exist');
      assert.equal((await readFileInRoot(root, '/etc/rel-out'))?.toString(), 'in-root secret\n');
      assert.equal((await readFileInRoot(root, '../../../secret'))?.toString(), 'in-root secret\n');
    });

    it('refuses link loops and files over the cap', async () => {
      await assert.rejects(readFileInRoot(root, '/etc/loop1'), (err: InRootError) => err.code === 'ELOOP');
      await assert.rejects(readFileInRoot(root, '/etc/huge', { maxBytes: 1024 }), (err: InRootError) => err.code === 'EFBIG');
      assert.equal((await readFileInRoot(root, '/etc/huge', { maxBytes: 64 * 1024 }))?.length, 64 * 1024);
    });

    it('stats with and without following the last link', async () => {
      assert.ok((await statInRoot(root, '/etc/passwd'))?.isFile());
      assert.ok((await statInRoot(root, '/etc/passwd', { followLast: false }))?.isSymbolicLink());
      assert.equal(await statInRoot(root, '/nope'), undefined);
      const fd = await resolveInRoot(root, '/');
      closeSync(fd);
    });

    it('creates directories inside the root, even through a link that names a host path', async () => {
      await mkdirAllInRoot(root, '/work/a/b', { mode: 0o750 });
      assert.equal(existsSync(join(outside, 'a')), false, 'nothing created outside');
      assert.ok(lstatSync(join(root, outside, 'a/b')).isDirectory());
      assert.equal(lstatSync(join(root, outside, 'a/b')).mode & 0o777, 0o750);
      await mkdirAllInRoot(root, '/etc/dir/sub');
      assert.ok(lstatSync(join(root, 'etc/dir/sub')).isDirectory());
      await assert.rejects(mkdirAllInRoot(root, '/secret/x'), (err: InRootError) => err.code === 'ENOTDIR');
      await assert.rejects(mkdirAllInRoot(root, '/etc/fifo/x'), (err: InRootError) => err.code === 'ENOTDIR');
      assert.equal(readFileSync(join(outside, 'secret'), 'utf8'), 'host secret\n');
    });
  });
}
