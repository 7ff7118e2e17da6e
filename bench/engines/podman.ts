import { existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { LoggedProcess } from '../../test/harness/child-process.js';
import { makeTempDir } from '../../test/harness/temp-dir.js';
import { detectCgroupLayout, removeCgroup } from '../../src/runtime/cgroups.js';
import { startOrTeardown } from '../lib/cleanup.js';
import { runCommand } from '../lib/run-command.js';
import { assembleEngine, waitForPing, type Engine } from './engine.js';
import { describeLog, spawnDaemon, teardownDaemon } from './daemon-process.js';
import { linkExists, pickFreeSubnet, removeNetavarkLeftovers, snapshotChains } from './host-network.js';

/**
 * Debian's podman (4.3) serving its Docker-compatible API (`podman system service`), with storage,
 * run root, network configs, temp files and events in a temp dir, cgroupfs (no systemd here),
 * k8s-file logs, and a registries.conf that lets it pull from the loopback registry over http.
 *
 * Rootful podman also uses a few host-wide places it has no option for: the shared-memory lock
 * /dev/shm/libpod_lock, named netns in /run/netns, the cgroup parent /libpod_parent, the podman0
 * bridge and netavark's NETAVARK* iptables chains. Whatever of those the run created is removed at
 * the end.
 */

export const PODMAN_BINARY = process.env.BENCH_PODMAN ?? '/usr/bin/podman';
const SHM_LOCK = '/dev/shm/libpod_lock';
const NETNS_DIR = '/run/netns';
const CGROUP_PARENT = '/libpod_parent';
const BRIDGE = 'podman0';

/**
 * podman gives containers RLIMIT_NOFILE and RLIMIT_NPROC of 1048576 unless told otherwise, which fails
 * (EPERM) where root lacks CAP_SYS_RESOURCE and the hard limits are lower. dockerd's and Berth's
 * containers inherit the daemon's limits, so podman's get the same: ours, except that podman's own
 * process ends up with RLIMIT_NPROC capped at kernel.pid_max (seen with 4.3), and conmon and crun
 * inherit that cap.
 */
function inheritedUlimits(): string[] {
  const out: string[] = [];
  try {
    const text = readFileSync('/proc/self/limits', 'utf8');
    const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim());
    for (const [label, name] of [['Max open files', 'nofile'], ['Max processes', 'nproc']] as const) {
      const m = new RegExp(`^${label}\\s+(\\S+)\\s+(\\S+)`, 'm').exec(text);
      if (!m || m[1] === 'unlimited' || m[2] === 'unlimited') continue;
      let [soft, hard] = [Number(m[1]), Number(m[2])];
      if (name === 'nproc' && pidMax > 0) [soft, hard] = [Math.min(soft, pidMax), Math.min(hard, pidMax)];
      out.push(`${name}=${soft}:${hard}`);
    }
  } catch {
    // no /proc: keep podman's defaults
  }
  return out;
}

/**
 * Whether a podman other than ours runs on the host (another podman's service or CLI, or netavark
 * working for it): looked up by executable path, only to decide what to leave in place. aardvark-dns
 * does not count: berthd runs it too, and it has no firewall chains.
 */
function otherPodmanRunning(dir: string): boolean {
  const exes = new Set([PODMAN_BINARY, '/usr/lib/podman/netavark']);
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!exes.has(readlinkSync(`/proc/${name}/exe`))) continue;
      if (!readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(dir)) return true;
    } catch {
      // exited meanwhile, or a kernel thread
    }
  }
  return false;
}

function listNetns(): Set<string> {
  try {
    return new Set(readdirSync(NETNS_DIR));
  } catch {
    return new Set();
  }
}

export async function startPodman(o: { dockerConfig: string; registryHost: string; moreRegistryHosts?: string[] }): Promise<Engine> {
  const dir = makeTempDir('bench-podman');
  const socket = join(dir, 'podman.sock');
  const logFile = join(dir, 'podman.log');
  const root = join(dir, 'root');
  const runroot = join(dir, 'run');
  const hadLock = existsSync(SHM_LOCK);
  const hadParent = existsSync(join('/sys/fs/cgroup/memory', CGROUP_PARENT));
  const hadBridge = await linkExists(BRIDGE);
  const netnsBefore = listNetns();
  const chainsBefore = await snapshotChains();
  let proc: LoggedProcess | undefined;
  let subnet: string | undefined;

  const teardown = async () => {
    await teardownDaemon(proc, dir);
    for (const ns of listNetns()) {
      if (netnsBefore.has(ns) || !ns.startsWith('netns-')) continue;
      await runCommand('umount', ['-l', join(NETNS_DIR, ns)]);
      await rm(join(NETNS_DIR, ns), { force: true });
    }
    const shared = otherPodmanRunning(dir);
    if (!hadBridge && !shared && (await linkExists(BRIDGE))) await runCommand('ip', ['link', 'del', BRIDGE]);
    if (subnet) await removeNetavarkLeftovers(chainsBefore, subnet, /^NETAVARK/, shared);
    if (!hadParent) await removeCgroup(detectCgroupLayout(), CGROUP_PARENT).catch(() => undefined);
    if (!hadLock && !shared) await rm(SHM_LOCK, { force: true });
  };
  return startOrTeardown('podman', teardown, async (stop) => {
    const net = await pickFreeSubnet();
    subnet = net.subnet;
    for (const d of ['tmp', 'libpod-tmp', 'networks', 'volumes']) mkdirSync(join(dir, d));
    const q = (s: string) => JSON.stringify(s);
    const containersConf = join(dir, 'containers.conf');
    writeFileSync(
      containersConf,
      [
        '[containers]',
        'log_driver = "k8s-file"',
        `default_ulimits = ${JSON.stringify(inheritedUlimits())}`,
        '[engine]',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        `events_logfile_path = ${q(join(dir, 'events.log'))}`,
        `tmp_dir = ${q(join(dir, 'libpod-tmp'))}`,
        `image_copy_tmp_dir = ${q(join(dir, 'tmp'))}`,
        `volume_path = ${q(join(dir, 'volumes'))}`,
        '[network]',
        'network_backend = "netavark"',
        `network_config_dir = ${q(join(dir, 'networks'))}`,
        `default_subnet = ${q(net.subnet)}`,
        '',
      ].join('\n'),
    );
    const storageConf = join(dir, 'storage.conf');
    writeFileSync(storageConf, ['[storage]', 'driver = "overlay"', `runroot = ${q(runroot)}`, `graphroot = ${q(root)}`, ''].join('\n'));
    const registriesConf = join(dir, 'registries.conf');
    writeFileSync(
      registriesConf,
      ['unqualified-search-registries = []', ...[o.registryHost, ...(o.moreRegistryHosts ?? [])].flatMap((h) => ['[[registry]]', `location = ${q(h)}`, 'insecure = true']), ''].join('\n'),
    );
    const env = {
      ...process.env,
      CONTAINERS_CONF: containersConf,
      CONTAINERS_STORAGE_CONF: storageConf,
      CONTAINERS_REGISTRIES_CONF: registriesConf,
      TMPDIR: join(dir, 'tmp'),
    };
    const args = [
      '--root', root,
      '--runroot', runroot,
      '--cgroup-manager', 'cgroupfs',
      '--events-backend', 'file',
      '--log-level', 'warn',
      'system', 'service', '--time=0', `unix://${socket}`,
    ];
    proc = spawnDaemon(PODMAN_BINARY, args, logFile, env);
    const p = proc;
    await waitForPing(socket, 60_000, () => p.hasExited(), describeLog(logFile));
    return await assembleEngine({
      name: 'podman',
      socket,
      dir,
      pid: () => p.pid,
      dockerConfig: o.dockerConfig,
      details: `podman system service, crun, overlay, cgroupfs, k8s-file logs, netavark ${net.subnet}, ulimits as the caller's`,
      stopDaemon: stop,
    });
  });
}
