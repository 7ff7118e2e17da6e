/**
 * `docker service logs` on the manager of a three-node swarm: the logs of the tasks on every node,
 * fetched from the task's node over the swarm port with mutual TLS; --tail, --timestamps, -f; a peer
 * without a node certificate, or with a worker's, is refused.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { eventually, formSwarm, tasksOf, waitSpread } from './support.js';

/** GET on a node's swarm port with node `as`'s certificate: status and body (the answer ends: tail without follow). */
function asNode(as: TestDaemon, addr: string, path: string): Promise<{ status: number; body: string }> {
  const f = (n: string) => readFileSync(join(as.dataRoot, 'swarm', 'cluster', n), 'utf8');
  return new Promise((resolve, reject) => {
    const req = request({ host: addr, port: 2377, path, ca: f('ca.pem'), cert: f('node.pem'), key: f('node-key.pem'), checkServerIdentity: () => undefined, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (b: Buffer) => chunks.push(b));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

// Each task says where it runs once, then ticks.
const SCRIPT = 'trap "exit 0" TERM; echo "start-$(hostname)"; i=0; while :; do i=$((i+1)); echo "tick-$i"; sleep 0.3; done';

describe('service logs across nodes', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  let ids: string[] = [];
  const d1 = () => c.node(1).daemon;
  const taskIds = async () => (await tasksOf(d1(), 'chatty')).filter((t) => t.Status.State === 'running').map((t) => t.ID);

  before(async () => {
    c = await startCluster(3, reg());
    ids = (await formSwarm(c)).nodeIds;
    const r = await d1().docker(['service', 'create', '-d', '--name', 'chatty', '--mode', 'global', c.image, 'sh', '-c', SCRIPT]);
    assert.equal(r.code, 0, r.stderr);
    await waitSpread(d1(), 'chatty', Object.fromEntries(ids.map((id) => [id, 1])));
  });
  after(async () => {
    await c?.teardown();
  });

  it('shows the lines of the tasks on all three nodes, each with its task and node', async () => {
    const tasks = await taskIds();
    assert.equal(tasks.length, 3);
    const out = await eventually('every task has written its first tick', async () => {
      const r = await d1().docker(['service', 'logs', '--no-trunc', 'chatty']);
      assert.equal(r.code, 0, r.stderr);
      return tasks.every((t) => r.stdout.split('\n').some((l) => l.includes(t) && l.includes('tick-1'))) ? r.stdout : undefined;
    });
    for (const t of tasks) assert.equal(out.split('\n').filter((l) => l.includes(`.${t}@`) && /\| start-/.test(l)).length, 1, out);
    // Three containers (their hostnames) on three nodes.
    assert.equal(new Set(out.split('\n').map((l) => /\| start-(\w+)$/.exec(l)?.[1]).filter(Boolean)).size, 3, out);
    const nodes = new Set((await tasksOf(d1(), 'chatty')).filter((t) => tasks.includes(t.ID)).map((t) => t.NodeID));
    assert.equal(nodes.size, 3);
  });

  it('--tail 1 --timestamps: one line per task, each with its time', async () => {
    const r = await d1().docker(['service', 'logs', '--tail', '1', '--timestamps', '--no-trunc', 'chatty']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n').filter(Boolean);
    assert.equal(lines.length, 3, r.stdout);
    for (const l of lines) assert.match(l, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z chatty\.\S+\s+\| tick-\d+$/);
    assert.equal(new Set(lines.map((l) => /chatty\.[^.]+\.(\w+)@/.exec(l)?.[1])).size, 3, r.stdout);
  });

  it('-f follows the tasks on the other nodes as they write', async () => {
    const tasks = await taskIds();
    const child = spawn('docker', ['service', 'logs', '-f', '--tail', '0', '--no-trunc', 'chatty'], {
      env: { ...process.env, DOCKER_HOST: `unix://${d1().socket}`, DOCKER_CLI_HINTS: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
    try {
      await eventually('new ticks of every task arrive', async () => tasks.every((t) => out.split('\n').filter((l) => l.includes(t) && /tick-\d+$/.test(l)).length >= 2), 30_000, 300);
      assert.doesNotMatch(out, /start-/);
    } finally {
      child.kill('SIGTERM');
    }
  });

  it('refuses a peer without a node certificate of the cluster', async () => {
    const [t] = await taskIds();
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: c.node(2).addr, port: 2377, path: `/task-logs/${t}?stdout=1&stderr=1&tail=-1`, rejectUnauthorized: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(status, 403);
  });

  it('refuses a worker\'s certificate: only managers read other nodes\' task logs', async () => {
    const onNode2 = (await tasksOf(d1(), 'chatty')).find((t) => t.NodeID === ids[1] && t.Status.State === 'running')!.ID;
    const path = `/task-logs/${onNode2}?stdout=1&stderr=1&tail=1`;
    const asWorker = await asNode(c.node(3).daemon, c.node(2).addr, path);
    assert.equal(asWorker.status, 403, asWorker.body);
    assert.match(asWorker.body, /is not a manager/);
    const asManager = await asNode(d1(), c.node(2).addr, path);
    assert.equal(asManager.status, 200, asManager.body);
    assert.match(asManager.body, /"s":"stdout"/);
  });

  it('a node that cannot be reached costs its tasks\' lines only, with an error', async () => {
    const onNode3 = (await tasksOf(d1(), 'chatty')).find((t) => t.NodeID === ids[2] && t.Status.State === 'running')!.ID;
    await c.node(3).daemon.kill9();
    try {
      const r = await d1().docker(['service', 'logs', '--no-trunc', 'chatty']);
      assert.match(r.stderr, /Error grabbing logs: could not reach the node/);
      const others = (await taskIds()).filter((t) => t !== onNode3);
      for (const t of others) assert.ok(r.stdout.includes(`.${t}@`), r.stdout);
      assert.ok(!r.stdout.includes(`.${onNode3}@`), r.stdout);
    } finally {
      await c.node(3).daemon.restart();
    }
  });
});
