/**
 * A manager's link to etcd across restarts and members that go and come back. Restarted while the
 * cluster changed, a manager's first answers are etcd's state, never the records it saved before
 * (and, etcd out of reach, dockerd's no-leader error once the wait is over). The etcd clients follow
 * etcd's member list: the first manager's, made on its own member only, carries on through the
 * others when its member goes silent; a client that left a member spreads back to it once it is back.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { etcdctl, eventually, formSwarm, nodesOf } from './support.js';

const NO_LEADER = "The swarm does not have a leader. It's possible that too few managers are online. Make sure more than half of the managers are online.";

/** The lines of a node's log with this message, parsed. */
function logged(d: TestDaemon, msg: string): Record<string, unknown>[] {
  return d
    .logs()
    .split('\n')
    .filter((l) => l.includes(`"${msg}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('a manager\'s link to etcd', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  let ids: string[] = [];
  /** Members frozen by a test (SIGSTOP), thawed whatever happens. */
  const frozen = new Set<number>();

  before(async () => {
    c = await startCluster(3, reg());
    ids = (await formSwarm(c, 3)).nodeIds;
    await eventually('three ready managers', async () => {
      const list = await nodesOf(c.node(1).daemon);
      return list.length === 3 && list.every((n) => n.Status.State === 'ready') && list.some((n) => n.ManagerStatus?.Leader);
    }, 60_000);
  });
  after(async () => {
    for (const pid of frozen) thaw(pid);
    await c?.teardown();
  });

  const memberPid = (i: number) => Number(readFileSync(join(c.node(i).daemon.dataRoot, 'swarm', 'cluster', 'etcd', 'etcd.pid'), 'utf8'));
  /** Node i's etcd member stops answering (its connections stay open, silent: as a cut link). */
  function freeze(i: number): number {
    const pid = memberPid(i);
    process.kill(pid, 'SIGSTOP');
    frozen.add(pid);
    return pid;
  }
  function thaw(pid: number): void {
    process.kill(pid, 'SIGCONT');
    frozen.delete(pid);
  }
  /** The leading node's index, as node `via` sees it. */
  async function leader(via = 1): Promise<number> {
    const id = await eventually('a leader', async () => (await nodesOf(c.node(via).daemon).catch(() => [])).find((n) => n.ManagerStatus?.Leader)?.ID, 60_000);
    return ids.indexOf(id) + 1;
  }
  async function clientUrl(i: number): Promise<string> {
    const r = await etcdctl(c.node(1).daemon, ['member', 'list', '-w', 'json']);
    const members = (JSON.parse(r.stdout) as { members: { name: string; clientURLs: string[] }[] }).members;
    return members.find((m) => m.name === ids[i - 1])!.clientURLs[0]!;
  }

  const LEFT = 'an etcd member does not answer; connecting to the others';
  const SPREAD = 'connecting to every etcd member that answers';

  it('the first manager\'s client reaches the members that joined after it: its own silent, it carries on', async () => {
    const d1 = c.node(1).daemon;
    const d2 = c.node(2).daemon;
    // Node 1 made its client at init, on its own member only. This test comes first: later ones may
    // move that client off its member for good (one whose node leads does not spread back). It reads
    // etcd's member list through that client (every 5 s, each second while a learner is on it): the
    // members that joined must be on it before its own goes silent (the list cannot be read then).
    await eventually('node 1 lists the three members', async () => logged(d1, 'the etcd members changed').some((l) => (l.now as string[]).length === 3), 30_000);
    const left = logged(d1, LEFT).length;
    const pid = freeze(1);
    try {
      await eventually('node 1 leaves its member for the others', async () => logged(d1, LEFT).length > left, 30_000);
      // A change through it lands, and its heartbeat goes on (it stays ready).
      const r = await d1.docker(['service', 'create', '-d', '--name', 'through-one', '--replicas', '0', c.image, 'true']);
      assert.equal(r.code, 0, r.stderr);
      await eventually('node 2 sees it', async () => (await d2.docker(['service', 'ls', '-q', '--filter', 'name=through-one'])).stdout.trim() !== '');
      await eventually('node 1 ready for node 2', async () => (await nodesOf(d2)).find((n) => n.ID === ids[0])?.Status.State === 'ready', 30_000);
    } finally {
      thaw(pid);
    }
    assert.equal((await d1.docker(['service', 'rm', 'through-one'])).code, 0);
  });

  it('restarted while the cluster changed: its first answers are the cluster as it is now', async () => {
    const d1 = c.node(1).daemon;
    const d3 = c.node(3).daemon;
    assert.equal((await d1.docker(['service', 'create', '-d', '--name', 'early', '--replicas', '0', c.image, 'true'])).code, 0);
    await eventually('node 3 knows the service', async () => (await d3.docker(['service', 'ls', '-q', '--filter', 'name=early'])).stdout.trim() !== '');
    // Its berthd stops (its etcd member goes on), and the cluster changes meanwhile.
    await d3.stop();
    assert.equal((await d1.docker(['service', 'create', '-d', '--name', 'later', '--replicas', '0', c.image, 'true'])).code, 0);
    assert.equal((await d1.docker(['service', 'update', '-d', '--label-add', 'v=2', 'early'])).code, 0);
    assert.equal((await d1.docker(['node', 'update', '--label-add', 'seen=yes', ids[1]!])).code, 0);
    await d3.restart();
    // Right away: no waiting for anything but the socket.
    const ls = await d3.docker(['service', 'ls', '--format', '{{.Name}}']);
    assert.equal(ls.code, 0, ls.stderr);
    assert.deepEqual(ls.stdout.trim().split('\n').sort(), ['early', 'later']);
    const label = await d3.docker(['service', 'inspect', '--format', '{{index .Spec.Labels "v"}}', 'early']);
    assert.equal(label.stdout.trim(), '2', label.stderr);
    const node = await d3.docker(['node', 'inspect', '--format', '{{index .Spec.Labels "seen"}}', ids[1]!]);
    assert.equal(node.stdout.trim(), 'yes', node.stderr);
    const nodes = await d3.docker(['node', 'ls', '-q']);
    assert.equal(nodes.stdout.trim().split('\n').length, 3, nodes.stderr);
    assert.equal((await d1.docker(['service', 'rm', 'early', 'later'])).code, 0);
  });

  it('restarted without a quorum to reach: dockerd\'s no-leader error once the wait is over, then etcd\'s state once it is back, however late', async () => {
    const d3 = c.node(3).daemon;
    await d3.stop();
    // Two members of three silent: the third (node 3's, running on without its berthd) has no quorum.
    const a = freeze(1);
    const b = freeze(2);
    try {
      await d3.restart();
      const started = Date.now();
      const r = await d3.request('GET', '/services');
      assert.equal(r.status, 500, r.text());
      assert.equal(r.json<{ message: string }>().message, `rpc error: code = Unknown desc = ${NO_LEADER}`);
      // Bounded: answered within the wait (20 s from the restart), not held for ever.
      assert.ok(Date.now() - started < 30_000);
      // Past the wait, the next read fails at once.
      const again = Date.now();
      const cli = await d3.docker(['node', 'ls']);
      assert.notEqual(cli.code, 0);
      assert.match(cli.stderr, /The swarm does not have a leader/);
      assert.ok(Date.now() - again < 5000, `took ${Date.now() - again} ms`);
      // Longer than a connection attempt waits (60 s): the node tries again, and links once etcd is back.
      await eventually('node 3 tries again', async () => logged(d3, 'etcd does not answer yet; trying again').length > 0, 120_000, 1000);
    } finally {
      thaw(a);
      thaw(b);
    }
    await eventually('node 3 answers with etcd\'s state again', async () => {
      const r = await d3.request('GET', '/nodes');
      return r.status === 200 && r.json<unknown[]>().length === 3;
    }, 90_000);
    await leader();
  });

  it('a member down when a client connects: back, the client spreads over it again; the member it was on stopped, it carries on', async () => {
    // Node y, one that does not lead, has its host go down (berthd, then its etcd member).
    const first = await leader();
    const y = first === 3 ? 2 : 3;
    const dy = c.node(y).daemon;
    const yUrl = await clientUrl(y);
    const py = memberPid(y);
    await dy.stop();
    process.kill(py, 'SIGKILL');
    // Node x, the other one that does not lead, restarts meanwhile. Chosen once the leader settled (a
    // leader keeps its term when its client leaves y's member, but a candidate campaigns anew).
    // Restarted after, x campaigns behind the leader, so it does not lead: a leader's client waits to
    // spread back.
    // (Probes find y's member down within 3 to 4.5 s; the leader is taken once seen the same for 4 s.)
    await new Promise((r) => setTimeout(r, 4000));
    let seen: number[] = [];
    const lead = await eventually('a leader that stays', async () => {
      seen = [...seen, await leader(first)].slice(-5);
      return seen.length === 5 && seen.every((l) => l === seen[0]) && seen[0];
    }, 60_000, 1000);
    const x = 6 - lead - y;
    assert.notEqual(lead, y);
    const dx = c.node(x).daemon;
    const spreads = logged(dx, SPREAD).length;
    const leftBefore = logged(dx, LEFT).length;
    await dx.restart();
    assert.equal((await dx.docker(['node', 'ls', '-q'])).code, 0);
    await eventually('node x leaves the member that is down', async () => logged(dx, LEFT).length > leftBefore, 30_000);
    await dy.restart();
    const spread = await eventually('node x spreads back over every member', async () => logged(dx, SPREAD).slice(spreads).find((l) => (l.now as string[]).includes(yUrl)), 60_000);
    assert.equal((spread.now as string[]).length, 3, JSON.stringify(spread));
    // Now the member of its own host goes silent: its client carries on through the other two.
    const left = logged(dx, LEFT).length;
    const px = freeze(x);
    try {
      await eventually('node x leaves its member', async () => logged(dx, LEFT).length > left, 30_000);
      const r = await dx.docker(['service', 'create', '-d', '--name', 'through-x', '--replicas', '0', c.image, 'true']);
      assert.equal(r.code, 0, r.stderr);
      const via = c.node(lead).daemon;
      await eventually('node x ready for the leader', async () => (await nodesOf(via)).find((n) => n.ID === ids[x - 1])?.Status.State === 'ready', 30_000);
    } finally {
      thaw(px);
    }
    assert.equal((await dx.docker(['service', 'rm', 'through-x'])).code, 0);
  });
});
