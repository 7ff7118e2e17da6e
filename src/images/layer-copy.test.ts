import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { copyUpperToLayer, NotCopyable } from './layer-copy.js';
import { diffTar } from './layer-diff.js';
import { LayerStore } from './layer-store.js';
import { setXattr, tempDir } from '../../test/fixtures/tar.js';

const T = new Date(1_650_000_000_700); // a fraction of a second: the layer keeps whole seconds
// security.capability, revision 2, effective, permitted cap_net_raw: chown would drop it.
const CAP_NET_RAW = Buffer.from('0100000200200000000000000000000000000000', 'hex');

async function collect(r: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

/** An overlay upper dir with every kind of entry, made by hand the way overlayfs leaves them. */
async function buildUpper(upper: string): Promise<void> {
  const w = (p: string, data: string | Buffer) => fs.writeFile(join(upper, p), data);
  setXattr(upper, 'trusted.overlay.opaque', Buffer.from('y'));
  await fs.mkdir(join(upper, 'etc'), { mode: 0o755 });
  await w('etc/hosts', 'changed hosts\n');
  await fs.chown(join(upper, 'etc/hosts'), 101, 102);
  await fs.chmod(join(upper, 'etc/hosts'), 0o640);
  setXattr(join(upper, 'etc/hosts'), 'trusted.overlay.origin', Buffer.from('junk'));
  await w('etc/hostname', ''); // a runtime mount point, left out by the caller's skip
  execFileSync('mknod', [join(upper, 'etc/removed'), 'c', '0', '0']);
  await fs.mkdir(join(upper, 'bin'));
  await w('bin/tool', randomBytes(70_000));
  await fs.chmod(join(upper, 'bin/tool'), 0o4755);
  setXattr(join(upper, 'bin/tool'), 'user.bin', Buffer.from([0, 0xff, 0x80]));
  setXattr(join(upper, 'bin/tool'), 'security.capability', CAP_NET_RAW);
  await fs.link(join(upper, 'bin/tool'), join(upper, 'bin/tool-alias'));
  await fs.symlink('../etc/hosts', join(upper, 'bin/hosts-link'));
  execFileSync('mknod', ['-m', '0644', join(upper, 'bin/pipe'), 'p']);
  // Large files go through the kernel copy: exactly one chunk, several chunks with padding.
  await fs.mkdir(join(upper, 'data'), { mode: 0o750 });
  await fs.chown(join(upper, 'data'), 1000, 1000);
  setXattr(join(upper, 'data'), 'user.dir', Buffer.from('on a dir'));
  await w('data/big1', randomBytes(1024 * 1024));
  await w('data/big2', randomBytes(3 * 1024 * 1024 + 123));
  await fs.link(join(upper, 'data/big2'), join(upper, 'data/big2-link'));
  await w('data/mid', randomBytes(200_000));
  await fs.chown(join(upper, 'data/mid'), 1000, 1000);
  await fs.chmod(join(upper, 'data/mid'), 0o600);
  setXattr(join(upper, 'data/mid'), 'user.mid', Buffer.from('x'.repeat(300)));
  await w('data/empty', '');
  await fs.mkdir(join(upper, 'tmp'));
  await fs.chmod(join(upper, 'tmp'), 0o1777);
  await fs.mkdir(join(upper, 'locked'), { mode: 0o000 });
  await fs.writeFile(join(upper, 'locked/inside'), 'behind a mode-0 dir');
  await fs.mkdir(join(upper, 'var/cache'), { recursive: true, mode: 0o700 });
  setXattr(join(upper, 'var/cache'), 'trusted.overlay.opaque', Buffer.from('y'));
  await w('var/cache/new', 'fresh');
  await fs.mkdir(join(upper, 'd'.repeat(90)));
  await w(join('d'.repeat(90), 'é'.repeat(30) + '.txt'), 'unicode and long');
  for (const p of await listAll(upper)) {
    const st = await fs.lstat(join(upper, p));
    if (st.isSymbolicLink()) await fs.lutimes(join(upper, p), T, T);
    else if (!st.isCharacterDevice()) await fs.utimes(join(upper, p), T, T);
  }
}

async function listAll(dir: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  for (const d of await fs.readdir(rel ? join(dir, rel) : dir, { withFileTypes: true })) {
    const r = rel ? `${rel}/${d.name}` : d.name;
    if (d.isDirectory()) out.push(...(await listAll(dir, r)));
    out.push(r);
  }
  return out.sort();
}

/**
 * Everything a lower layer's meaning depends on, one line per path: type, mode, owner, size,
 * mtime (not for whiteouts, made at unpack time), device, which paths share an inode, content
 * digest and every xattr (read with getfattr, independent of the code under test).
 */
async function describe(dir: string): Promise<string[]> {
  const inodes = new Map<number, string>();
  const xattrs = execFileSync('getfattr', ['-R', '-P', '-h', '-d', '-m', '-', '-e', 'hex', '--absolute-names', '--', dir]).toString();
  const lines: string[] = [];
  const rootX = xattrDump(xattrs, dir);
  lines.push(`. ${rootX}`);
  for (const p of await listAll(dir)) {
    const abs = join(dir, p);
    const st = await fs.lstat(abs);
    const first = inodes.get(st.ino);
    if (first === undefined) inodes.set(st.ino, p);
    const type = st.isDirectory() ? 'dir' : st.isFile() ? 'file' : st.isSymbolicLink() ? `symlink->${await fs.readlink(abs)}` : st.isFIFO() ? 'fifo' : st.isCharacterDevice() ? 'chr' : 'other';
    const time = st.isCharacterDevice() ? '' : String(st.mtimeMs); // atime: reading here moves it
    const data = st.isFile() ? createHash('sha256').update(await fs.readFile(abs)).digest('hex').slice(0, 16) : '';
    lines.push(`${p} ${type} ${st.mode.toString(8)} ${st.uid}:${st.gid} ${st.isFile() ? st.size : ''} ${time} ${st.rdev} ${first ?? ''} ${data} ${xattrDump(xattrs, abs)}`);
  }
  return lines;
}

function xattrDump(dump: string, abs: string): string {
  const block = dump.split('\n\n').find((b) => b.startsWith(`# file: ${abs}\n`));
  return block ? block.split('\n').slice(1).filter(Boolean).sort().join(',') : '';
}

const skipHostname = { skip: (rel: string) => rel === 'etc/hostname' };

test('copyUpperToLayer stores what unpacking the diff tar stores, under the same diffID', async (t) => {
  const base = await tempDir(t);
  const upper = join(base, 'upper');
  await fs.mkdir(upper);
  await buildUpper(upper);
  const tar = await collect(diffTar(upper, skipHostname));

  const viaTar = new LayerStore(join(base, 'tar'), { sync: false });
  const a = await viaTar.unpackComputed(undefined, Readable.from([tar]));
  const viaCopy = new LayerStore(join(base, 'copy'), { sync: false });
  const b = await viaCopy.buildComputed(undefined, (dir) => copyUpperToLayer(upper, dir, skipHostname));

  assert.equal(b.diffId, a.diffId);
  assert.equal(b.chainId, a.chainId);
  assert.equal(b.tarSize, tar.length);
  assert.equal(b.size, a.size);
  assert.equal(b.size, 70_000 + 1024 * 1024 + 3 * 1024 * 1024 + 123 + 200_000 + 'changed hosts\n'.length + 'fresh'.length + 'unicode and long'.length + 'behind a mode-0 dir'.length);
  const want = await describe(viaTar.diffDir(a.chainId));
  const got = await describe(viaCopy.diffDir(b.chainId));
  assert.deepEqual(got, want);
  // The description is not vacuous: the things most easily lost are in it.
  const line = (p: string) => got.find((l) => l.startsWith(`${p} `)) ?? '';
  assert.match(line('bin/tool'), / 104755 0:0 70000 1650000000000 .*security\.capability=0x0100000200200000000000000000000000000000/);
  assert.match(line('bin/tool-alias'), / bin\/tool /);
  assert.match(line('data/big2-link'), / data\/big2 /);
  assert.match(line('etc/removed'), /^etc\/removed chr 20000 0:0 {3}0 /);
  assert.match(line('var/cache'), /trusted\.overlay\.opaque=0x79/);
  assert.match(line('.'), /trusted\.overlay\.opaque=0x79/);
  assert.match(line('data'), /^data dir 40750 1000:1000 .*user\.dir=/);
  assert.ok(!got.some((l) => l.startsWith('etc/hostname ') || l.includes('origin')));
  assert.deepEqual(await fs.readdir(join(base, 'copy', 'layers')), [b.chainId.slice('sha256:'.length)]);
  // The same tree again: the stored layer is kept, the second copy thrown away.
  const again = await viaCopy.buildComputed(undefined, (dir) => copyUpperToLayer(upper, dir, skipHostname));
  assert.deepEqual([again.chainId, again.size], [b.chainId, b.size]);
  assert.deepEqual(await fs.readdir(join(base, 'copy', 'layers')), [b.chainId.slice('sha256:'.length)]);
});

test('copyUpperToLayer of an empty upper dir hashes an empty archive', async (t) => {
  const base = await tempDir(t);
  const upper = join(base, 'upper');
  await fs.mkdir(upper);
  await fs.mkdir(join(base, 'dest'));
  const r = await copyUpperToLayer(upper, join(base, 'dest'));
  assert.deepEqual(r, { diffId: `sha256:${createHash('sha256').update(Buffer.alloc(1024)).digest('hex')}`, tarSize: 1024, size: 0 });
  assert.deepEqual(await fs.readdir(join(base, 'dest')), []);
});

test('copyUpperToLayer hands names unpacking reads as whiteouts to the tar path, leaving nothing behind', async (t) => {
  const base = await tempDir(t);
  const upper = join(base, 'upper');
  await fs.mkdir(join(upper, 'a'), { recursive: true });
  await fs.mkdir(join(upper, 'b'));
  // Sorted after a file whose kernel copy is then still running.
  await fs.writeFile(join(upper, 'a/big'), randomBytes(8 * 1024 * 1024));
  await fs.writeFile(join(upper, 'b/.wh.looks-deleted'), 'a real file');
  const store = new LayerStore(join(base, 'root'), { sync: false });
  await assert.rejects(store.buildComputed(undefined, (dir) => copyUpperToLayer(upper, dir)), NotCopyable);
  assert.deepEqual(await fs.readdir(join(base, 'root', 'layers')), []);
});
