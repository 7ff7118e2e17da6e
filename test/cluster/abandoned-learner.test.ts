/**
 * A learner etcd member added for a join that never started it (its joiner failed or gave up) would
 * refuse every later manager join and promotion: etcd takes one learner at a time. The leader removes
 * such a member once it has stayed unstarted past a grace period, and not before.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { etcdctl, eventually, formSwarm, ok } from './support.js';

interface Member { ID: string | number; name?: string; isLearner?: boolean }

describe('an abandoned learner member', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  let ids: string[] = [];

  before(async () => {
    c = await startCluster(2, reg());
    ids = (await formSwarm(c, 1)).nodeIds;
  });
  after(async () => {
    await c?.teardown();
  });

  async function members(): Promise<Member[]> {
    const r = await etcdctl(c.node(1).daemon, ['member', 'list', '-w', 'json']);
    assert.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as { members: Member[] }).members;
  }

  it('is removed by the leader after its grace, and a promotion then goes through', async () => {
    const added = await etcdctl(c.node(1).daemon, ['member', 'add', 'never-started', '--learner', '--peer-urls', 'https://127.0.0.1:9']);
    assert.equal(added.code, 0, added.stderr);
    const unstarted = async () => (await members()).filter((m) => !m.name && m.isLearner).length;
    assert.equal(await unstarted(), 1);
    const seen = Date.now();
    // A node change sets the leader's repair going, as the join that added such a member does.
    await ok(c.node(1).daemon, ['node', 'update', '--label-add', 'touched=1', ids[1]!]);
    await new Promise((r) => setTimeout(r, 5_000));
    assert.equal(await unstarted(), 1, 'a learner still within its grace (a join under way) is kept');
    await eventually('the abandoned learner removed', async () => ((await unstarted()) === 0 ? true : undefined), 120_000, 1_000);
    assert.ok(Date.now() - seen >= 25_000, `removed after ${Date.now() - seen} ms, before its grace`);
    await ok(c.node(1).daemon, ['node', 'promote', ids[1]!]);
    await eventually('node 2 a voting member', async () => ((await members()).some((m) => m.name === ids[1] && !m.isLearner) ? true : undefined), 90_000, 500);
  });
});
