/**
 * Several berthd nodes on one machine: each in its own network namespace, joined by a per-run test
 * bridge on a per-run 10.x.y.0/24 that the test allocates (bridge .1, node i .10+i), with its own temp
 * dirs and network prefix (startDaemon's). The seeded registry (127.0.0.1 on the host) is reached from
 * the namespaces through a forwarder on the bridge address. Namespaces and the bridge go at teardown and
 * at process exit; berthd processes and what they started (etcd, conmon) are stopped by pid.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes, randomInt } from 'node:crypto';
import { createConnection, createServer, type Server } from 'node:net';
import { after, before } from 'node:test';
import { onExitCleanup, startDaemon, type DaemonOptions, type SeededRegistry, type TestDaemon } from '../harness/index.js';

export interface TestNet {
  readonly prefix: string;
  readonly bridge: string;
  /** "10.x.y" */
  readonly base: string;
  readonly hostAddr: string;
  addr(i: number): string;
  netns(i: number): string;
  /** The host side of node i's veth: down cuts the node off, up brings it back. */
  setLink(i: number, up: boolean): void;
  remove(): void;
}

const ip = (args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

function usedPrefixes(): string[] {
  return execFileSync('ip', ['-4', 'route', 'show'], { encoding: 'utf8' }).split('\n').map((l) => l.split(' ')[0]!).filter(Boolean);
}

/** A bridge and `n` namespaces, each with a veth on the bridge and its address. */
export function createTestNet(n: number): TestNet {
  const prefix = `bc${randomBytes(2).toString('hex')}`;
  const used = usedPrefixes();
  let base = '';
  for (let i = 0; i < 50 && !base; i++) {
    const cand = `10.${randomInt(150, 250)}.${randomInt(0, 255)}`;
    if (!used.some((r) => r.startsWith(`${cand}.`) || r.startsWith(cand.split('.').slice(0, 2).join('.') + '.0.0/16'))) base = cand;
  }
  if (!base) throw new Error('no free 10.x.y.0/24 for the test bridge');
  const bridge = `${prefix}br`;
  const netns = (i: number) => `${prefix}n${i}`;
  const veth = (i: number) => `${prefix}v${i}`;
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    for (let i = 1; i <= n; i++) {
      try {
        ip(['netns', 'del', netns(i)]);
      } catch {
        /* never made */
      }
      try {
        ip(['link', 'del', veth(i)]);
      } catch {
        /* went with its namespace */
      }
    }
    try {
      ip(['link', 'del', bridge]);
    } catch {
      /* never made */
    }
  };
  const unregister = onExitCleanup(remove);
  try {
    ip(['link', 'add', bridge, 'type', 'bridge']);
    ip(['addr', 'add', `${base}.1/24`, 'dev', bridge]);
    ip(['link', 'set', bridge, 'up']);
    for (let i = 1; i <= n; i++) {
      ip(['netns', 'add', netns(i)]);
      ip(['link', 'add', veth(i), 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns(i)]);
      ip(['link', 'set', veth(i), 'master', bridge, 'up']);
      ip(['-n', netns(i), 'link', 'set', 'lo', 'up']);
      ip(['-n', netns(i), 'addr', 'add', `${base}.${10 + i}/24`, 'dev', 'eth0']);
      ip(['-n', netns(i), 'link', 'set', 'eth0', 'up']);
      ip(['-n', netns(i), 'route', 'add', 'default', 'via', `${base}.1`]);
    }
  } catch (err) {
    remove();
    unregister();
    throw err;
  }
  return {
    prefix,
    bridge,
    base,
    hostAddr: `${base}.1`,
    addr: (i) => `${base}.${10 + i}`,
    netns,
    setLink: (i, up) => ip(['link', 'set', veth(i), up ? 'up' : 'down']),
    remove: () => {
      remove();
      unregister();
    },
  };
}

/** Forwards hostAddr:<port> to 127.0.0.1:<target>, so namespaces reach the host's loopback registry. */
export async function forwardPort(hostAddr: string, target: number): Promise<{ port: number; server: Server }> {
  const server = createServer((c) => {
    const up = createConnection({ host: '127.0.0.1', port: target });
    c.pipe(up).pipe(c);
    c.on('error', () => up.destroy());
    up.on('error', () => c.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, hostAddr, resolve);
  });
  return { port: (server.address() as { port: number }).port, server };
}

export interface ClusterNode {
  readonly index: number;
  readonly addr: string;
  readonly daemon: TestDaemon;
}

export interface TestCluster {
  readonly net: TestNet;
  readonly nodes: ClusterNode[];
  /** The seeded busybox, named through the forwarder. */
  readonly image: string;
  node(i: number): ClusterNode;
}

/** Starts `n` berthd nodes (not yet in a swarm) in namespaces; `reg` is a seeded open registry. */
export async function startCluster(n: number, reg: SeededRegistry, opts: DaemonOptions = {}): Promise<TestCluster & { teardown(): Promise<void> }> {
  const net = createTestNet(n);
  const nodes: ClusterNode[] = [];
  let fwd: Server | undefined;
  const teardown = async () => {
    // BERTH_KEEP_CLUSTER_LOGS=<dir>: each node's berthd log is kept there (<net prefix>-node<i>.log).
    const keep = process.env.BERTH_KEEP_CLUSTER_LOGS;
    if (keep) for (const x of nodes) copyFileSync(x.daemon.logFile, join(keep, `${net.prefix}-node${x.index}.log`));
    await Promise.all(nodes.map((x) => x.daemon.teardown().catch(() => undefined)));
    fwd?.close();
    net.remove();
  };
  try {
    const regPort = Number(new URL(reg.registry.url).port);
    const f = await forwardPort(net.hostAddr, regPort);
    fwd = f.server;
    const image = reg.seeded.refs.busybox.replace(/^[^/]+/, `${net.hostAddr}:${f.port}`);
    const started = await Promise.all(
      Array.from({ length: n }, (_, k) =>
        startDaemon({
          ...opts,
          wrap: ['nsenter', `--net=/run/netns/${net.netns(k + 1)}`, '--'],
          args: ['--insecure-registry', `${net.base}.0/24`, ...(opts.args ?? [])],
          readyTimeoutMs: opts.readyTimeoutMs ?? 40_000,
        }),
      ),
    );
    started.forEach((daemon, k) => nodes.push({ index: k + 1, addr: net.addr(k + 1), daemon }));
    return { net, nodes, image, node: (i) => nodes[i - 1]!, teardown };
  } catch (err) {
    await teardown();
    throw err;
  }
}

/** before/after hooks around startCluster. */
export function useCluster(n: number, reg: () => SeededRegistry, opts: DaemonOptions = {}): () => TestCluster {
  let c: (TestCluster & { teardown(): Promise<void> }) | undefined;
  before(async () => {
    c = await startCluster(n, reg(), opts);
  });
  after(async () => {
    await c?.teardown();
  });
  return () => {
    if (!c) throw new Error('useCluster(): not started');
    return c;
  };
}
