import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import { join } from 'node:path';
import { readXattrsTree, readXattrsTreeWithGetfattr } from '../images/fs-special.js';
import { readXattrSync, readXattrsSync, xattrsAvailable } from './xattrs.js';
import { setXattr, tempDir } from '../../test/fixtures/tar.js';

// security.capability, revision 2, effective, permitted cap_net_raw.
const CAP_NET_RAW = Buffer.from('0100000200200000000000000000000000000000', 'hex');

type Tree = Map<string, [string, Buffer][]>;
const asObject = (m: Tree) => Object.fromEntries([...m].sort(([a], [b]) => (a < b ? -1 : 1)).map(([p, l]) => [p, l.map(([n, v]) => [n, v.toString('hex')])]));

/** A tree with user.*, trusted.* and security.* xattrs on files, directories and symlinks, odd names included. */
async function buildTree(root: string): Promise<void> {
  setXattr(root, 'user.root', Buffer.from('top'));
  await fs.mkdir(join(root, 'opaque dir'));
  setXattr(join(root, 'opaque dir'), 'trusted.overlay.opaque', Buffer.from('y'));
  setXattr(join(root, 'opaque dir'), 'user.dir', Buffer.alloc(0));
  await fs.writeFile(join(root, 'opaque dir', 'tool'), 'x');
  setXattr(join(root, 'opaque dir', 'tool'), 'security.capability', CAP_NET_RAW);
  setXattr(join(root, 'opaque dir', 'tool'), 'user.bin', Buffer.from([0, 0xff, 0x80, 0x0a, 0x3d]));
  setXattr(join(root, 'opaque dir', 'tool'), 'user.a', Buffer.from('"quoted"\n'));
  setXattr(join(root, 'opaque dir', 'tool'), 'trusted.overlay.origin', Buffer.from('junk'));
  await fs.writeFile(join(root, 'caf\u00e9\tnew\nline\\x'), '');
  setXattr(join(root, 'caf\u00e9\tnew\nline\\x'), 'user.big', Buffer.alloc(3000, 0xab));
  await fs.writeFile(join(root, 'plain'), 'no xattrs');
  // A symlink's own xattrs (trusted.* only: the kernel refuses user.* on links), never its target's.
  await fs.symlink('opaque dir/tool', join(root, 'link'));
  setXattr(join(root, 'link'), 'trusted.overlay.redirect', Buffer.from('/elsewhere'));
  await fs.symlink('opaque dir', join(root, 'dir-link'));
  await fs.symlink('missing', join(root, 'dangling'));
  await fs.mkdir(join(root, 'a/b/c'), { recursive: true });
  setXattr(join(root, 'a/b/c'), 'trusted.overlay.opaque', Buffer.from('y'));
}

test('the in-process xattr reader gives what getfattr -R -d gives, names, binary values and links included', async (t) => {
  assert.ok(xattrsAvailable(), 'libc is callable through koffi on this host');
  const root = await tempDir(t, 'berth-xattrs-');
  await buildTree(root);
  const all = () => true;
  const ours = await readXattrsTree(root, all);
  const theirs = await readXattrsTreeWithGetfattr(root, all);
  assert.deepEqual(asObject(ours), asObject(theirs));
  // The comparison is not vacuous: every kind of entry is there.
  assert.equal(ours.get(root)?.[0]?.[0], 'user.root');
  assert.deepEqual(ours.get(join(root, 'opaque dir', 'tool'))?.map(([n]) => n), ['security.capability', 'trusted.overlay.origin', 'user.a', 'user.bin']);
  assert.deepEqual(ours.get(join(root, 'opaque dir', 'tool'))?.[0]?.[1], CAP_NET_RAW);
  assert.deepEqual(ours.get(join(root, 'link')), [['trusted.overlay.redirect', Buffer.from('/elsewhere')]]);
  assert.equal(ours.get(join(root, 'caf\u00e9\tnew\nline\\x'))?.[0]?.[1].length, 3000);
  assert.equal(ours.has(join(root, 'dir-link')), false, 'a link to a directory is not followed');
  assert.equal(ours.has(join(root, 'plain')), false);

  const keep = (n: string) => !n.startsWith('trusted.overlay.') || n === 'trusted.overlay.opaque';
  assert.deepEqual(asObject(await readXattrsTree(root, keep)), asObject(await readXattrsTreeWithGetfattr(root, keep)));
});

test('single reads: a missing attribute or file is undefined; listing a missing file throws ENOENT', async (t) => {
  const root = await tempDir(t, 'berth-xattrs-');
  await buildTree(root);
  assert.deepEqual(readXattrSync(join(root, 'a/b/c'), 'trusted.overlay.opaque'), Buffer.from('y'));
  assert.equal(readXattrSync(join(root, 'a/b'), 'trusted.overlay.opaque'), undefined);
  assert.equal(readXattrSync(join(root, 'nope'), 'trusted.overlay.opaque'), undefined);
  assert.deepEqual(readXattrsSync(join(root, 'plain')), []);
  assert.throws(() => readXattrsSync(join(root, 'nope')), { code: 'ENOENT' });
  await assert.rejects(readXattrsTree(join(root, 'nope'), () => true), /ENOENT/);
});
