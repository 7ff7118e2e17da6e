/** Helpers for the multi-node swarm tests: forming a cluster through the CLI, reading tasks per node. */
import { request } from 'node:http';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { run, type TestDaemon } from '../harness/index.js';
import { eventually, tasksOf, type WireTask } from '../swarm/support.js';
import type { TestCluster } from './harness.js';

export { eventually, tasksOf };

/** A docker command on the node that must succeed (its stdout, trimmed). */
export { dockerOk as ok } from '../harness/index.js';

/** Ends promptly on SIGTERM. */
export const LOOP = 'trap "exit 0" TERM; while :; do sleep 0.2; done';

/**
 * `swarm init` on node 1 (heartbeat 1 s, so a dead node is down after 3 s), then `swarm join` of the
 * others: the first `managers` nodes (node 1 included) as managers, the rest as workers.
 */
export async function formSwarm(c: TestCluster, managers = 1): Promise<{ workerToken: string; managerToken: string; nodeIds: string[] }> {
  const d1 = c.node(1).daemon;
  const init = await d1.docker(['swarm', 'init', '--advertise-addr', c.node(1).addr, '--dispatcher-heartbeat', '1s']);
  assert.equal(init.code, 0, init.stderr);
  const workerToken = (await d1.docker(['swarm', 'join-token', '-q', 'worker'])).stdout.trim();
  const managerToken = (await d1.docker(['swarm', 'join-token', '-q', 'manager'])).stdout.trim();
  assert.match(workerToken, /^SWMTKN-1-[0-9a-z]{50}-[0-9a-z]{25}$/);
  for (const n of c.nodes.slice(1)) {
    const token = n.index <= managers ? managerToken : workerToken;
    const join = await n.daemon.docker(['swarm', 'join', '--token', token, `${c.node(1).addr}:2377`]);
    assert.equal(join.code, 0, `node ${n.index}: ${join.stderr}\n${n.daemon.logTail(30)}`);
    assert.match(join.stdout, n.index <= managers ? /This node joined a swarm as a manager\./ : /This node joined a swarm as a worker\./);
  }
  const nodeIds: string[] = [];
  for (const n of c.nodes) nodeIds.push((await n.daemon.docker(['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim());
  return { workerToken, managerToken, nodeIds };
}

export interface WireNode {
  ID: string;
  Spec: { Role: string; Availability: string; Labels?: Record<string, string> };
  Status: { State: string; Addr: string };
  ManagerStatus?: { Leader?: boolean; Reachability: string };
  Version: { Index: number };
}

export async function nodesOf(d: TestDaemon): Promise<WireNode[]> {
  const r = await d.request('GET', '/nodes');
  assert.equal(r.status, 200, r.text());
  return r.json<WireNode[]>();
}

/** Running tasks of the service (desired running), counted per node id. */
export async function spread(d: TestDaemon, service: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const t of await tasksOf(d, service)) {
    if (t.Status.State !== 'running' || t.DesiredState !== 'running' || !t.NodeID) continue;
    out.set(t.NodeID, (out.get(t.NodeID) ?? 0) + 1);
  }
  return out;
}

/** Waits until the running tasks, per node, are exactly `want` (node id → count). */
export async function waitSpread(d: TestDaemon, service: string, want: Record<string, number>, timeoutMs = 60_000): Promise<WireTask[]> {
  const wanted = JSON.stringify(Object.entries(want).filter(([, n]) => n > 0).sort());
  let got = '';
  return eventually(`tasks of ${service} spread as ${wanted}`, async () => {
    got = JSON.stringify([...(await spread(d, service)).entries()].sort());
    return got === wanted ? tasksOf(d, service) : undefined;
  }, timeoutMs, 300).catch(async (err) => {
    const tasks = await tasksOf(d, service).catch(() => []);
    const states = tasks.map((t) => `${t.ID.slice(0, 8)} slot ${t.Slot} on ${(t.NodeID ?? "-").slice(0, 8)}: ${t.Status.State}/${t.DesiredState}`);
    throw new Error(`${(err as Error).message}\nlast spread: ${got}\n${states.join('\n')}\n${d.logTail(40)}`);
  });
}

/** How many running containers of the service a node really runs (its own engine's view). */
export async function runningOn(d: TestDaemon, service: string): Promise<number> {
  const r = await d.docker(['ps', '-q', '--filter', `label=com.docker.swarm.service.name=${service}`]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.split('\n').filter(Boolean).length;
}

/** The tasks of the service whose containers run on a node (its own engine's view), sorted. */
export async function taskContainers(d: TestDaemon, service: string): Promise<string[]> {
  const r = await d.docker(['ps', '--filter', `label=com.docker.swarm.service.name=${service}`, '--format', '{{.Label "com.docker.swarm.task.id"}}']);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.split('\n').filter(Boolean).sort();
}

/**
 * Waits until node `d` (id `nodeId`), back after a cut or a crash, runs none of the `stale` tasks it
 * ran then, and no task but those manager `via` wants running there now: the leader may well place
 * new ones on it (the last of a rolling update that was under way, say).
 */
export async function waitStaleGone(d: TestDaemon, nodeId: string, via: TestDaemon, service: string, stale: string[], timeoutMs = 60_000): Promise<void> {
  let last: string[] = [];
  await eventually(`node ${nodeId} shut its stale tasks down`, async () => {
    last = await taskContainers(d, service);
    const placed = new Set((await tasksOf(via, service)).filter((t) => t.NodeID === nodeId && t.DesiredState === 'running').map((t) => t.ID));
    return last.every((id) => !stale.includes(id) && placed.has(id));
  }, timeoutMs).catch((err: Error) => {
    throw new Error(`${err.message}\nstale: ${stale.join(' ')}\nrunning: ${last.join(' ')}`);
  });
}

/**
 * etcdctl against the etcd member a node runs, with that node's certificate (`withCert` false: none),
 * or node `as`'s (a worker's, which runs no member).
 */
export async function etcdctl(d: TestDaemon, args: string[], withCert = true, as = d): Promise<{ code: number; stdout: string; stderr: string }> {
  const dir = join(d.dataRoot, 'swarm', 'cluster');
  const certDir = join(as.dataRoot, 'swarm', 'cluster');
  const pid = readFileSync(join(dir, 'etcd', 'etcd.pid'), 'utf8').trim();
  const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  const endpoint = cmd[cmd.indexOf('--listen-client-urls') + 1]!;
  const certs = withCert ? ['--cert', join(certDir, 'node.pem'), '--key', join(certDir, 'node-key.pem')] : [];
  return run('etcdctl', ['--endpoints', endpoint, '--cacert', join(dir, 'ca.pem'), ...certs, '--dial-timeout', '3s', '--command-timeout', '5s', ...args], {
    env: { ...process.env, ETCDCTL_API: '3' },
    timeoutMs: 20_000,
  });
}

/**
 * The leader's host dies: its berthd and etcd member killed with SIGKILL. Answers the leader that
 * manager node `via` sees next (a different one, within 30 s).
 */
export async function killLeaderHost(c: TestCluster, leader: string, dead: number, via: number): Promise<string> {
  const d = c.node(dead).daemon;
  const etcdPid = Number(readFileSync(join(d.dataRoot, 'swarm', 'cluster', 'etcd', 'etcd.pid'), 'utf8'));
  await d.kill9();
  process.kill(etcdPid, 'SIGKILL');
  return eventually('a new leader', async () => {
    const l = (await nodesOf(c.node(via).daemon)).find((n) => n.ManagerStatus?.Leader)?.ID;
    return l && l !== leader ? l : undefined;
  }, 30_000);
}

/** The body of GET http://<host>:<port>/ (trimmed), failing after 5 s without an answer. */
export function httpGet(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path: '/', agent: false, timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (b) => (body += b));
      res.on('end', () => resolve(body.trim()));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}
