/**
 * A leading manager whose etcd client is replaced (a member it used went silent, not its own) keeps
 * its term: its lease is kept alive through the new client, and the swarm keeps its leader.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { eventually, formSwarm, nodesOf } from './support.js';

function logged(d: TestDaemon, msg: string): number {
  return d.logs().split('\n').filter((l) => l.includes(`"${msg}"`)).length;
}

const LEFT = 'an etcd member does not answer; connecting to the others';
const NO_LONGER = 'this node no longer leads the swarm';

describe('a leader whose etcd client is replaced', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  let ids: string[] = [];
  let frozen: number | undefined;

  before(async () => {
    c = await startCluster(3, reg());
    ids = (await formSwarm(c, 3)).nodeIds;
  });
  after(async () => {
    if (frozen) process.kill(frozen, 'SIGCONT');
    await c?.teardown();
  });

  /** The leading node's index as node `via` sees it, once it stayed the same for 3 s. */
  async function leader(via: number): Promise<number> {
    let seen: number[] = [];
    const id = await eventually('a leader that stays', async () => {
      const l = (await nodesOf(c.node(via).daemon).catch(() => [])).find((n) => n.ManagerStatus?.Leader)?.ID;
      seen = [...seen, l ? ids.indexOf(l) + 1 : 0].slice(-4);
      return seen.length === 4 && seen[0] && seen.every((x) => x === seen[0]) && seen[0];
    }, 90_000, 1000);
    return id;
  }

  it('keeps leading with the same term when a member it used, not its own, goes silent', async () => {
    // The first manager's client is on its own member only: the leader must be another, whose
    // client (made on the members that answered its join) uses member 1 too. Node 1's berthd
    // restarts (its member runs on): it resigns, and campaigns again behind the new leader.
    if ((await leader(1)) === 1) await c.node(1).daemon.restart();
    const l = await leader(2);
    assert.notEqual(l, 1);
    const dl = c.node(l).daemon;
    const term = () => nodesOf(dl).then((ns) => ns.find((n) => n.ID === ids[l - 1])?.ManagerStatus?.Leader === true);
    assert.ok(await term(), 'node l leads as it sees it');
    const left = logged(dl, LEFT);
    const lost = logged(dl, NO_LONGER);
    const led = logged(dl, 'this node leads the swarm');
    frozen = Number(readFileSync(join(c.node(1).daemon.dataRoot, 'swarm', 'cluster', 'etcd', 'etcd.pid'), 'utf8'));
    process.kill(frozen, 'SIGSTOP');
    try {
      await eventually('the leader leaves member 1', async () => logged(dl, LEFT) > left, 30_000);
      // Longer than the campaign's lease (10 s): kept alive by the new client alone.
      await new Promise((r) => setTimeout(r, 15_000));
      assert.equal(logged(dl, NO_LONGER), lost, 'the leader never stopped leading');
      assert.equal(logged(dl, 'this node leads the swarm'), led, 'no new term');
      assert.equal(logged(dl, 'this node leads on through its new etcd client') > 0, true);
      assert.ok(await term(), 'node l still leads');
      // Its term's writes still land.
      const r = await dl.docker(['service', 'create', '-d', '--name', 'kept', '--replicas', '0', c.image, 'true']);
      assert.equal(r.code, 0, r.stderr);
    } finally {
      process.kill(frozen, 'SIGCONT');
      frozen = undefined;
    }
  });
});
