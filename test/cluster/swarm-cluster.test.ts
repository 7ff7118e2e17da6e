/**
 * A swarm of three berthd nodes (one manager, two workers), each in its own network namespace, state
 * in the etcd member the manager runs: forming (each node with its certificate from the cluster CA),
 * spreading, scaling, updates, drain and pause, placement (roles, resources, spread preferences,
 * host-mode ports), secrets and configs, a global service on a node that joins later, a dead worker,
 * a partitioned worker, a dead etcd member, and a node without the token.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate, randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isRunning as alive, useSeededRegistry, withDaemonLogs, type TestDaemon } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { LOOP, etcdctl, eventually, formSwarm, nodesOf, runningOn, spread, tasksOf, waitSpread } from './support.js';

const clusterFile = (d: TestDaemon, name: string) => readFileSync(join(d.dataRoot, 'swarm', 'cluster', name), 'utf8');
const etcdPid = (d: TestDaemon) => Number(clusterFile(d, join('etcd', 'etcd.pid')));
/** Tasks of the service waiting to be placed, with why. */
const pendingOf = async (d: TestDaemon, service: string) => (await tasksOf(d, service)).filter((t) => t.Status.State === 'pending' && t.DesiredState === 'running');

describe('swarm across three nodes', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  let ids: string[] = [];
  const d1 = () => c.node(1).daemon;
  const even = (n: number) => Object.fromEntries(ids.map((id) => [id, n]));
  /**
   * Swarm does not rebalance by itself once a node is back: a forced update of web does, to 2-2-2. Its
   * end is waited for, not only the spread, which reads 2-2-2 midway too: slots still to be replaced
   * would get new tasks on a node cut off or killed meanwhile once it is back (it runs the fewest).
   */
  const rebalance = async () => {
    assert.equal((await d1().docker(['service', 'update', '-d', '--force', 'web'])).code, 0);
    await eventually('the forced update of web completed', async () => (await d1().request('GET', '/services/web')).json<{ UpdateStatus?: { State?: string } }>().UpdateStatus?.State === 'completed', 120_000, 300);
    await waitSpread(d1(), 'web', even(2));
  };

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
    assert.match(ls.stderr, /This node is not a swarm manager\. Worker nodes can't be used to view or modify cluster state\./);
    const cli = await d1().docker(['node', 'ls', '--format', '{{.Hostname}} {{.Status}} {{.ManagerStatus}}']);
    assert.equal(cli.stdout.trim().split('\n').filter((l) => /\bReady\b/.test(l)).length, 3, cli.stdout);
    // Each node holds a certificate the cluster CA signed at its join, naming the node, its role and the cluster.
    const clusterId = (await d1().request('GET', '/swarm')).json().ID as string;
    const ca = new X509Certificate(clusterFile(d1(), 'ca.pem'));
    for (const [k, role] of [[0, 'manager'], [1, 'worker'], [2, 'worker']] as const) {
      const d = c.node(k + 1).daemon;
      assert.equal(clusterFile(d, 'ca.pem'), clusterFile(d1(), 'ca.pem'), `node ${k + 1} trusts the cluster CA`);
      const cert = new X509Certificate(clusterFile(d, 'node.pem'));
      assert.ok(cert.checkIssued(ca) && cert.verify(ca.publicKey), `node ${k + 1}'s certificate is signed by the cluster CA`);
      assert.equal(cert.subject, `O=${clusterId}\nOU=swarm-${role}\nCN=${ids[k]}`);
      assert.ok(cert.checkIP(c.node(k + 1).addr), `node ${k + 1}'s certificate names its address`);
    }
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
    // The removed slots' tasks go from the cluster too, those the workers ran as well (the leader
    // deletes their records once their node reports them gone): three tasks are left, and no container.
    await eventually('only the three tasks of the slots left', async () => (await tasksOf(d1(), 'web')).length === 3, 30_000, 300);
    for (const n of c.nodes.slice(0, 3)) assert.equal((await n.daemon.docker(['ps', '-aq', '--filter', 'label=com.docker.swarm.service.name=web'])).stdout.trim().split('\n').length, 1, `node ${n.index}`);
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
    // Paused, the node keeps its tasks and takes no new one.
    assert.equal((await d1().docker(['node', 'update', '--availability', 'pause', ids[2]!])).code, 0);
    assert.equal((await d1().docker(['service', 'scale', '-d', 'zoned=3'])).code, 0);
    const [waiting] = await eventually('a third zoned task pending', async () => {
      const p = await pendingOf(d1(), 'zoned');
      return p.length === 1 && p[0]!.Status.Err ? p : undefined;
    });
    assert.equal(waiting!.Status.Err, 'no suitable node (scheduling constraints not satisfied on 2 nodes; 1 node not available for new tasks)');
    assert.deepEqual(Object.fromEntries(await spread(d1(), 'zoned')), { [ids[2]!]: 2 });
    assert.equal(await runningOn(c.node(3).daemon, 'zoned'), 2);
    assert.equal((await d1().docker(['node', 'update', '--availability', 'active', ids[2]!])).code, 0);
    await waitSpread(d1(), 'zoned', { [ids[2]!]: 3 });
    assert.equal((await d1().docker(['service', 'rm', 'zoned'])).code, 0);
  });

  it('places by role, reserved resources, spread preferences and host-mode ports, saying why a task waits', async () => {
    const labels: Record<number, string> = { 0: 'east', 1: 'east', 2: 'west' };
    for (const [k, dc] of Object.entries(labels)) assert.equal((await d1().docker(['node', 'update', '--label-add', `dc=${dc}`, ids[Number(k)]!])).code, 0);
    // Half of the tasks go to the west's one node, half over the east's two.
    const pref = await d1().docker(['service', 'create', '-d', '--name', 'pref', '--replicas', '4', '--placement-pref', 'spread=node.labels.dc', c.image, 'sh', '-c', LOOP]);
    assert.equal(pref.code, 0, pref.stderr);
    await waitSpread(d1(), 'pref', { [ids[0]!]: 1, [ids[1]!]: 1, [ids[2]!]: 2 });
    // Workers only, and room for one such reservation per node: two run, the third waits.
    const mem = Number((await d1().docker(['node', 'inspect', '--format', '{{.Description.Resources.MemoryBytes}}', ids[1]!])).stdout.trim());
    assert.ok(mem > 0);
    const big = await d1().docker(['service', 'create', '-d', '--name', 'big', '--replicas', '3', '--constraint', 'node.role==worker',
      '--reserve-memory', String(Math.ceil(mem * 0.6)), c.image, 'sh', '-c', LOOP]);
    assert.equal(big.code, 0, big.stderr);
    await waitSpread(d1(), 'big', { [ids[1]!]: 1, [ids[2]!]: 1 });
    const bigWaits = await eventually('a big task pending', async () => (await pendingOf(d1(), 'big')).find((t) => t.Status.Err));
    assert.equal(bigWaits.Status.Err, 'no suitable node (insufficient resources on 2 nodes; scheduling constraints not satisfied on 1 node)');
    // One task per node can publish a host-mode port.
    const port = randomInt(20_000, 30_000);
    const hp = await d1().docker(['service', 'create', '-d', '--name', 'hostport', '--replicas', '4', '--publish', `mode=host,published=${port},target=80`, c.image, 'sh', '-c', LOOP]);
    assert.equal(hp.code, 0, hp.stderr);
    await waitSpread(d1(), 'hostport', even(1));
    const hpWaits = await eventually('a hostport task pending', async () => (await pendingOf(d1(), 'hostport')).find((t) => t.Status.Err));
    assert.equal(hpWaits.Status.Err, 'no suitable node (host-mode port already in use on 3 nodes)');
    for (const name of ['pref', 'big', 'hostport']) assert.equal((await d1().docker(['service', 'rm', name])).code, 0);
    for (const n of c.nodes.slice(0, 3)) await eventually(`node ${n.index} runs none of them`, async () => (await runningOn(n.daemon, 'pref')) + (await runningOn(n.daemon, 'big')) + (await runningOn(n.daemon, 'hostport')) === 0, 30_000);
  });

  it('hands a secret and a config to task containers on other nodes (stored sealed in etcd)', async () => {
    const s = await d1().docker(['secret', 'create', 'token', '-'], { input: 'sesame-42' });
    assert.equal(s.code, 0, s.stderr);
    const cf = await d1().docker(['config', 'create', 'app.conf', '-'], { input: 'colour=teal-17' });
    assert.equal(cf.code, 0, cf.stderr);
    const r = await d1().docker(['service', 'create', '-d', '--name', 'sec', '--mode', 'global', '--secret', 'token', '--config', 'src=app.conf,target=/etc/app.conf', c.image, 'sh', '-c', LOOP]);
    assert.equal(r.code, 0, r.stderr);
    await waitSpread(d1(), 'sec', even(1));
    const filesOn = async (d: TestDaemon) => {
      const id = (await d.docker(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=sec'])).stdout.trim();
      const cat = await d.docker(['exec', id, 'sh', '-c', 'cat /run/secrets/token; echo; cat /etc/app.conf']);
      return `${cat.stdout}${cat.stderr}`;
    };
    for (const n of c.nodes.slice(0, 3)) assert.equal(await filesOn(n.daemon), 'sesame-42\ncolour=teal-17', `node ${n.index}`);
    // In etcd the secret and the config are sealed: their text is nowhere under the prefix.
    const dump = await etcdctl(c.node(1).daemon, ['get', '--prefix', '/berth/swarm/']);
    assert.equal(dump.code, 0, dump.stderr);
    assert.match(dump.stdout, /\/berth\/swarm\/secrets\//);
    assert.match(dump.stdout, /\/berth\/swarm\/configs\//);
    assert.match(dump.stdout, /\/berth\/swarm\/services\//);
    for (const text of ['sesame-42', 'teal-17', Buffer.from('sesame-42').toString('base64'), Buffer.from('colour=teal-17').toString('base64')]) assert.ok(!dump.stdout.includes(text), text);
    // Without a client certificate etcd answers nothing.
    assert.notEqual((await etcdctl(c.node(1).daemon, ['get', '--prefix', '/berth/swarm/'], false)).code, 0);

    // A node that joins later gets the global service's task, with its files; gone again, its task goes.
    const d4 = c.node(4).daemon;
    const token = (await d1().docker(['swarm', 'join-token', '-q', 'worker'])).stdout.trim();
    const join4 = await d4.docker(['swarm', 'join', '--token', token, `${c.node(1).addr}:2377`]);
    assert.equal(join4.code, 0, join4.stderr);
    const id4 = (await d4.docker(['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim();
    await waitSpread(d1(), 'sec', { ...even(1), [id4]: 1 });
    assert.equal(await filesOn(d4), 'sesame-42\ncolour=teal-17');
    assert.equal((await d4.docker(['swarm', 'leave'])).code, 0);
    await eventually('node 4 down', async () => (await nodesOf(d1())).find((n) => n.ID === id4)?.Status.State === 'down', 30_000);
    assert.equal((await d1().docker(['node', 'rm', id4])).code, 0);
    await waitSpread(d1(), 'sec', even(1));
    assert.equal((await d1().docker(['service', 'rm', 'sec'])).code, 0);
  });

  it('a worker whose berthd is killed is marked down; its tasks move; back, its stale tasks stop', async () => {
    await rebalance();
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
    await rebalance();
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

  it('the etcd member berthd runs is started again when it dies, and the cluster goes on', async () => {
    const before = etcdPid(d1());
    process.kill(before, 'SIGKILL');
    const now = await eventually('a new etcd member', async () => {
      const pid = etcdPid(d1());
      return pid !== before && alive(pid) ? pid : undefined;
    }, 20_000, 200);
    assert.ok(d1().logs().includes('the etcd member exited; started again'));
    // On its data: the cluster is as it was, and changes go through.
    const scaled = await d1().docker(['service', 'scale', '-d', 'web=3']);
    // On failure: the CLI's error and what berthd logged meanwhile (its request error among it).
    assert.equal(scaled.code, 0, `${scaled.stderr}\n${d1().logTail(40)}`);
    await eventually('3 tasks running', async () => [...(await spread(d1(), 'web')).values()].reduce((a, b) => a + b, 0) === 3 && (await tasksOf(d1(), 'web')).filter((t) => t.DesiredState === 'running').length === 3, 60_000, 300);
    assert.equal(etcdPid(d1()), now);
    assert.deepEqual((await nodesOf(d1())).map((n) => n.Status.State), ['ready', 'ready', 'ready']);
  });
});
