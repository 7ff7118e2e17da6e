import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { MediaType } from '../lib/oci.js';
import { ContentStore } from './content-store.js';
import { decompressLayer } from './decompress.js';
import { sha256Of, type Digest } from '../lib/digest.js';
import { isKind } from '../lib/errors.js';
import { LayerStore, chainIds } from './layer-store.js';
import { encodeEntryHeader } from './tar-format.js';
import { getXattr, listTree, makeTar, tempDir, type FixtureEntry, type RawPiece } from '../../test/fixtures/tar.js';

const T0 = new Date(1_500_000_000_000);
const T1 = new Date(1_600_000_000_000);
const sec = (d: Date) => d.getTime() / 1000;

async function unpackTar(store: LayerStore, tar: Buffer, diffId: Digest = sha256Of(tar)) {
  const chain = sha256Of('chain:' + diffId + Math.random());
  // Odd-sized chunks: headers and PAX records straddle chunk boundaries.
  const parts: Buffer[] = [];
  for (let i = 0; i < tar.length; i += 333) parts.push(tar.subarray(i, i + 333));
  const r = await store.unpack(chain, diffId, Readable.from(parts));
  return { chain, dir: store.diffDir(chain), size: r.size };
}

async function layerDirs(root: string): Promise<string[]> {
  return fs.readdir(join(root, 'layers'));
}

test('chainIds follows the OCI definition', () => {
  const a = sha256Of('a');
  const b = sha256Of('b');
  const c = sha256Of('c');
  const ab = sha256Of(`${a} ${b}`);
  assert.deepEqual(chainIds([a, b, c]), [a, ab, sha256Of(`${ab} ${c}`)]);
  assert.deepEqual(chainIds([]), []);
});

test('every entry type is unpacked with owners, modes, times and xattrs', async (t) => {
  const root = await tempDir(t);
  const store = new LayerStore(root, { sync: false });
  const long = 'deep/' + 'x'.repeat(120) + '/file-with-a-long-name.txt';
  const binary = Buffer.from([0xff, 0x00, 0x80, 0xc3, 0x28]);
  const tar = await makeTar([
    { name: './', type: 'directory', mode: 0o755, mtime: T0 },
    { name: 'dir/', type: 'directory', mode: 0o1777, uid: 1234, gid: 5678, mtime: T0 },
    { name: 'dir/setuid', data: 'binary', mode: 0o4755, uid: 1000, gid: 1000, mtime: T1 },
    { name: 'dir/link', type: 'link', linkname: 'dir/setuid' },
    { name: 'dir/sym', type: 'symlink', linkname: '/etc/passwd', uid: 7, gid: 8, mtime: T1 },
    { name: 'dir/fifo', type: 'fifo', mode: 0o640, uid: 3, gid: 4, mtime: T1 },
    { name: 'implicit/parent/file', data: 'x' },
    { name: '/absolute', data: 'taken as relative' },
    { name: long, data: 'long' },
    { name: 'xattr-text', data: '', pax: { 'SCHILY.xattr.user.note': 'hello world' } },
    { name: 'odd name\nwith \\ and é', data: '', pax: { 'SCHILY.xattr.user.odd': 'v' } },
    { raw: encodeEntryHeader({ name: 'xattr-binary', type: 'file', mode: 0o600, uid: 0, gid: 0, size: 0, mtime: sec(T1) }, [['SCHILY.xattr.user.bin', binary]]) },
    { raw: encodeEntryHeader({ name: 'big-ids', type: 'file', mode: 0o644, uid: 3_000_000, gid: 4_000_000, size: 0, mtime: sec(T1) }) },
    { name: 'dup', data: 'first' },
    { name: 'dup', data: 'second wins' },
  ] as (FixtureEntry | RawPiece)[]);
  const { dir, size } = await unpackTar(store, tar);
  assert.equal(size, 'binary'.length + 1 + 'taken as relative'.length + 4 + 'second wins'.length);

  const d = await fs.lstat(join(dir, 'dir'));
  assert.ok(d.isDirectory());
  assert.equal(d.mode & 0o7777, 0o1777);
  assert.deepEqual([d.uid, d.gid], [1234, 5678]);
  assert.equal(d.mtimeMs, T0.getTime(), 'directory mtime is set after its contents');
  assert.equal((await fs.lstat(dir)).mtimeMs, T0.getTime());

  const f = await fs.lstat(join(dir, 'dir/setuid'));
  assert.equal(f.mode & 0o7777, 0o4755, 'setuid survives chown');
  assert.deepEqual([f.uid, f.gid, f.mtimeMs, f.nlink], [1000, 1000, T1.getTime(), 2]);
  assert.equal((await fs.lstat(join(dir, 'dir/link'))).ino, f.ino);
  assert.equal(await fs.readFile(join(dir, 'dir/link'), 'utf8'), 'binary');

  const s = await fs.lstat(join(dir, 'dir/sym'));
  assert.ok(s.isSymbolicLink());
  assert.equal(await fs.readlink(join(dir, 'dir/sym')), '/etc/passwd');
  assert.deepEqual([s.uid, s.gid, s.mtimeMs], [7, 8, T1.getTime()]);

  const p = await fs.lstat(join(dir, 'dir/fifo'));
  assert.ok(p.isFIFO());
  assert.deepEqual([p.mode & 0o7777, p.uid, p.gid, p.mtimeMs], [0o640, 3, 4, T1.getTime()]);

  assert.equal(await fs.readFile(join(dir, 'implicit/parent/file'), 'utf8'), 'x');
  assert.equal(await fs.readFile(join(dir, 'absolute'), 'utf8'), 'taken as relative');
  assert.equal(await fs.readFile(join(dir, long), 'utf8'), 'long');
  assert.equal(await fs.readFile(join(dir, 'dup'), 'utf8'), 'second wins');
  assert.deepEqual(getXattr(join(dir, 'xattr-text'), 'user.note'), Buffer.from('hello world'));
  assert.deepEqual(getXattr(join(dir, 'odd name\nwith \\ and é'), 'user.odd'), Buffer.from('v'));
  assert.deepEqual(getXattr(join(dir, 'xattr-binary'), 'user.bin'), binary, 'binary xattr values survive');
  const big = await fs.lstat(join(dir, 'big-ids'));
  assert.deepEqual([big.uid, big.gid], [3_000_000, 4_000_000]);
  assert.deepEqual(await layerDirs(root), [(await store.list())[0]!.slice(7)]);
});

test('OCI whiteouts become overlay whiteouts and opaque dirs', async (t) => {
  const root = await tempDir(t);
  const store = new LayerStore(root, { sync: false });
  const tar = await makeTar([
    { name: 'etc/', type: 'directory', mode: 0o755, mtime: T0 },
    { name: 'etc/.wh.gone', data: '' },
    { name: 'var/', type: 'directory', mode: 0o700, mtime: T0 },
    { name: 'var/.wh..wh..opq', data: '' },
    { name: 'var/kept', data: 'k' },
    { name: '.wh..wh.plnk', type: 'directory' },
    { name: '.wh.toplevel', data: '' },
    { name: '.wh.back', data: '' },
    { name: 'back/again', data: 'a later entry wins over a whiteout' },
  ]);
  const { dir } = await unpackTar(store, tar);
  assert.deepEqual(await listTree(dir), ['back', 'back/again', 'etc', 'etc/gone', 'toplevel', 'var', 'var/kept']);
  for (const w of ['etc/gone', 'toplevel']) {
    const st = await fs.lstat(join(dir, w));
    assert.ok(st.isCharacterDevice(), `${w} is a character device`);
    assert.equal(st.rdev, 0, `${w} is 0/0`);
  }
  assert.deepEqual(getXattr(join(dir, 'var'), 'trusted.overlay.opaque'), Buffer.from('y'));
  assert.equal(getXattr(join(dir, 'etc'), 'trusted.overlay.opaque'), undefined);
  assert.equal((await fs.lstat(join(dir, 'etc'))).mtimeMs, T0.getTime(), 'whiteouts do not disturb the dir mtime');
  assert.equal((await fs.lstat(join(dir, 'var'))).mode & 0o777, 0o700);
});

test('symlinks (created in the thread pool) land in tar order, replacing and replaced', async (t) => {
  const root = await tempDir(t);
  const store = new LayerStore(root, { sync: false });
  const entries: FixtureEntry[] = [{ name: 'bin/', type: 'directory' }];
  for (let i = 0; i < 40; i++) entries.push({ name: `bin/a${i}`, type: 'symlink', linkname: 'busybox', uid: 3, gid: 4, mtime: T1 });
  entries.push(
    { name: 'bin/a3', type: 'symlink', linkname: 'other' }, // a symlink replaces a symlink
    { name: 'file', data: 'x' },
    { name: 'file', type: 'symlink', linkname: 'bin' }, // a symlink replaces a file
    { name: 'dir/inner/', type: 'directory' },
    { name: 'dir', type: 'symlink', linkname: 'bin' }, // and a directory made here
    { name: 'bin/a5', data: 'a file again' }, // a file replaces a symlink
    { name: 'bin/a6/x', data: 'through a symlink' }, // refused: its parent is a symlink
  );
  await assert.rejects(unpackTar(store, await makeTar(entries)), /parent "bin\/a6" is a symlink/);

  const ok = await unpackTar(store, await makeTar(entries.slice(0, -1)));
  assert.equal(await fs.readlink(join(ok.dir, 'bin/a0')), 'busybox');
  assert.equal(await fs.readlink(join(ok.dir, 'bin/a39')), 'busybox');
  assert.equal(await fs.readlink(join(ok.dir, 'bin/a3')), 'other');
  assert.equal(await fs.readlink(join(ok.dir, 'file')), 'bin');
  assert.equal(await fs.readlink(join(ok.dir, 'dir')), 'bin');
  assert.equal(await fs.readFile(join(ok.dir, 'bin/a5'), 'utf8'), 'a file again');
  const st = await fs.lstat(join(ok.dir, 'bin/a20'));
  assert.deepEqual([st.uid, st.gid, st.mtimeMs], [3, 4, T1.getTime()]);
  assert.equal(ok.size, 'a file again'.length);
});

test('xattrs that would steer overlayfs are dropped', async (t) => {
  const root = await tempDir(t);
  const store = new LayerStore(root, { sync: false });
  const tar = await makeTar([{ name: 'd/', type: 'directory', pax: { 'SCHILY.xattr.trusted.overlay.redirect': '/elsewhere', 'SCHILY.xattr.user.ok': '1' } }]);
  const { dir } = await unpackTar(store, tar);
  assert.equal(getXattr(join(dir, 'd'), 'trusted.overlay.redirect'), undefined);
  assert.deepEqual(getXattr(join(dir, 'd'), 'user.ok'), Buffer.from('1'));
});

test('a diffID mismatch fails and leaves no layer behind', async (t) => {
  const root = await tempDir(t);
  const store = new LayerStore(root, { sync: false });
  const tar = await makeTar([{ name: 'a', data: 'a' }]);
  const chain = sha256Of('c');
  await assert.rejects(store.unpack(chain, sha256Of('other'), Readable.from([tar])), (err: unknown) => {
    assert.ok(isKind(err, 'invalid-argument'), String(err));
    assert.match((err as Error).message, /verification failed/);
    return true;
  });
  assert.equal(await store.has(chain), false);
  assert.deepEqual(await layerDirs(root), []);
});

test('truncated and garbage tars fail cleanly', async (t) => {
  const root = await tempDir(t);
  const store = new LayerStore(root, { sync: false });
  const tar = await makeTar([{ name: 'a', data: Buffer.alloc(5000, 1) }]);
  const cut = tar.subarray(0, 2048);
  const invalid = (err: unknown) => isKind(err, 'invalid-argument') && /invalid layer tar/.test((err as Error).message);
  await assert.rejects(store.unpack(sha256Of('c1'), sha256Of(cut), Readable.from([cut])), invalid);
  const junk = Buffer.alloc(4096, 0x41);
  await assert.rejects(store.unpack(sha256Of('c2'), sha256Of(junk), Readable.from([junk])), invalid);
  assert.deepEqual(await layerDirs(root), []);
});

test('parallel and repeated unpacks of one chainID are safe', async (t) => {
  const root = await tempDir(t);
  const store = new LayerStore(root, { sync: false });
  const files: FixtureEntry[] = [];
  for (let i = 0; i < 300; i++) files.push({ name: `d${i % 7}/f${i}`, data: `content ${i}`.repeat(i) });
  const tar = await makeTar(files);
  const diffId = sha256Of(tar);
  const chain = chainIds([sha256Of('base'), diffId])[1]!;
  const results = await Promise.all([1, 2, 3].map(() => store.unpack(chain, diffId, Readable.from([tar]))));
  assert.equal(new Set(results.map((r) => r.size)).size, 1);
  assert.deepEqual(await layerDirs(root), [chain.slice(7)]);
  assert.equal(await fs.readFile(join(store.diffDir(chain), 'd3/f10'), 'utf8'), 'content 10'.repeat(10));
  // Already there: the stream is drained and the recorded size returned.
  const again = Readable.from([tar]);
  assert.deepEqual(await store.unpack(chain, diffId, again), results[0]);
  assert.equal(await store.size(chain), results[0]!.size);

  await fs.mkdir(join(root, 'layers', '.tmp-leftover'));
  await store.cleanTemp();
  assert.deepEqual(await layerDirs(root), [chain.slice(7)]);
  await store.remove(chain);
  await store.remove(chain);
  assert.equal(await store.has(chain), false);
  assert.deepEqual(await layerDirs(root), []);
});

test('hostile layers are refused and write nothing outside the layer', async (t) => {
  const base = await tempDir(t);
  const root = join(base, 'root');
  const sentinel = join(base, 'sentinel');
  // diff/a → ../../../../sentinel climbs diff, .tmp-x, layers and root.
  const up = '../../../../sentinel';
  const cases: [string, FixtureEntry[], RegExp][] = [
    ['parent dir name', [{ name: '../x', data: 'x' }], /"\.\."/],
    ['.. in the middle', [{ name: 'a/../../x', data: 'x' }], /"\.\."/],
    ['write through an absolute symlink', [{ name: 'a', type: 'symlink', linkname: sentinel }, { name: 'a/pwned', data: 'x' }], /symlink/],
    ['write through a relative escaping symlink', [{ name: 'a', type: 'symlink', linkname: up }, { name: 'a/pwned', data: 'x' }], /symlink/],
    ['mkdir through a symlink', [{ name: 'a', type: 'symlink', linkname: sentinel }, { name: 'a/sub/', type: 'directory' }], /symlink/],
    ['whiteout through a symlink', [{ name: 'a', type: 'symlink', linkname: sentinel }, { name: 'a/.wh.victim', data: '' }], /symlink/],
    ['symlink through a symlink', [{ name: 'a', type: 'symlink', linkname: up }, { name: 'a/s', type: 'symlink', linkname: '/' }], /symlink/],
    ['hardlink to /etc/passwd', [{ name: 'h', type: 'link', linkname: '/etc/passwd' }], /hardlink target/],
    ['hardlink climbing out', [{ name: 'h', type: 'link', linkname: '../../../../sentinel/victim' }], /"\.\."/],
    ['hardlink through a symlink', [{ name: 'a', type: 'symlink', linkname: sentinel }, { name: 'h', type: 'link', linkname: 'a/victim' }], /hardlink target/],
    ['hardlink to a directory', [{ name: 'd/', type: 'directory' }, { name: 'h', type: 'link', linkname: 'd' }], /directory/],
    ['character device', [{ name: 'dev/null', type: 'character-device', devmajor: 1, devminor: 3 }], /device/],
    ['block device', [{ name: 'sda', type: 'block-device', devmajor: 8, devminor: 0 }], /device/],
    ['whiteout of ..', [{ name: 'a/.wh...', data: '' }], /"\.\."|whiteout/],
  ];
  const store = new LayerStore(root, { sync: false });
  for (const [what, entries, why] of cases) {
    await fs.rm(sentinel, { recursive: true, force: true });
    await fs.mkdir(sentinel);
    await fs.writeFile(join(sentinel, 'victim'), 'untouched');
    const tar = await makeTar(entries);
    const chain = sha256Of(what);
    await assert.rejects(store.unpack(chain, sha256Of(tar), Readable.from([tar])), (err: unknown) => {
      assert.ok(isKind(err, 'invalid-argument'), `${what}: ${String(err)}`);
      assert.match((err as Error).message, /refusing layer entry/, what);
      assert.match((err as Error).message, why, what);
      return true;
    });
    assert.deepEqual(await fs.readdir(sentinel), ['victim'], what);
    const v = await fs.lstat(join(sentinel, 'victim'));
    assert.equal(v.nlink, 1, `${what}: no hardlink to the victim`);
    assert.equal(await fs.readFile(join(sentinel, 'victim'), 'utf8'), 'untouched', what);
    assert.deepEqual(await fs.readdir(base), ['root', 'sentinel'], what);
    assert.deepEqual(await layerDirs(root), [], `${what}: temp dir removed`);
    assert.equal(await store.has(chain), false);
  }
});

test('pull path: one read of a gzip blob both stores it and unpacks it', async (t) => {
  const root = await tempDir(t);
  const content = new ContentStore(root);
  const layers = new LayerStore(root, { sync: false });
  const tar = await makeTar([{ name: 'etc/os-release', data: 'ID=berth\n' }]);
  const gz = gzipSync(tar);
  const diffId = sha256Of(tar);

  const w = content.writer(sha256Of(gz), gz.length);
  Readable.from([gz.subarray(0, 10), gz.subarray(10)]).pipe(w);
  await layers.unpack(diffId, diffId, decompressLayer(MediaType.ociLayerGzip, w));
  assert.deepEqual(await content.readBuffer(sha256Of(gz)), gz);
  assert.equal(await fs.readFile(join(layers.diffDir(diffId), 'etc/os-release'), 'utf8'), 'ID=berth\n');

  // A blob that does not match its descriptor fails its write and keeps no blob, and the unpack that
  // reads it fails too when it has not finished first. Both are listened to from the start, as the
  // pull does (layer-transfer.ts): one CI run saw the writer's error reach no listener here (an
  // uncaught exception), which of the two streams it came through is not known.
  const tar2 = await makeTar([{ name: 'x', data: 'other' }]);
  const gz2 = gzipSync(tar2);
  const w2 = content.writer(sha256Of('not this blob'), gz2.length);
  const refused = new Promise<Error>((resolve) => w2.once('error', resolve));
  Readable.from([gz2]).pipe(w2);
  const diff2 = sha256Of(tar2);
  const tar2Stream = decompressLayer(MediaType.ociLayerGzip, w2);
  tar2Stream.on('error', () => {});
  const unpacked = layers.unpack(diff2, diff2, tar2Stream).then(() => undefined, (err: Error) => err);
  assert.match((await refused).message, /verification failed/);
  const unpackErr = await unpacked;
  if (unpackErr) {
    assert.match(unpackErr.message, /verification failed/);
    assert.equal(await layers.has(diff2), false);
  }
  assert.deepEqual(await content.list(), [sha256Of(gz)]);
});

test('overlayfs reads stacked layers as intended: whiteouts hide, opaque dirs reset', async (t) => {
  const root = await tempDir(t);
  const store = new LayerStore(root, { sync: false });
  const base = await makeTar([
    { name: 'etc/gone', data: 'old' },
    { name: 'etc/kept', data: 'kept' },
    { name: 'var/cache/old', data: 'old' },
  ]);
  const top = await makeTar([
    { name: 'etc/.wh.gone', data: '' },
    { name: 'var/cache/.wh..wh..opq', data: '' },
    { name: 'var/cache/new', data: 'new' },
  ]);
  const [c1, c2] = chainIds([sha256Of(base), sha256Of(top)]) as [Digest, Digest];
  await store.unpack(c1, sha256Of(base), Readable.from([base]));
  await store.unpack(c2, sha256Of(top), Readable.from([top]));
  const mnt = join(root, 'mnt');
  await fs.mkdir(mnt);
  execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${store.diffDir(c2)}:${store.diffDir(c1)}`, mnt]);
  try {
    assert.deepEqual(await listTree(mnt), ['etc', 'etc/kept', 'var', 'var/cache', 'var/cache/new']);
  } finally {
    execFileSync('umount', [mnt]);
  }
});

test('unpackComputed names a layer by the digest it streams (commit)', async (t) => {
  const root = await tempDir(t);
  const store = new LayerStore(root, { sync: false });
  const tar = await makeTar([{ name: 'new-file', data: 'committed' }]);
  const parent = sha256Of('parent chain');
  const r = await store.unpackComputed(parent, Readable.from([tar]));
  assert.equal(r.diffId, sha256Of(tar));
  assert.equal(r.chainId, chainIds([parent, r.diffId])[1]);
  assert.deepEqual([r.size, r.tarSize], ['committed'.length, tar.length]);
  assert.equal(await fs.readFile(join(store.diffDir(r.chainId), 'new-file'), 'utf8'), 'committed');
  // The same diff again: the stored layer is reused.
  assert.deepEqual(await store.unpackComputed(parent, Readable.from([tar])), r);
  assert.deepEqual(await layerDirs(root), [r.chainId.slice(7)]);
});
