import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import tarStream from 'tar-stream';
import { sha256Of } from '../lib/digest.js';
import { diffTar } from './layer-diff.js';
import { LayerStore } from './layer-store.js';
import { getXattr, listTree, setXattr, tempDir } from '../../test/fixtures/tar.js';

const T = new Date(1_650_000_000_000);

async function collect(r: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

async function tarNames(tar: Buffer): Promise<string[]> {
  const ex = tarStream.extract();
  const names: string[] = [];
  const done = (async () => {
    for await (const e of ex) {
      names.push(`${e.header.type}:${e.header.name}${e.header.type === 'link' || e.header.type === 'symlink' ? ' -> ' + e.header.linkname : ''}`);
      e.resume();
    }
  })();
  ex.end(tar);
  await done;
  return names;
}

/** An overlay upper dir, made by hand the way overlayfs would leave it. */
async function buildUpper(upper: string): Promise<void> {
  await fs.mkdir(join(upper, 'etc'), { mode: 0o755 });
  await fs.writeFile(join(upper, 'etc/hosts'), 'changed hosts\n');
  await fs.chown(join(upper, 'etc/hosts'), 101, 102);
  await fs.chmod(join(upper, 'etc/hosts'), 0o640);
  await fs.mkdir(join(upper, 'bin'));
  await fs.writeFile(join(upper, 'bin/tool'), 'x'.repeat(70_000));
  await fs.chmod(join(upper, 'bin/tool'), 0o4755);
  await fs.link(join(upper, 'bin/tool'), join(upper, 'bin/tool-alias'));
  await fs.symlink('../etc/hosts', join(upper, 'bin/hosts-link'));
  execFileSync('mknod', ['-m', '0644', join(upper, 'bin/pipe'), 'p']);
  // Whiteout of a lower file, and an opaque dir replacing a lower one.
  execFileSync('mknod', [join(upper, 'etc/removed'), 'c', '0', '0']);
  await fs.mkdir(join(upper, 'var'));
  await fs.mkdir(join(upper, 'var/cache'), { mode: 0o700 });
  setXattr(join(upper, 'var/cache'), 'trusted.overlay.opaque', Buffer.from('y'));
  await fs.writeFile(join(upper, 'var/cache/new'), 'fresh');
  // xattrs: one to keep (binary), one overlay-internal to drop.
  setXattr(join(upper, 'bin/tool'), 'user.bin', Buffer.from([0, 0xff, 0x80]));
  setXattr(join(upper, 'etc/hosts'), 'trusted.overlay.origin', Buffer.from('junk'));
  const long = join(upper, 'd'.repeat(90), 'é'.repeat(30) + '.txt');
  await fs.mkdir(join(upper, 'd'.repeat(90)));
  await fs.writeFile(long, 'unicode and long');
  for (const p of ['etc/hosts', 'bin/tool', 'var/cache/new', 'var/cache', 'var', 'etc', 'bin', 'd'.repeat(90)]) await fs.utimes(join(upper, p), T, T);
  await fs.lutimes(join(upper, 'bin/hosts-link'), T, T);
}

test('diffTar writes whiteouts, opaque markers, hardlinks and xattrs in sorted order', async (t) => {
  const base = await tempDir(t);
  const upper = join(base, 'upper');
  await fs.mkdir(upper);
  await buildUpper(upper);
  const tar = await collect(diffTar(upper));
  assert.equal(tar.length % 512, 0);
  const names = await tarNames(tar);
  assert.deepEqual(names, [
    'directory:bin/',
    'symlink:bin/hosts-link -> ../etc/hosts',
    'fifo:bin/pipe',
    'file:bin/tool',
    'link:bin/tool-alias -> bin/tool',
    'directory:' + 'd'.repeat(90) + '/',
    'file:' + 'd'.repeat(90) + '/' + 'é'.repeat(30) + '.txt',
    'directory:etc/',
    'file:etc/hosts',
    'file:etc/.wh.removed',
    'directory:var/',
    'directory:var/cache/',
    'file:var/cache/.wh..wh..opq',
    'file:var/cache/new',
  ]);
  // GNU tar reads it too (PAX names, links, xattrs).
  const listed = execFileSync('tar', ['--xattrs', '-tf', '-'], { input: tar }).toString().trim().split('\n');
  assert.equal(listed.length, names.length);
  // Same tree, same bytes.
  assert.deepEqual(await collect(diffTar(upper)), tar);
});

test('diffTar round trip: unpacking the diff recreates the upper dir as a lower layer', async (t) => {
  const base = await tempDir(t);
  const upper = join(base, 'upper');
  await fs.mkdir(upper);
  await buildUpper(upper);
  const tar = await collect(diffTar(upper));
  const store = new LayerStore(join(base, 'root'), { sync: false });
  const diffId = sha256Of(tar);
  await store.unpack(diffId, diffId, Readable.from([tar]));
  const dir = store.diffDir(diffId);

  assert.deepEqual(await listTree(dir), await listTree(upper));
  for (const p of await listTree(upper)) {
    const a = await fs.lstat(join(upper, p));
    const b = await fs.lstat(join(dir, p));
    // Whiteouts only need to be 0/0 character devices; their mode is not carried.
    if (!a.isCharacterDevice()) assert.equal(b.mode, a.mode, `${p} mode`);
    else assert.ok(b.isCharacterDevice(), `${p} is a whiteout`);
    assert.deepEqual([b.uid, b.gid, b.rdev], [a.uid, a.gid, a.rdev], `${p} owner/rdev`);
    if (a.isFile()) assert.deepEqual(await fs.readFile(join(dir, p)), await fs.readFile(join(upper, p)), `${p} content`);
    if (!a.isCharacterDevice() && !a.isFIFO()) assert.equal(b.mtimeMs, Math.floor(a.mtimeMs / 1000) * 1000, `${p} mtime`);
  }
  assert.equal((await fs.lstat(join(dir, 'bin/tool'))).ino, (await fs.lstat(join(dir, 'bin/tool-alias'))).ino);
  assert.ok((await fs.lstat(join(dir, 'etc/removed'))).isCharacterDevice());
  assert.deepEqual(getXattr(join(dir, 'var/cache'), 'trusted.overlay.opaque'), Buffer.from('y'));
  assert.deepEqual(getXattr(join(dir, 'bin/tool'), 'user.bin'), Buffer.from([0, 0xff, 0x80]));
  assert.equal(getXattr(join(dir, 'etc/hosts'), 'trusted.overlay.origin'), undefined);
  assert.equal(await fs.readlink(join(dir, 'bin/hosts-link')), '../etc/hosts');
});

test('diffTar of an empty upper dir is an empty archive', async (t) => {
  const upper = await tempDir(t);
  const tar = await collect(diffTar(upper));
  assert.deepEqual(tar, Buffer.alloc(1024));
  assert.deepEqual(await tarNames(tar), []);
});

test('diffTar refuses upper dirs that rely on overlay redirects', async (t) => {
  const upper = await tempDir(t);
  await fs.mkdir(join(upper, 'renamed'));
  setXattr(join(upper, 'renamed'), 'trusted.overlay.redirect', Buffer.from('/original'));
  await assert.rejects(collect(diffTar(upper)), /redirect/);
});
