/**
 * Three managers (three etcd members): one leads; when its host dies (berthd and its etcd member
 * killed with SIGKILL) another takes over and the service converges; the dead node comes back and
 * shuts its stale tasks down; so too when the leader's link is cut instead (its etcd member then
 * silent, not gone), perhaps in the middle of a rolling update; every daemon restarted, the service
 * converges again. Also leave, demote/promote, node rm and token rotation.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { run, useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { LOOP, etcdctl, eventually, formSwarm, killLeaderHost, nodesOf, runningOn, taskContainers, tasksOf, waitSpread, waitStaleGone } from './support.js';

/** The last lines of a node's log that are not debug lines. */
const notDebug = (d: TestDaemon) => d.logTail(3000).split('\n').filter((l) => !l.includes('"level":"debug"')).slice(-40).join('\n');

describe('swarm with three managers', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  let ids: string[] = [];
  const idx = (id: string) => ids.indexOf(id) + 1;

  before(async () => {
    c = await startCluster(4, reg());
  });
  after(async () => {
    await c?.teardown();
  });

  async function leaderOf(via: number): Promise<string> {
    return eventually('a leader', async () => (await nodesOf(c.node(via).daemon)).find((n) => n.ManagerStatus?.Leader)?.ID, 30_000);
  }

  it('three managers join; one leads; every manager answers for the cluster', async () => {
    ids = (await formSwarm({ ...c, nodes: c.nodes.slice(0, 3) }, 3)).nodeIds;
    for (const i of [1, 2, 3]) {
      const ns = await eventually(`node ${i} sees three ready managers`, async () => {
        const list = await nodesOf(c.node(i).daemon);
        return list.length === 3 && list.every((n) => n.Status.State === 'ready' && n.Spec.Role === 'manager') ? list : undefined;
      });
      assert.equal(ns.filter((n) => n.ManagerStatus?.Leader).length, 1);
    }
    assert.equal(await leaderOf(2), ids[0]);
    // Each manager runs a voting etcd member (joined as learners, promoted once caught up).
    const members = await eventually('three voting etcd members', async () => {
      const r = await etcdctl(c.node(1).daemon, ['member', 'list', '-w', 'json']);
      const list = (JSON.parse(r.stdout || '{}') as { members?: { name: string; isLearner?: boolean; peerURLs: string[]; clientURLs: string[] }[] }).members ?? [];
      return list.length === 3 && list.every((m) => !m.isLearner) ? list : undefined;
    });
    assert.deepEqual(members.map((m) => m.name).sort(), [...ids].sort());
    // Members talk to each other, and nodes to them, over TLS only, each on its node's address.
    for (const m of members) {
      const addr = c.node(idx(m.name)).addr;
      assert.ok([...m.peerURLs, ...m.clientURLs].every((u) => u.startsWith(`https://${addr}:`)), JSON.stringify(m));
    }
    // A peer without a certificate of the cluster CA is refused on the peer port.
    const peer = new URL(members[0]!.peerURLs[0]!);
    const bare = await run('curl', ['-sk', '--max-time', '5', '-o', '/dev/null', '-w', '%{http_code}', `https://${peer.host}/members`], { timeoutMs: 15_000 });
    assert.notEqual(bare.stdout.trim(), '200', 'the peer port answers a client without a certificate');
    const info = await c.node(3).daemon.docker(['info', '--format', '{{.Swarm.ControlAvailable}} {{.Swarm.Managers}} {{.Swarm.Nodes}}']);
    assert.equal(info.stdout.trim(), 'true 3 3');
    // A service created through a follower is placed by the leader.
    const r = await c.node(2).daemon.docker(['service', 'create', '-d', '--name', 'web', '--replicas', '6', c.image, 'sh', '-c', LOOP]);
    assert.equal(r.code, 0, r.stderr);
    await waitSpread(c.node(3).daemon, 'web', Object.fromEntries(ids.map((id) => [id, 2])));
  });

  it('rotates the worker token: the old one is refused, the new one works', async () => {
    const d1 = c.node(1).daemon;
    const old = (await d1.docker(['swarm', 'join-token', '-q', 'worker'])).stdout.trim();
    const rot = await d1.docker(['swarm', 'join-token', '--rotate', '-q', 'worker']);
    assert.equal(rot.code, 0, rot.stderr);
    const fresh = rot.stdout.trim();
    assert.notEqual(fresh, old);
    assert.equal(fresh.split('-')[2], old.split('-')[2], 'the CA digest stays');
    const refused = await c.node(4).daemon.docker(['swarm', 'join', '--token', old, `${c.node(2).addr}:2377`]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /A valid join token is necessary to join this cluster/);
    const ok = await c.node(4).daemon.docker(['swarm', 'join', '--token', fresh, `${c.node(2).addr}:2377`]);
    assert.equal(ok.code, 0, ok.stderr);
    const id4 = (await c.node(4).daemon.docker(['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim();
    await eventually('node 4 ready', async () => (await nodesOf(d1)).find((n) => n.ID === id4)?.Status.State === 'ready');
    // Promote and demote change the role; a worker leaves; a down worker is removed.
    assert.equal((await d1.docker(['node', 'promote', id4])).code, 0);
    await eventually('node 4 a manager', async () => (await c.node(4).daemon.docker(['info', '--format', '{{.Swarm.ControlAvailable}}'])).stdout.trim() === 'true');
    assert.equal((await d1.docker(['node', 'demote', id4])).code, 0);
    await eventually('node 4 a worker', async () => (await c.node(4).daemon.docker(['info', '--format', '{{.Swarm.ControlAvailable}}'])).stdout.trim() === 'false');
    const rmLive = await d1.docker(['node', 'rm', id4]);
    assert.notEqual(rmLive.code, 0);
    assert.match(rmLive.stderr, /is not down and can't be removed/);
    assert.equal((await c.node(4).daemon.docker(['swarm', 'leave'])).code, 0);
    assert.equal((await c.node(4).daemon.docker(['info', '--format', '{{.Swarm.LocalNodeState}}'])).stdout.trim(), 'inactive');
    await eventually('node 4 down', async () => (await nodesOf(d1)).find((n) => n.ID === id4)?.Status.State === 'down');
    assert.equal((await d1.docker(['node', 'rm', id4])).code, 0);
    assert.equal((await nodesOf(d1)).length, 3);
  });

  it('the leader\'s host dies: another manager leads within seconds and the service converges', async () => {
    const leader = await leaderOf(2);
    const dead = idx(leader);
    const d = c.node(dead).daemon;
    const via = dead === 1 ? 2 : 1;
    const next = await killLeaderHost(c, leader, dead, via);
    assert.notEqual(next, leader);
    const others = ids.filter((id) => id !== leader);
    await waitSpread(c.node(via).daemon, 'web', Object.fromEntries(others.map((id) => [id, 3])), 90_000);
    // Back again (its etcd member restarted by berthd): it holds no stale task.
    await d.restart();
    await eventually('the old leader ready again', async () => (await nodesOf(c.node(via).daemon)).find((n) => n.ID === leader)?.Status.State === 'ready', 60_000);
    await eventually('its stale tasks shut down', async () => (await runningOn(d, 'web')) === 0, 60_000);
  });

  it('the leader\'s link is cut: another manager leads and the service converges; back, it follows and its stale tasks stop', async () => {
    // Spread over all three again first (a swarm does not rebalance by itself). The update is still
    // under way when the spread is reached: the cut may come in the middle of it, the new leader
    // carries it on, and may place its last tasks on the cut node once that is back.
    assert.equal((await c.node(1).daemon.docker(['service', 'update', '-d', '--force', 'web'])).code, 0);
    await waitSpread(c.node(1).daemon, 'web', Object.fromEntries(ids.map((id) => [id, 2])), 120_000);
    const leader = await leaderOf(1);
    const cut = idx(leader);
    const d = c.node(cut).daemon;
    const via = c.node(cut === 1 ? 2 : 1).daemon;
    const others = ids.filter((id) => id !== leader);
    const tails = (err: Error) => {
      throw new Error(`${err.message}\n${c.nodes.slice(0, 3).map((n) => `node ${n.index}:\n${notDebug(n.daemon)}`).join('\n')}`);
    };
    c.net.setLink(cut, false);
    let stale: string[];
    try {
      // The others' etcd clients leave the cut node's member (its connections go silent, nothing resets them).
      await eventually('a new leader', async () => {
        const l = (await nodesOf(via)).find((n) => n.ManagerStatus?.Leader)?.ID;
        return l && l !== leader ? l : undefined;
      }, 30_000).catch(tails);
      await eventually('the cut node down', async () => (await nodesOf(via)).find((n) => n.ID === leader)?.Status.State === 'down', 30_000).catch(tails);
      await waitSpread(via, 'web', Object.fromEntries(others.map((id) => [id, 3])), 90_000);
      // Cut off, it still runs what it had (and what it placed on itself before it knew it led no more).
      stale = await taskContainers(d, 'web');
      assert.ok(stale.length > 0);
    } finally {
      c.net.setLink(cut, true);
    }
    await eventually('the old leader ready again', async () => (await nodesOf(via)).find((n) => n.ID === leader)?.Status.State === 'ready', 60_000).catch(tails);
    // Its stale tasks stop; what it runs then is only what the new leader placed there since.
    await waitStaleGone(d, leader, via, 'web', stale).catch(tails);
    // Every manager sees the same one leader, and the same six running tasks, one per slot.
    await eventually('one leader, alike on every manager', async () => {
      const seen = await Promise.all([1, 2, 3].map(async (i) => (await nodesOf(c.node(i).daemon)).filter((n) => n.ManagerStatus?.Leader).map((n) => n.ID).join()));
      return seen.every((l) => l && !l.includes(',') && l === seen[0]);
    }, 30_000).catch(tails);
    await eventually('six tasks, one per slot, alike on every manager', async () => {
      const seen = await Promise.all([1, 2, 3].map(async (i) => {
        const live = (await tasksOf(c.node(i).daemon, 'web')).filter((t) => t.DesiredState === 'running' && t.Status.State === 'running');
        return new Set(live.map((t) => t.Slot)).size === 6 ? live.map((t) => `${t.ID}@${t.NodeID}`).sort().join() : 'not yet';
      }));
      return seen.every((x) => x !== 'not yet' && x === seen[0]);
    }, 60_000).catch(tails);
  });

  it('every daemon restarted: the service converges to its replicas', async () => {
    for (const n of c.nodes.slice(0, 3)) await n.daemon.stop();
    for (const n of c.nodes.slice(0, 3)) await n.daemon.restart();
    await leaderOf(1);
    await eventually('six running tasks', async () => {
      let sum = 0;
      for (const n of c.nodes.slice(0, 3)) sum += await runningOn(n.daemon, 'web');
      return sum === 6;
    }, 90_000, 500);
    assert.equal((await c.node(1).daemon.docker(['service', 'rm', 'web'])).code, 0);
    const left: number[] = [];
    await eventually('no task container left', async () => {
      for (const n of c.nodes.slice(0, 3)) left[n.index - 1] = await runningOn(n.daemon, 'web');
      return left.every((x) => x === 0);
    }, 60_000).catch((err: Error) => {
      const tails = c.nodes.slice(0, 3).map((n) => `node ${n.index} (${left[n.index - 1]} left):\n${notDebug(n.daemon)}`);
      throw new Error(`${err.message}\n${tails.join('\n')}`);
    });
  });
});
