/**
 * Berth's default seccomp profile: an allow-list. Anything not listed fails with EPERM.
 * Names unknown to an architecture are skipped by libseccomp (crun and runc both tolerate them),
 * so one list serves x86_64/x86/x32 and aarch64/arm.
 *
 * The lists are grouped by what the calls do, so that a review can ask "should a container be able
 * to do this?" one group at a time. Calls whose only purpose needs a capability are added only when
 * the container has that capability (the kernel checks the capability too; seccomp just removes the
 * attack surface when it cannot be used anyway).
 */
import type { OciSeccomp, OciSeccompRule } from './oci-spec.js';

const EPERM = 1;
const ENOSYS = 38;

/** Open/read/write/poll on file descriptors. */
const fdIo = [
  'read', 'write', 'readv', 'writev', 'pread64', 'pwrite64', 'preadv', 'pwritev', 'preadv2', 'pwritev2',
  'close', 'close_range', 'dup', 'dup2', 'dup3', 'fcntl', 'fcntl64', 'ioctl', 'lseek', '_llseek',
  'sendfile', 'sendfile64', 'splice', 'tee', 'vmsplice', 'copy_file_range', 'pipe', 'pipe2',
  'select', '_newselect', 'pselect6', 'pselect6_time64', 'poll', 'ppoll', 'ppoll_time64',
  'epoll_create', 'epoll_create1', 'epoll_ctl', 'epoll_ctl_old', 'epoll_wait', 'epoll_wait_old', 'epoll_pwait', 'epoll_pwait2',
  'eventfd', 'eventfd2', 'signalfd', 'signalfd4',
  'timerfd_create', 'timerfd_settime', 'timerfd_settime64', 'timerfd_gettime', 'timerfd_gettime64',
  'inotify_init', 'inotify_init1', 'inotify_add_watch', 'inotify_rm_watch', 'fanotify_mark',
  'flock', 'fsync', 'fdatasync', 'sync', 'syncfs', 'sync_file_range', 'sync_file_range2', 'fadvise64', 'fadvise64_64',
  'arm_fadvise64_64', 'arm_sync_file_range', 'fallocate', 'readahead', 'cachestat',
  // Linux AIO. io_uring is deliberately absent: it bypasses seccomp for the operations it performs.
  'io_setup', 'io_destroy', 'io_getevents', 'io_pgetevents', 'io_pgetevents_time64', 'io_submit', 'io_cancel',
];

/** Path-based file system calls (permission checks are the file system's job). */
const filesystem = [
  'open', 'openat', 'openat2', 'creat', 'access', 'faccessat', 'faccessat2',
  'stat', 'lstat', 'fstat', 'stat64', 'lstat64', 'fstat64', 'newfstatat', 'fstatat64', 'statx',
  'statfs', 'statfs64', 'fstatfs', 'fstatfs64', 'readlink', 'readlinkat', 'getdents', 'getdents64',
  'getcwd', 'chdir', 'fchdir', 'mkdir', 'mkdirat', 'rmdir', 'rename', 'renameat', 'renameat2',
  'link', 'linkat', 'symlink', 'symlinkat', 'unlink', 'unlinkat',
  'chmod', 'fchmod', 'fchmodat', 'fchmodat2', 'chown', 'fchown', 'lchown', 'fchownat', 'chown32', 'fchown32', 'lchown32',
  'truncate', 'ftruncate', 'truncate64', 'ftruncate64', 'utime', 'utimes', 'futimesat', 'utimensat', 'utimensat_time64',
  'mknod', 'mknodat', 'umask',
  'getxattr', 'lgetxattr', 'fgetxattr', 'setxattr', 'lsetxattr', 'fsetxattr', 'listxattr', 'llistxattr', 'flistxattr',
  'removexattr', 'lremovexattr', 'fremovexattr', 'getxattrat', 'setxattrat', 'listxattrat', 'removexattrat',
  'file_getattr', 'file_setattr', 'memfd_create', 'memfd_secret', 'name_to_handle_at', 'listmount', 'statmount',
  // Unprivileged self-sandboxing.
  'landlock_create_ruleset', 'landlock_add_rule', 'landlock_restrict_self',
];

const memory = [
  'brk', 'mmap', 'mmap2', 'munmap', 'mremap', 'mprotect', 'madvise', 'mlock', 'mlock2', 'munlock', 'mlockall', 'munlockall',
  'mincore', 'msync', 'remap_file_pages', 'membarrier', 'pkey_alloc', 'pkey_free', 'pkey_mprotect',
  'map_shadow_stack', 'mseal', 'process_mrelease',
];

/** Creating, running, waiting for and scheduling processes and threads within the container. */
const processes = [
  'fork', 'vfork', 'execve', 'execveat', 'exit', 'exit_group', 'wait4', 'waitid', 'waitpid',
  'getpid', 'getppid', 'gettid', 'getpgid', 'setpgid', 'getpgrp', 'getsid', 'setsid',
  'kill', 'tkill', 'tgkill', 'rt_sigqueueinfo', 'rt_tgsigqueueinfo', 'pidfd_open', 'pidfd_send_signal',
  'prctl', 'set_tid_address', 'set_robust_list', 'get_robust_list', 'rseq', 'restart_syscall',
  'futex', 'futex_time64', 'futex_waitv', 'futex_wake', 'futex_wait', 'futex_requeue',
  'sched_yield', 'sched_getaffinity', 'sched_setaffinity', 'sched_getparam', 'sched_setparam',
  'sched_getscheduler', 'sched_setscheduler', 'sched_get_priority_max', 'sched_get_priority_min',
  'sched_rr_get_interval', 'sched_rr_get_interval_time64', 'sched_getattr', 'sched_setattr',
  'getpriority', 'setpriority', 'ioprio_get', 'ioprio_set', 'getcpu',
  'getrlimit', 'setrlimit', 'ugetrlimit', 'prlimit64', 'getrusage', 'times',
  'capget', 'capset', 'seccomp', 'uname', 'sysinfo', 'getrandom',
  // The kernel calls this trampoline itself when a uprobe is attached to a process.
  'uretprobe',
  // Tracing your own children: safe since seccomp can no longer be bypassed through ptrace (Linux 4.8).
  'ptrace', 'process_vm_readv', 'process_vm_writev',
];

/** User and group identity; the kernel enforces CAP_SETUID/CAP_SETGID. */
const identity = [
  'getuid', 'geteuid', 'getgid', 'getegid', 'getuid32', 'geteuid32', 'getgid32', 'getegid32',
  'setuid', 'setgid', 'setuid32', 'setgid32', 'setreuid', 'setregid', 'setreuid32', 'setregid32',
  'setresuid', 'setresgid', 'setresuid32', 'setresgid32', 'getresuid', 'getresgid', 'getresuid32', 'getresgid32',
  'setfsuid', 'setfsgid', 'setfsuid32', 'setfsgid32', 'getgroups', 'setgroups', 'getgroups32', 'setgroups32',
];

const signals = [
  'rt_sigaction', 'rt_sigprocmask', 'rt_sigreturn', 'rt_sigpending', 'rt_sigsuspend', 'rt_sigtimedwait', 'rt_sigtimedwait_time64',
  'sigaction', 'sigprocmask', 'sigreturn', 'sigpending', 'sigsuspend', 'sigaltstack', 'signal', 'pause', 'alarm',
];

/** Reading clocks and timers. Setting the clock is in the CAP_SYS_TIME group. */
const time = [
  'time', 'gettimeofday', 'clock_gettime', 'clock_gettime64', 'clock_getres', 'clock_getres_time64',
  'clock_nanosleep', 'clock_nanosleep_time64', 'nanosleep', 'getitimer', 'setitimer',
  'timer_create', 'timer_settime', 'timer_settime64', 'timer_gettime', 'timer_gettime64', 'timer_getoverrun', 'timer_delete',
  // Read-only use is allowed by the kernel without CAP_SYS_TIME.
  'adjtimex', 'clock_adjtime', 'clock_adjtime64',
];

/** Sockets; `socket` itself is argument-filtered (see below). */
const network = [
  'socketpair', 'bind', 'connect', 'listen', 'accept', 'accept4', 'getsockname', 'getpeername',
  'getsockopt', 'setsockopt', 'shutdown', 'sendto', 'recvfrom', 'sendmsg', 'recvmsg', 'sendmmsg', 'recvmmsg', 'recvmmsg_time64',
  'send', 'recv', 'socketcall',
];

/** System V and POSIX IPC (namespaced per container). */
const ipc = [
  'shmget', 'shmat', 'shmdt', 'shmctl', 'semget', 'semop', 'semtimedop', 'semtimedop_time64', 'semctl',
  'msgget', 'msgsnd', 'msgrcv', 'msgctl', 'ipc',
  'mq_open', 'mq_unlink', 'mq_timedsend', 'mq_timedsend_time64', 'mq_timedreceive', 'mq_timedreceive_time64',
  'mq_notify', 'mq_getsetattr',
];

/** Calls that exist only on some architectures. */
const archSpecific: Record<string, string[]> = {
  x64: ['arch_prctl', 'modify_ldt', 'get_thread_area', 'set_thread_area'],
  ia32: ['modify_ldt', 'get_thread_area', 'set_thread_area'],
  arm64: ['breakpoint', 'cacheflush', 'set_tls'],
  arm: ['breakpoint', 'cacheflush', 'set_tls'],
};

/** Calls useful only with one capability. */
const byCapability: Record<string, string[]> = {
  CAP_SYS_ADMIN: [
    'mount', 'umount', 'umount2', 'pivot_root', 'unshare', 'setns', 'fsopen', 'fsconfig', 'fsmount', 'fspick',
    'move_mount', 'open_tree', 'mount_setattr', 'fanotify_init', 'lookup_dcookie', 'quotactl',
    'quotactl_fd', 'bpf', 'perf_event_open', 'syslog', 'sethostname', 'setdomainname',
  ],
  CAP_DAC_READ_SEARCH: ['open_by_handle_at'],
  CAP_SYS_BOOT: ['reboot'],
  CAP_SYS_CHROOT: ['chroot'],
  CAP_SYS_MODULE: ['init_module', 'finit_module', 'delete_module'],
  CAP_SYS_PACCT: ['acct'],
  CAP_SYS_PTRACE: ['kcmp', 'pidfd_getfd', 'process_madvise'],
  CAP_SYS_RAWIO: ['iopl', 'ioperm'],
  CAP_SYS_TIME: ['settimeofday', 'stime', 'clock_settime', 'clock_settime64'],
  CAP_SYS_TTY_CONFIG: ['vhangup'],
  CAP_SYS_NICE: ['get_mempolicy', 'set_mempolicy', 'set_mempolicy_home_node', 'mbind', 'migrate_pages', 'move_pages'],
  CAP_SYSLOG: ['syslog'],
  CAP_BPF: ['bpf'],
  CAP_PERFMON: ['perf_event_open'],
};

/** Namespace-creating clone flags: NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET. */
const CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000;
const AF_VSOCK = 40;

/** personality(2) values programs really use: Linux, 32-bit, uname26, and the query value. */
const PERSONALITIES = [0x0, 0x0008, 0x20000, 0x20008, 0xffffffff];

function architecturesFor(arch: string): string[] {
  switch (arch) {
    case 'x64':
    case 'ia32':
      return ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'];
    case 'arm64':
    case 'arm':
      return ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM'];
    default:
      return [];
  }
}

export interface SeccompProfileOptions {
  /** The container's bounding capabilities (CAP_* names). */
  capabilities: readonly string[];
  /** Node's process.arch naming; defaults to the host's. */
  arch?: string;
}

/** Profiles made so far, by architecture and capabilities: containers mostly share a handful. */
const made = new Map<string, OciSeccomp>();

/**
 * The default allow-list profile for a container with the given capabilities. The same object (frozen)
 * for the same capabilities, so that its text and its compiled filter's cache key are computed once.
 */
export function defaultSeccompProfile(opts: SeccompProfileOptions): OciSeccomp {
  const arch = opts.arch ?? process.arch;
  const key = `${arch}\0${[...new Set(opts.capabilities)].sort().join(',')}`;
  let profile = made.get(key);
  if (!profile) {
    if (made.size >= 32) made.delete(made.keys().next().value as string);
    profile = deepFreeze(makeProfile(arch, opts.capabilities));
    made.set(key, profile);
  }
  return profile;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function makeProfile(arch: string, capabilities: readonly string[]): OciSeccomp {
  const caps = new Set(capabilities);
  const allowed = new Set([...fdIo, ...filesystem, ...memory, ...processes, ...identity, ...signals, ...time, ...network, ...ipc]);
  for (const name of archSpecific[arch] ?? []) allowed.add(name);
  for (const [cap, names] of Object.entries(byCapability)) {
    if (caps.has(cap)) for (const name of names) allowed.add(name);
  }

  const rules: OciSeccompRule[] = [{ names: [...allowed].sort(), action: 'SCMP_ACT_ALLOW' }];

  // socket(): every address family except vsock, which reaches the host or hypervisor.
  rules.push(
    { names: ['socket'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: AF_VSOCK, op: 'SCMP_CMP_LT' }] },
    { names: ['socket'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: AF_VSOCK, op: 'SCMP_CMP_GT' }] },
  );
  for (const value of PERSONALITIES) {
    rules.push({ names: ['personality'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value, op: 'SCMP_CMP_EQ' }] });
  }

  if (caps.has('CAP_SYS_ADMIN')) {
    rules.push({ names: ['clone', 'clone3'], action: 'SCMP_ACT_ALLOW' });
  } else {
    // clone() only without namespace flags. clone3 passes its flags in memory, where seccomp cannot
    // look, so it fails with ENOSYS: C libraries then fall back to clone().
    rules.push({
      names: ['clone'],
      action: 'SCMP_ACT_ALLOW',
      args: [{ index: 0, value: CLONE_NAMESPACE_FLAGS, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }],
    });
    rules.push({ names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS });
  }

  const architectures = architecturesFor(arch);
  return {
    defaultAction: 'SCMP_ACT_ERRNO',
    defaultErrnoRet: EPERM,
    ...(architectures.length > 0 ? { architectures } : {}),
    syscalls: rules,
  };
}
