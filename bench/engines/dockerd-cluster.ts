import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:net';
import type { LoggedProcess } from '../../test/harness/child-process.js';
import { makeTempDir } from '../../test/harness/temp-dir.js';
import { createTestNet, forwardPort, type TestNet } from '../../test/cluster/harness.js';
import { detectCgroupLayout, removeCgroup } from '../../src/runtime/cgroups.js';
import { ApiClient } from '../lib/api-client.js';
import { startOrTeardown } from '../lib/cleanup.js';
import { runCommand, type CommandResult } from '../lib/run-command.js';
import { waitForPing } from './engine.js';
import { describeLog, spawnDaemon, teardownDaemon } from './daemon-process.js';
import { DOCKERD_BINARY, dockerdArgs, TRUST_KEY } from './dockerd.js';

/**
 * Several dockerd (each with its managed containerd) for workload 17's swarm, each in a network
 * namespace of the cluster harness's test bridge, so each advertises its own address. Per node: its own
 * temp dir (socket, data root, exec root, pidfile, config) and cgroup parent; inside its namespace the
 * default bridge names and ranges (docker0, docker_gwbridge, ingress) clash with nothing. The registry
 * on the host's loopback is reached through the harness's forwarder on the bridge address.
 */

export interface DockerdNode {
  readonly index: number;
  readonly addr: string;
  readonly socket: string;
  readonly api: ApiClient;
  docker(args: string[]): Promise<CommandResult>;
  kill9(): void;
}

export interface DockerdCluster {
  readonly net: TestNet;
  readonly nodes: DockerdNode[];
  /** busybox, named through the forwarder. */
  readonly image: string;
  teardown(): Promise<void>;
}

export async function startDockerdCluster(n: number, busyboxRef: string): Promise<DockerdCluster> {
  const net = createTestNet(n);
  const hadTrustKey = existsSync(TRUST_KEY);
  const procs: Array<{ proc?: LoggedProcess; dir: string; cgroup: string }> = [];
  let fwd: Server | undefined;
  const teardown = async () => {
    await Promise.all(
      procs.map(async (p) => {
        await teardownDaemon(p.proc, p.dir).catch(() => undefined);
        await removeCgroup(detectCgroupLayout(), p.cgroup).catch(() => undefined);
      }),
    );
    fwd?.close();
    net.remove();
    if (!hadTrustKey) await rm(TRUST_KEY, { force: true });
  };
  return startOrTeardown('dockerd cluster', teardown, async (stop) => {
    const regPort = Number(busyboxRef.split('/')[0]!.split(':')[1]);
    const f = await forwardPort(net.hostAddr, regPort);
    fwd = f.server;
    const image = busyboxRef.replace(/^[^/]+/, `${net.hostAddr}:${f.port}`);
    const nodes: DockerdNode[] = [];
    // One after another: the first writes /etc/docker/key.json, which the others then only read.
    for (let i = 1; i <= n; i++) {
      const dir = makeTempDir(`bench-dockerd-swarm${i}`);
      const entry: { proc?: LoggedProcess; dir: string; cgroup: string } = { dir, cgroup: `/berth-bench-dswarm-${randomBytes(4).toString('hex')}` };
      procs.push(entry);
      const socket = join(dir, 'docker.sock');
      const logFile = join(dir, 'dockerd.log');
      const args = [`--net=/run/netns/${net.netns(i)}`, '--', DOCKERD_BINARY, ...dockerdArgs(dir, entry.cgroup), '--insecure-registry', `${net.base}.0/24`];
      // nsenter execs dockerd, so the pid is dockerd's.
      const proc = spawnDaemon('nsenter', args, logFile);
      entry.proc = proc;
      await waitForPing(socket, 60_000, () => proc.hasExited(), describeLog(logFile));
      const env = { ...process.env, DOCKER_HOST: `unix://${socket}`, DOCKER_CONFIG: join(dir, 'cli') };
      nodes.push({
        index: i,
        addr: net.addr(i),
        socket,
        api: new ApiClient(socket),
        docker: (a) => runCommand('docker', a, { env }),
        kill9: () => process.kill(proc.pid, 'SIGKILL'),
      });
    }
    return {
      net,
      nodes,
      image,
      teardown: stop,
    };
  });
}

/**
 * `swarm init` on node 1 and `swarm join` of the others as workers. The heartbeat is 1 s, as Berth's
 * cluster harness sets it (test/cluster/support.ts), so both engines' recovery is timed from the same
 * node-down timeout.
 */
export async function formDockerdSwarm(c: DockerdCluster): Promise<void> {
  const [first, ...rest] = c.nodes;
  const must = async (node: DockerdNode, args: string[]) => {
    const r = await node.docker(args);
    if (r.code !== 0) throw new Error(`node ${node.index}: docker ${args.join(' ')}: ${r.stderr.trim()}`);
    return r.stdout.trim();
  };
  await must(first!, ['swarm', 'init', '--advertise-addr', first!.addr, '--dispatcher-heartbeat', '1s']);
  const token = await must(first!, ['swarm', 'join-token', '-q', 'worker']);
  for (const node of rest) await must(node, ['swarm', 'join', '--advertise-addr', node.addr, '--token', token, `${first!.addr}:2377`]);
}
