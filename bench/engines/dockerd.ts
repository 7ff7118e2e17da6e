import { existsSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { LoggedProcess } from '../../test/harness/child-process.js';
import { makeTempDir } from '../../test/harness/temp-dir.js';
import { detectCgroupLayout, removeCgroup } from '../../src/runtime/cgroups.js';
import { startOrTeardown } from '../lib/cleanup.js';
import { assembleEngine, waitForPing, type Engine } from './engine.js';
import { describeLog, spawnDaemon, teardownDaemon } from './daemon-process.js';
import { createBridge, pickFreeSubnet } from './host-network.js';

/**
 * Debian's dockerd (docker.io 20.10) with its managed containerd, everything in a temp dir: its own
 * socket, data root, exec root, config file and cgroup parent, and a bridge of our own for the
 * default network. It must not touch the host's firewall, so --iptables=false, --ip-masq=false and
 * --ip-forward=false (containers here need no outside traffic).
 */

export const DOCKERD_BINARY = process.env.BENCH_DOCKERD ?? '/usr/sbin/dockerd';
export const TRUST_KEY = '/etc/docker/key.json';

/**
 * The flags every dockerd of the suite gets: everything under `dir` (socket, roots, pidfile, an empty
 * config so /etc/docker/daemon.json is never read), no firewall changes, its own cgroup parent.
 */
export function dockerdArgs(dir: string, cgroupParent: string): string[] {
  const configFile = join(dir, 'daemon.json');
  writeFileSync(configFile, '{}\n');
  return [
    '-H', `unix://${join(dir, 'docker.sock')}`,
    '--data-root', join(dir, 'root'),
    '--exec-root', join(dir, 'run'),
    '--pidfile', join(dir, 'dockerd.pid'),
    '--config-file', configFile,
    '--iptables=false',
    '--ip-masq=false',
    '--ip-forward=false',
    '--exec-opt', 'native.cgroupdriver=cgroupfs',
    '--cgroup-parent', cgroupParent,
    '--storage-driver', 'overlay2',
    '--log-level', 'warn',
  ];
}

export async function startDockerd(o: { dockerConfig: string }): Promise<Engine> {
  const dir = makeTempDir('bench-dockerd');
  const socket = join(dir, 'docker.sock');
  const logFile = join(dir, 'dockerd.log');
  const cgroupParent = `/berth-bench-dockerd-${randomBytes(4).toString('hex')}`;
  // dockerd 20.10 writes a trust key into /etc/docker whatever its flags; remove it if we caused it.
  const hadTrustKey = existsSync(TRUST_KEY);
  let proc: LoggedProcess | undefined;
  let bridge: { name: string; remove: () => Promise<void> } | undefined;

  const teardown = async () => {
    await teardownDaemon(proc, dir);
    await removeCgroup(detectCgroupLayout(), cgroupParent).catch(() => undefined);
    if (bridge) await bridge.remove();
    if (!hadTrustKey) await rm(TRUST_KEY, { force: true });
  };
  return startOrTeardown('dockerd', teardown, async (stop) => {
    const net = await pickFreeSubnet();
    bridge = await createBridge('bbd', `${net.gateway}/16`);
    const args = [...dockerdArgs(dir, cgroupParent), '--bridge', bridge.name];
    proc = spawnDaemon(DOCKERD_BINARY, args, logFile);
    const p = proc;
    await waitForPing(socket, 60_000, () => p.hasExited(), describeLog(logFile));
    return await assembleEngine({
      name: 'dockerd',
      socket,
      dir,
      pid: () => p.pid,
      dockerConfig: o.dockerConfig,
      details: `managed containerd, runc, overlay2, cgroupfs, json-file logs, bridge ${net.subnet}, --iptables=false`,
      stopDaemon: stop,
    });
  });
}
