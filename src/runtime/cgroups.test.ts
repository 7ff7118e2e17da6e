import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cgroupDirs, controllerDir, detectCgroupLayout, parseCgroupLayout } from './cgroups.js';

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
