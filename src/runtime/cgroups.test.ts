import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cgroupDirs, controllerDir, detectCgroupLayout, fixHybridLayout, parseCgroupLayout, type CgroupLayout } from './cgroups.js';
import { removeDir, tempDir } from '../../test/fixtures/runtime.js';

const HYBRID = `25 20 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:24 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
28 25 0:25 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
29 25 0:26 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
`;
const V2 = `30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`;
const V1 = `26 25 0:23 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
27 25 0:24 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`;

test('recognizes v2, v1 and hybrid layouts', () => {
  const v2 = parseCgroupLayout(V2);
  assert.equal(v2.kind, 'v2');
  assert.equal(v2.unified, '/sys/fs/cgroup');
  assert.deepEqual(cgroupDirs(v2, '/berth/x'), ['/sys/fs/cgroup/berth/x']);
  assert.equal(controllerDir(v2, 'memory', '/berth/x'), '/sys/fs/cgroup/berth/x');

  const v1 = parseCgroupLayout(V1);
  assert.equal(v1.kind, 'v1');
  assert.equal(v1.unified, undefined);
  assert.equal(controllerDir(v1, 'pids', '/berth/x'), '/sys/fs/cgroup/pids/berth/x');

  const h = parseCgroupLayout(HYBRID);
  assert.equal(h.kind, 'hybrid');
  assert.equal(h.unified, '/sys/fs/cgroup/unified');
  assert.deepEqual(h.v1.get('/sys/fs/cgroup/systemd'), ['name=systemd']);
  assert.equal(controllerDir(h, 'cpuacct', '/b/1'), '/sys/fs/cgroup/cpu,cpuacct/b/1');
  // The runtime creates the path in every hierarchy, the unified one included.
  assert.deepEqual(cgroupDirs(h, '/b/1'), [
    '/sys/fs/cgroup/cpu/b/1',
    '/sys/fs/cgroup/memory/b/1',
    '/sys/fs/cgroup/systemd/b/1',
    '/sys/fs/cgroup/cpu,cpuacct/b/1',
    '/sys/fs/cgroup/unified/b/1',
  ]);
});

test('detects this host', () => {
  const l = detectCgroupLayout();
  assert.ok(['v1', 'v2', 'hybrid'].includes(l.kind));
  if (l.kind !== 'v2') assert.ok(l.v1.size > 0);
  else assert.ok(l.unified);
});

test('hybrid fix: mounts controllers left on cgroup2 as v1 hierarchies, reports failures', async (t) => {
  const dir = await tempDir('berth-cg-');
  t.after(() => removeDir(dir));
  const unified = join(dir, 'unified');
  await mkdir(unified);
  const fake: CgroupLayout = { kind: 'hybrid', v1: new Map(), unified };

  await writeFile(join(unified, 'cgroup.controllers'), 'nosuchcontroller\n');
  const bad = await fixHybridLayout(fake, dir);
  assert.deepEqual(bad.mounted, []);
  assert.equal(bad.failed[0]?.controller, 'nosuchcontroller');
  assert.ok((bad.failed[0]?.error.length ?? 0) > 0);

  // The real mount command, where it cannot disturb anything: hugetlb is already a v1 hierarchy on
  // this host after init, and a v1 hierarchy may be mounted at a second place.
  const host = detectCgroupLayout();
  if (![...host.v1.values()].some((c) => c.includes('hugetlb'))) return t.skip('hugetlb is not a v1 hierarchy here');
  await writeFile(join(unified, 'cgroup.controllers'), 'hugetlb\n');
  const good = await fixHybridLayout(fake, dir);
  try {
    assert.deepEqual(good.failed, []);
    assert.deepEqual(good.mounted, [join(dir, 'hugetlb')]);
    assert.ok(existsSync(join(dir, 'hugetlb', 'tasks')));
  } finally {
    for (const m of good.mounted) execFileSync('umount', [m]);
  }
});

