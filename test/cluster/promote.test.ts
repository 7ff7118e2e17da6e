/**
 * `docker node promote` makes a worker a full manager: an etcd member (learner, then voting), so with
 * two managers and a promoted worker the cluster keeps its quorum when the leader's host dies (berthd
 * and its etcd member killed with SIGKILL); `demote` takes the member out again.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { LOOP, etcdctl, eventually, formSwarm, killLeaderHost, nodesOf, tasksOf, waitSpread } from './support.js';

/** The names (node ids) of etcd's voting members and of its learners, as node `via`'s etcd sees them. */
async function members(c: TestCluster, via: number): Promise<{ voting: string[]; learners: string[] }> {
  const r = await etcdctl(c.node(via).daemon, ['member', 'list', '-w', 'json']);
  assert.equal(r.code, 0, r.stderr);
  const list = (JSON.parse(r.stdout) as { members: { name?: string; isLearner?: boolean }[] }).members;
  return { voting: list.filter((m) => !m.isLearner).map((m) => m.name ?? '').sort(), learners: list.filter((m) => m.isLearner).map((m) => m.name ?? '') };
}

describe('node promote and demote change etcd membership', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  let ids: string[] = [];

  before(async () => {
    c = await startCluster(3, reg());
    ids = (await formSwarm(c, 2)).nodeIds;
  });
  after(async () => {
    await c?.teardown();
  });

  it('a promoted worker becomes a voting etcd member; demoted, it leaves; promoted again, it is back', async () => {
    assert.deepEqual((await members(c, 1)).voting, [ids[0]!, ids[1]!].sort());
    const p = await c.node(1).daemon.docker(['node', 'promote', ids[2]!]);
    assert.equal(p.code, 0, p.stderr);
    await eventually('three voting members', async () => (await members(c, 1)).voting.length === 3 && (await members(c, 1)).learners.length === 0, 60_000, 300);
    assert.deepEqual((await members(c, 1)).voting, [...ids].sort());
    // It runs for leader once etcd lets it (not before its user has root, refused meanwhile).
    const campaigns = c.node(3).daemon.logs().split('\n').filter((l) => l.includes('swarm leader campaign ended'));
    assert.deepEqual(campaigns, []);
    const d = await c.node(1).daemon.docker(['node', 'demote', ids[2]!]);
    assert.equal(d.code, 0, d.stderr);
    await eventually('node 3 out of etcd', async () => (await members(c, 1)).voting.length === 2, 60_000, 300);
    assert.deepEqual((await members(c, 1)).voting, [ids[0]!, ids[1]!].sort());
    assert.equal((await c.node(1).daemon.docker(['node', 'promote', ids[2]!])).code, 0);
    await eventually('three voting members again', async () => (await members(c, 1)).voting.length === 3, 60_000, 300).catch((err) => {
      throw new Error(`${(err as Error).message}\n${c.node(3).daemon.logTail(40)}`);
    });
  });

  it('demoted and at once promoted again (its member removed before it heard either): a voting member again', async () => {
    for (let round = 0; round < 2; round++) {
      await eventually('node 3 a voting member', async () => (await members(c, 1)).voting.includes(ids[2]!) && (await members(c, 1)).learners.length === 0, 60_000, 300);
      // Node 3's berthd held still meanwhile, so it hears both changes at once (its etcd member runs on).
      const pid = c.node(3).daemon.pid;
      process.kill(pid, 'SIGSTOP');
      try {
        for (const verb of ['demote', 'promote']) {
          const r = await c.node(1).daemon.docker(['node', verb, ids[2]!]);
          assert.equal(r.code, 0, r.stderr);
        }
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      await eventually(`round ${round}: three voting members again`, async () => (await members(c, 1)).voting.length === 3 && (await members(c, 1)).learners.length === 0, 60_000, 300).catch((err) => {
        throw new Error(`${(err as Error).message}\n${c.node(3).daemon.logTail(40)}`);
      });
    }
  });

  it('the old leader\'s host dies: the two others keep the quorum, one leads, the service converges', async () => {
    const r = await c.node(1).daemon.docker(['service', 'create', '-d', '--name', 'web', '--replicas', '4', c.image, 'sh', '-c', LOOP]);
    assert.equal(r.code, 0, r.stderr);
    await eventually('four tasks running', async () => (await tasksOf(c.node(1).daemon, 'web')).filter((t) => t.Status.State === 'running').length === 4, 90_000, 300);
    const leader = await eventually('a leader', async () => (await nodesOf(c.node(2).daemon)).find((n) => n.ManagerStatus?.Leader)?.ID, 30_000);
    const dead = ids.indexOf(leader) + 1;
    const d = c.node(dead).daemon;
    const via = dead === 3 ? 2 : 3;
    const next = await killLeaderHost(c, leader, dead, via);
    assert.notEqual(next, leader);
    const others = ids.filter((id) => id !== leader);
    await waitSpread(c.node(via).daemon, 'web', Object.fromEntries(others.map((id) => [id, 2])), 90_000);
    // Writes still commit: a scale goes through and converges.
    assert.equal((await c.node(via).daemon.docker(['service', 'scale', '-d', 'web=2'])).code, 0);
    await waitSpread(c.node(via).daemon, 'web', Object.fromEntries(others.map((id) => [id, 1])), 90_000);
    await d.restart();
  });
});
