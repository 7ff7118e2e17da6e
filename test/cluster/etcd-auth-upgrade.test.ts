/**
 * A cluster formed by a berthd whose etcd ran without auth (as an older berthd left it: auth off, no
 * users or roles, no `etcdAuth` on the cluster record), every daemon restarted: the manager turns
 * etcd's auth on with a user for every node, both nodes work on (a service spreads over them and
 * its tasks' state reaches the manager), and the worker's certificate is limited again.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry } from '../harness/index.js';
import { useCluster } from './harness.js';
import { LOOP, etcdctl, eventually, formSwarm, nodesOf, ok, waitSpread } from './support.js';

const CLUSTER_KEY = '/berth/swarm/cluster';

describe('etcd auth turned on in an existing cluster', () => {
  const reg = useSeededRegistry('open');
  const c = useCluster(2, reg);
  const d1 = () => c().node(1).daemon;
  const d2 = () => c().node(2).daemon;
  let ids: string[] = [];

  before(async () => {
    ids = (await formSwarm(c(), 1)).nodeIds;
  });
  after(async () => {
    await d1().docker(['service', 'rm', 'upgraded']).catch(() => undefined);
  });

  const workerPut = () => etcdctl(d1(), ['put', '/berth/swarm/services/forged', 'not-json'], true, d2());

  it('a cluster from before auth: every daemon restarted, auth is on, every node works, the worker is limited', async () => {
    // What an older berthd left: no auth, users or roles, nor the record's mark.
    const off = await etcdctl(d1(), ['auth', 'disable']);
    assert.equal(off.code, 0, off.stderr);
    for (const kind of ['user', 'role'] as const) {
      const list = await etcdctl(d1(), [kind, 'list']);
      assert.equal(list.code, 0, list.stderr);
      for (const name of list.stdout.split('\n').filter(Boolean)) assert.equal((await etcdctl(d1(), [kind, 'delete', name])).code, 0);
    }
    const got = await etcdctl(d1(), ['get', CLUSTER_KEY, '--print-value-only']);
    const value = JSON.parse(got.stdout.trim()) as { w: string; d: Record<string, unknown> };
    assert.equal(value.d.etcdAuth, true);
    delete value.d.etcdAuth;
    assert.equal((await etcdctl(d1(), ['put', CLUSTER_KEY, JSON.stringify({ ...value, w: 'a-node-from-before' })])).code, 0);
    const open = await workerPut();
    assert.equal(open.code, 0, `without auth the worker writes anything: ${open.stderr}`);
    assert.equal((await etcdctl(d1(), ['del', '/berth/swarm/services/forged'])).code, 0);

    for (const n of c().nodes) await n.daemon.stop();
    for (const n of c().nodes) await n.daemon.restart();

    await eventually('auth on again, the worker refused', async () => ((await workerPut()).code !== 0 ? true : undefined), 60_000, 500);
    assert.match((await workerPut()).stderr, /permission denied/);
    const users = await etcdctl(d1(), ['user', 'list']);
    assert.equal(users.code, 0, users.stderr);
    for (const id of ids) assert.match(users.stdout, new RegExp(id));
    assert.match((await etcdctl(d1(), ['get', CLUSTER_KEY, '--print-value-only'])).stdout, /"etcdAuth":true/);

    await eventually('both nodes ready', async () => ((await nodesOf(d1())).filter((n) => n.Status.State === 'ready').length === 2 ? true : undefined), 60_000);
    await ok(d1(), ['service', 'create', '-d', '--name', 'upgraded', '--replicas', '2', c().image, 'sh', '-c', LOOP]);
    await waitSpread(d1(), 'upgraded', { [ids[0]!]: 1, [ids[1]!]: 1 }, 90_000);
  });
});
