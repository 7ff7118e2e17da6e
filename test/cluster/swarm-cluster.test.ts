/**
 * A swarm of three berthd nodes (one manager, two workers), each in its own network namespace, state
 * in the etcd member the manager runs: forming, spreading, scaling, updates, drain, secrets, a dead
 * worker, a partitioned worker, and a node without the token.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry, withDaemonLogs } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { LOOP, etcdctl, eventually, formSwarm, nodesOf, runningOn, spread, tasksOf, waitSpread } from './support.js';

describe('swarm across three nodes', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  let ids: string[] = [];
  const d1 = () => c.node(1).daemon;
  const even = (n: number) => Object.fromEntries(ids.map((id) => [id, n]));

  before(async () => {
    c = await startCluster(4, reg());
  });
  after(async () => {
    await c?.teardown();
  });

  it('forms: init on node 1, two workers join through the CLI, all Ready', async () => {
    const formed = await formSwarm({ ...c, nodes: c.nodes.slice(0, 3) });
    ids = formed.nodeIds;
    assert.equal(new Set(ids).size, 3);
    const nodes = await eventually('three ready nodes', async () => {
      const ns = await nodesOf(d1());
      return ns.length === 3 && ns.every((n) => n.Status.State === 'ready') ? ns : undefined;
    });
    assert.deepEqual(nodes.map((n) => n.Spec.Role).sort(), ['manager', 'worker', 'worker']);
    assert.equal(nodes.find((n) => n.ID === ids[0])!.ManagerStatus?.Leader, true);
    assert.deepEqual(nodes.map((n) => n.Status.Addr).sort(), [c.node(1).addr, c.node(2).addr, c.node(3).addr].sort());
    const info = await c.node(2).daemon.docker(['info', '--format', '{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}} {{.Swarm.NodeAddr}} {{len .Swarm.RemoteManagers}}']);
    assert.equal(info.stdout.trim(), `active false ${c.node(2).addr} 1`);
    const ls = await c.node(2).daemon.docker(['service', 'ls']);
    assert.notEqual(ls.code, 0);
    assert.match(ls.stderr, /This node is not a swarm manager/);
    const cli = await d1().docker(['node', 'ls', '--format', '{{.Hostname}} {{.Status}} {{.ManagerStatus}}']);
    assert.equal(cli.stdout.trim().split('\n').filter((l) => /\bReady\b/.test(l)).length, 3, cli.stdout);
  });

  it('refuses a node with a wrong token, with dockerd\'s message', async () => {
    const formedToken = (await d1().docker(['swarm', 'join-token', '-q', 'worker'])).stdout.trim();
    const wrong = formedToken.replace(/-[0-9a-z]{25}$/, '-' + 'x'.repeat(25));
    const r = await c.node(4).daemon.docker(['swarm', 'join', '--token', wrong, `${c.node(1).addr}:2377`]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /A valid join token is necessary to join this cluster/);
    // A token of another CA (its digest changed) is refused by the joining node itself.
    const otherCa = formedToken.replace(/^SWMTKN-1-[0-9a-z]{50}/, 'SWMTKN-1-' + '1'.repeat(50));
    const r2 = await c.node(4).daemon.docker(['swarm', 'join', '--token', otherCa, `${c.node(1).addr}:2377`]);
    assert.notEqual(r2.code, 0);
    assert.match(r2.stderr, /CA does not match the join token/);
    assert.equal((await c.node(4).daemon.docker(['info', '--format', '{{.Swarm.LocalNodeState}}'])).stdout.trim(), 'inactive');
    assert.equal((await nodesOf(d1())).length, 3);
  });

  it('spreads a 6-replica service 2-2-2, and each node runs its own', async () => {
    const r = await d1().docker(['service', 'create', '-d', '--name', 'web', '--replicas', '6', c.image, 'sh', '-c', LOOP]);
    assert.equal(r.code, 0, r.stderr);
    await withDaemonLogs(d1(), () => waitSpread(d1(), 'web', even(2)));
    for (const n of c.nodes.slice(0, 3)) assert.equal(await runningOn(n.daemon, 'web'), 2, `node ${n.index}`);
  });

  it('scales up to 9 (3-3-3) and down to 3 (1-1-1)', async () => {
    assert.equal((await d1().docker(['service', 'scale', '-d', 'web=9'])).code, 0);
    await waitSpread(d1(), 'web', even(3));
    assert.equal((await d1().docker(['service', 'scale', '-d', 'web=3'])).code, 0);
    await waitSpread(d1(), 'web', even(1));
    for (const n of c.nodes.slice(0, 3)) await eventually(`node ${n.index} down to 1`, async () => (await runningOn(n.daemon, 'web')) === 1);
  });

  it('rolls an update across the nodes and rolls it back', async () => {
    const up = await d1().docker(['service', 'update', '-d', '--env-add', 'V=2', '--update-parallelism', '1', 'web']);
    assert.equal(up.code, 0, up.stderr);
    await eventually('every running task has V=2, one per node', async () => {
      const ts = (await tasksOf(d1(), 'web')).filter((t) => t.DesiredState === 'running' && t.Status.State === 'running');
      return ts.length === 3 && new Set(ts.map((t) => t.NodeID)).size === 3 && ts.every((t) => t.Spec.ContainerSpec.Env?.includes('V=2'));
    }, 90_000, 300);
    const back = await d1().docker(['service', 'rollback', '-d', 'web']);
    assert.equal(back.code, 0, back.stderr);
    await eventually('rolled back everywhere', async () => {
      const ts = (await tasksOf(d1(), 'web')).filter((t) => t.DesiredState === 'running' && t.Status.State === 'running');
      return ts.length === 3 && new Set(ts.map((t) => t.NodeID)).size === 3 && ts.every((t) => !t.Spec.ContainerSpec.Env?.includes('V=2'));
    }, 90_000, 300);
  });

  it('drain moves a node\'s tasks to the others; active takes new ones again', async () => {
    assert.equal((await d1().docker(['service', 'scale', '-d', 'web=6'])).code, 0);
    await waitSpread(d1(), 'web', even(2));
    assert.equal((await d1().docker(['node', 'update', '--availability', 'drain', ids[2]!])).code, 0);
    await waitSpread(d1(), 'web', { [ids[0]!]: 3, [ids[1]!]: 3 });
    await eventually('node 3 runs nothing', async () => (await runningOn(c.node(3).daemon, 'web')) === 0);
    assert.equal((await d1().docker(['node', 'update', '--availability', 'active', '--label-add', 'zone=c', ids[2]!])).code, 0);
    const n3 = (await nodesOf(d1())).find((n) => n.ID === ids[2])!;
    assert.deepEqual(n3.Spec.Labels, { zone: 'c' });
    // A constraint on the label places a new service there only.
    const r = await d1().docker(['service', 'create', '-d', '--name', 'zoned', '--replicas', '2', '--constraint', 'node.labels.zone==c', c.image, 'sh', '-c', LOOP]);
    assert.equal(r.code, 0, r.stderr);
    await waitSpread(d1(), 'zoned', { [ids[2]!]: 2 });
    assert.equal((await d1().docker(['service', 'rm', 'zoned'])).code, 0);
  });

  it('hands a secret to task containers on other nodes (stored sealed in etcd)', async () => {
    const s = await d1().docker(['secret', 'create', 'token', '-'], { input: 'sesame-42' });
    assert.equal(s.code, 0, s.stderr);
    const r = await d1().docker(['service', 'create', '-d', '--name', 'sec', '--mode', 'global', '--secret', 'token', c.image, 'sh', '-c', LOOP]);
    assert.equal(r.code, 0, r.stderr);
    await waitSpread(d1(), 'sec', even(1));
    for (const n of c.nodes.slice(0, 3)) {
      const id = (await n.daemon.docker(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=sec'])).stdout.trim();
      const cat = await n.daemon.docker(['exec', id, 'cat', '/run/secrets/token']);
      assert.equal(cat.stdout, 'sesame-42', `node ${n.index}: ${cat.stderr}`);
    }
    // In etcd the secret is sealed: its text is nowhere under the prefix.
    const dump = await etcdctl(c.node(1).daemon, ['get', '--prefix', '/berth/swarm/']);
    assert.equal(dump.code, 0, dump.stderr);
    assert.match(dump.stdout, /\/berth\/swarm\/secrets\//);
    assert.match(dump.stdout, /\/berth\/swarm\/services\//);
    assert.doesNotMatch(dump.stdout, /sesame-42/);
    assert.doesNotMatch(dump.stdout, new RegExp(Buffer.from('sesame-42').toString('base64')));
    // Without a client certificate etcd answers nothing.
    assert.notEqual((await etcdctl(c.node(1).daemon, ['get', '--prefix', '/berth/swarm/'], false)).code, 0);
    assert.equal((await d1().docker(['service', 'rm', 'sec'])).code, 0);
  });

  it('a worker whose berthd is killed is marked down; its tasks move; back, its stale tasks stop', async () => {
    // Swarm does not rebalance by itself once the drained node is back: a forced update does.
    assert.equal((await d1().docker(['service', 'update', '-d', '--force', 'web'])).code, 0);
    await waitSpread(d1(), 'web', even(2), 120_000);
    assert.equal(await runningOn(c.node(3).daemon, 'web'), 2);
    await c.node(3).daemon.kill9();
    await eventually('node 3 down', async () => (await nodesOf(d1())).find((n) => n.ID === ids[2])?.Status.State === 'down', 30_000);
    await waitSpread(d1(), 'web', { [ids[0]!]: 3, [ids[1]!]: 3 });
    await c.node(3).daemon.restart();
    await eventually('node 3 ready', async () => (await nodesOf(d1())).find((n) => n.ID === ids[2])?.Status.State === 'ready', 30_000);
    await eventually('node 3 shut its stale tasks down', async () => (await runningOn(c.node(3).daemon, 'web')) === 0, 30_000);
    // The service is back at its 6 replicas (right after node 3 returns, one task may be between states).
    await eventually('6 tasks running again', async () => [...(await spread(d1(), 'web')).values()].reduce((a, b) => a + b, 0) === 6, 30_000);
  });

  it('a partitioned worker (link down) is marked down; its tasks move; reconnected, its stale tasks stop', async () => {
    assert.equal((await d1().docker(['service', 'update', '-d', '--force', 'web'])).code, 0);
    await waitSpread(d1(), 'web', even(2), 120_000);
    c.net.setLink(2, false);
    try {
      await eventually('node 2 down', async () => (await nodesOf(d1())).find((n) => n.ID === ids[1])?.Status.State === 'down', 30_000);
      await waitSpread(d1(), 'web', { [ids[0]!]: 3, [ids[2]!]: 3 });
      // Cut off, node 2 still runs what it had.
      assert.equal(await runningOn(c.node(2).daemon, 'web'), 2);
    } finally {
      c.net.setLink(2, true);
    }
    await eventually('node 2 ready', async () => (await nodesOf(d1())).find((n) => n.ID === ids[1])?.Status.State === 'ready', 30_000);
    await eventually('node 2 shut its stale tasks down', async () => (await runningOn(c.node(2).daemon, 'web')) === 0, 30_000);
  });
});
