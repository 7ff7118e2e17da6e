import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_CAPABILITIES } from './build-spec.js';
import { defaultSeccompProfile } from './seccomp-default.js';
import type { OciSeccomp } from './oci-spec.js';

function allowedUnconditionally(p: OciSeccomp): Set<string> {
  return new Set((p.syscalls ?? []).filter((r) => r.action === 'SCMP_ACT_ALLOW' && !r.args).flatMap((r) => r.names));
}

test('an allow-list: EPERM by default, host architectures', () => {
  const x86 = defaultSeccompProfile({ capabilities: DEFAULT_CAPABILITIES, arch: 'x64' });
  assert.equal(x86.defaultAction, 'SCMP_ACT_ERRNO');
  assert.equal(x86.defaultErrnoRet, 1);
  assert.deepEqual(x86.architectures, ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32']);
  assert.deepEqual(defaultSeccompProfile({ capabilities: [], arch: 'arm64' }).architectures, ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM']);
});

test('everyday calls allowed; kernel-wide and namespace calls not, without capabilities', () => {
  const allowed = allowedUnconditionally(defaultSeccompProfile({ capabilities: DEFAULT_CAPABILITIES, arch: 'x64' }));
  for (const name of ['read', 'write', 'openat', 'execve', 'mmap', 'futex', 'clock_gettime', 'epoll_wait', 'accept4', 'chroot', 'arch_prctl', 'rseq', 'statx']) {
    assert.ok(allowed.has(name), `${name} allowed`);
  }
  for (const name of ['mount', 'umount2', 'unshare', 'setns', 'pivot_root', 'reboot', 'init_module', 'kexec_load', 'bpf', 'io_uring_setup', 'keyctl', 'add_key', 'clone', 'clone3', 'socket', 'personality', 'kcmp']) {
    assert.ok(!allowed.has(name), `${name} not unconditionally allowed`);
  }
  // Architecture-specific names only for that architecture.
  assert.ok(!allowedUnconditionally(defaultSeccompProfile({ capabilities: [], arch: 'arm64' })).has('arch_prctl'));
});

test('clone is allowed without namespace flags; clone3 answers ENOSYS', () => {
  const p = defaultSeccompProfile({ capabilities: DEFAULT_CAPABILITIES, arch: 'x64' });
  const clone = p.syscalls?.find((r) => r.names.includes('clone'));
  assert.equal(clone?.action, 'SCMP_ACT_ALLOW');
  assert.deepEqual(clone?.args, [{ index: 0, value: 0x7e020000, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }]);
  const clone3 = p.syscalls?.find((r) => r.names.includes('clone3'));
  assert.deepEqual(clone3, { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 });
});

test('socket: everything but AF_VSOCK', () => {
  const p = defaultSeccompProfile({ capabilities: [], arch: 'x64' });
  const rules = p.syscalls?.filter((r) => r.names.includes('socket')) ?? [];
  assert.deepEqual(
    rules.map((r) => r.args),
    [[{ index: 0, value: 40, op: 'SCMP_CMP_LT' }], [{ index: 0, value: 40, op: 'SCMP_CMP_GT' }]],
  );
});

test('capabilities unlock their calls', () => {
  const admin = allowedUnconditionally(defaultSeccompProfile({ capabilities: ['CAP_SYS_ADMIN', 'CAP_SYS_TIME', 'CAP_SYS_PTRACE'], arch: 'x64' }));
  for (const name of ['mount', 'unshare', 'setns', 'clone', 'clone3', 'settimeofday', 'kcmp', 'sethostname']) assert.ok(admin.has(name), name);
  const none = allowedUnconditionally(defaultSeccompProfile({ capabilities: [], arch: 'x64' }));
  assert.ok(!none.has('chroot'));
});

test('no name appears twice in the allow rule', () => {
  const p = defaultSeccompProfile({ capabilities: ['CAP_SYS_ADMIN', 'CAP_SYSLOG', 'CAP_BPF', 'CAP_PERFMON'], arch: 'x64' });
  const names = p.syscalls?.[0]?.names ?? [];
  assert.equal(new Set(names).size, names.length);
});
