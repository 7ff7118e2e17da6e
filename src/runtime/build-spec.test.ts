import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ALL_CAPABILITIES, DEFAULT_CAPABILITIES, DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS, buildEnv, buildSpec, type RuntimeSpecInput } from './build-spec.js';
import { serializeSpec } from './bundle.js';
import { specInput } from '../../test/fixtures/runtime.js';

const ID = 'c0ffee0123456789';

function input(over: Partial<RuntimeSpecInput> = {}): RuntimeSpecInput {
  return specInput(ID, '/var/lib/berth/rootfs', ['/bin/sh'], over);
}

test('dockerd defaults: capabilities, masked and readonly paths, no new privileges off', () => {
  const s = buildSpec(input());
  assert.equal(DEFAULT_CAPABILITIES.length, 14);
  assert.deepEqual(s.process.capabilities?.bounding, [...DEFAULT_CAPABILITIES]);
  assert.deepEqual(s.process.capabilities?.effective, [...DEFAULT_CAPABILITIES]);
  assert.deepEqual(s.process.capabilities?.inheritable, []);
  assert.deepEqual(s.linux.maskedPaths, [...DEFAULT_MASKED_PATHS]);
  assert.deepEqual(s.linux.readonlyPaths, [...DEFAULT_READONLY_PATHS]);
  assert.ok(s.linux.maskedPaths?.includes('/proc/kcore'));
  assert.equal(s.process.noNewPrivileges, false);
  assert.equal(s.root.path, '/var/lib/berth/rootfs');
  assert.equal(s.root.readonly, false);
  assert.equal(s.linux.cgroupsPath, `/berth/${ID}`);
  assert.equal(s.hostname, ID.slice(0, 12));
});

test('default mounts with dockerd options; /sys and cgroup read-only', () => {
  const s = buildSpec(input());
  const byDest = new Map(s.mounts.map((m) => [m.destination, m]));
  assert.deepEqual(
    s.mounts.map((m) => m.destination),
    ['/proc', '/dev', '/dev/pts', '/sys', '/sys/fs/cgroup', '/dev/mqueue', '/dev/shm'],
  );
  assert.deepEqual(byDest.get('/proc')?.options, ['nosuid', 'noexec', 'nodev']);
  assert.deepEqual(byDest.get('/dev')?.options, ['nosuid', 'strictatime', 'mode=755', 'size=65536k']);
  assert.ok(byDest.get('/dev/pts')?.options?.includes('gid=5'));
  assert.ok(byDest.get('/sys')?.options?.includes('ro'));
  assert.ok(byDest.get('/sys/fs/cgroup')?.options?.includes('ro'));
  assert.deepEqual(byDest.get('/dev/shm')?.options, ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=67108864']);
});

test('shm size, ipc=none, and user mounts replacing defaults, parents first', () => {
  const s = buildSpec(
    input({
      shmSize: 1 << 20,
      mounts: [
        { destination: '/data/sub', type: 'bind', source: '/h/sub', options: ['rbind'] },
        { destination: '/data/', type: 'bind', source: '/h/data', options: ['rbind', 'ro'] },
        { destination: '/dev/shm', type: 'bind', source: '/h/shm', options: ['rbind'] },
        { destination: '/etc/hosts', type: 'bind', source: '/h/hosts', options: ['rbind', 'rprivate'] },
      ],
    }),
  );
  const dests = s.mounts.map((m) => m.destination);
  assert.equal(dests.filter((d) => d === '/dev/shm').length, 1);
  assert.equal(s.mounts.find((m) => m.destination === '/dev/shm')?.source, '/h/shm');
  assert.ok(dests.indexOf('/data') < dests.indexOf('/data/sub'));
  assert.ok(dests.includes('/etc/hosts'));

  const sized = buildSpec(input({ shmSize: 1 << 20 }));
  assert.ok(sized.mounts.find((m) => m.destination === '/dev/shm')?.options?.includes('size=1048576'));
  const none = buildSpec(input({ omitShm: true }));
  assert.ok(!none.mounts.some((m) => m.destination === '/dev/shm'));
});

test('privileged: all capabilities, rw /sys, no masks, all devices, no seccomp', () => {
  const s = buildSpec(input({ privileged: true }));
  assert.deepEqual(s.process.capabilities?.bounding, [...ALL_CAPABILITIES]);
  assert.equal(s.linux.maskedPaths, undefined);
  assert.equal(s.linux.readonlyPaths, undefined);
  assert.equal(s.linux.seccomp, undefined);
  assert.ok(!s.mounts.find((m) => m.destination === '/sys')?.options?.includes('ro'));
  assert.ok(!s.mounts.find((m) => m.destination === '/sys/fs/cgroup')?.options?.includes('ro'));
  assert.deepEqual(s.linux.resources?.devices, [{ allow: true, access: 'rwm' }]);
});

test('device rules: deny all, then the basics, then requested devices', () => {
  const s = buildSpec(
    input({
      devices: [{ pathInContainer: '/dev/fuse', type: 'c', major: 10, minor: 229, fileMode: 0o666, uid: 0, gid: 0, cgroupPermissions: 'rwm' }],
    }),
  );
  const rules = s.linux.resources?.devices ?? [];
  assert.deepEqual(rules[0], { allow: false, access: 'rwm' });
  assert.ok(rules.some((r) => r.allow && r.type === 'c' && r.major === 1 && r.minor === 3)); // null
  assert.ok(rules.some((r) => r.allow && r.type === 'c' && r.major === 5 && r.minor === 2)); // ptmx
  assert.ok(rules.some((r) => r.allow && r.major === 10 && r.minor === 229));
  assert.deepEqual(s.linux.devices, [{ type: 'c', path: '/dev/fuse', major: 10, minor: 229, fileMode: 0o666, uid: 0, gid: 0 }]);
});

test('env: PATH and HOSTNAME added, TERM with a tty, given values win', () => {
  assert.deepEqual(buildEnv([], 'h', false), ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'HOSTNAME=h']);
  assert.deepEqual(buildEnv(['PATH=/x', 'A=1', 'A=2'], 'h', true), ['HOSTNAME=h', 'TERM=xterm', 'PATH=/x', 'A=2']);
  assert.deepEqual(buildEnv(['TERM=vt100', 'HOSTNAME=mine'], 'h', true), [
    'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    'TERM=vt100',
    'HOSTNAME=mine',
  ]);
});

test('resources: Docker memory/swap semantics, CPUs, pids', () => {
  const s = buildSpec(input({ resources: { memory: 100, nanoCpus: 1_500_000_000, cpuShares: 512, cpusetCpus: '0-1', pidsLimit: 10 } }));
  assert.deepEqual(s.linux.resources?.memory, { limit: 100, swap: 200 });
  assert.deepEqual(s.linux.resources?.cpu, { shares: 512, period: 100000, quota: 150000, cpus: '0-1' });
  assert.deepEqual(s.linux.resources?.pids, { limit: 10 });
  assert.deepEqual(buildSpec(input({ resources: { memory: 100, memorySwap: -1 } })).linux.resources?.memory, { limit: 100, swap: -1 });
  const none = buildSpec(input({ resources: { pidsLimit: -1 } })).linux.resources;
  assert.equal(none?.memory, undefined);
  assert.equal(none?.cpu, undefined);
  assert.equal(none?.pids, undefined);
});

test('namespaces: mount always, cgroup only on v2, joined paths kept, net alias', () => {
  const v2 = buildSpec(input({ namespaces: [{ type: 'pid' }, { type: 'net', path: '/proc/1/ns/net' }] }));
  assert.deepEqual(v2.linux.namespaces, [{ type: 'pid' }, { type: 'network', path: '/proc/1/ns/net' }, { type: 'mount' }, { type: 'cgroup' }]);
  const v1 = buildSpec(input({ cgroupVersion: 1, namespaces: [{ type: 'uts' }] }));
  assert.deepEqual(v1.linux.namespaces, [{ type: 'uts' }, { type: 'mount' }]);
  assert.throws(() => buildSpec(input({ namespaces: [{ type: 'bogus' }] })));
});

test('init: catatonit bind-mounted read-only at /dev/init and put in front of the command', () => {
  const s = buildSpec(input({ init: true }));
  assert.deepEqual(s.process.args, ['/dev/init', '--', '/bin/sh']);
  const m = s.mounts.find((x) => x.destination === '/dev/init');
  assert.equal(m?.source, '/usr/bin/catatonit');
  assert.ok(m?.options?.includes('ro'));
});

test('seccomp: default profile or none; capabilities from the input', () => {
  const s = buildSpec(input({ process: { args: ['x'], env: [], cwd: '', user: { uid: 1, gid: 2, additionalGids: [3] }, terminal: true, capabilities: ['CAP_SYS_ADMIN'], consoleSize: { height: 24, width: 80 } } }));
  assert.equal(s.linux.seccomp?.defaultAction, 'SCMP_ACT_ERRNO');
  assert.deepEqual(s.process.capabilities?.bounding, ['CAP_SYS_ADMIN']);
  assert.ok(s.linux.seccomp?.syscalls?.some((r) => r.names.includes('mount')));
  assert.deepEqual(s.process.user, { uid: 1, gid: 2, additionalGids: [3] });
  assert.equal(s.process.cwd, '/');
  assert.deepEqual(s.process.consoleSize, { height: 24, width: 80 });
  assert.equal(buildSpec(input({ seccomp: 'unconfined' })).linux.seccomp, undefined);
});

test('serializeSpec writes unlimited rlimits as 2^64-1', () => {
  const s = buildSpec(input());
  s.process.rlimits = [{ type: 'RLIMIT_CORE', hard: Infinity, soft: 0 }];
  const text = serializeSpec(s);
  assert.match(text, /"rlimits":\[\{"type":"RLIMIT_CORE","hard":18446744073709551615,"soft":0\}\]/);
});
