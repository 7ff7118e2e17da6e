/**
 * A node's etcd user follows its role at once and stays right. Demoted, a manager's certificate loses
 * etcd's root before `docker node demote` answers (its etcd member still leaves the etcd cluster, and
 * the node works on as a worker). A user left wrong (as a manager that died midway through a role
 * change would leave it; here rewritten with root's certificate) is put right by the leader, on the
 * next node change and when it takes the lead again. A manager demoting itself loses root and its
 * member just as well. And a cluster formed by a berthd whose etcd ran without auth (as an older
 * berthd left it: auth off, no users or roles, no `etcdAuth` on the cluster record), every daemon
 * restarted: the manager turns etcd's auth on with a user for every node, both nodes work on (a
 * service spreads over them, its tasks' state reaches the manager), the worker is limited again.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { useCluster } from './harness.js';
import { LOOP, etcdctl, eventually, formSwarm, nodesOf, ok, waitSpread } from './support.js';

const CLUSTER_KEY = '/berth/swarm/cluster';

/** Undecodable, so no node takes it for a service: only whether etcd lets the write through counts. */
const PROBE = '/berth/swarm/services/probe';
const CLAIMS = '/berth/swarm/addresses/';

describe('etcd users follow the node records', () => {
  const reg = useSeededRegistry('open');
  const c = useCluster(2, reg);
  const d1 = () => c().node(1).daemon;
  const d2 = () => c().node(2).daemon;
  let ids: string[] = [];

  before(async () => {
    ids = (await formSwarm(c(), 2)).nodeIds;
  });

  /** Writes (and deletes again) the probe key with node `as`'s certificate: whether etcd allowed it. */
  async function writes(as: TestDaemon, key = PROBE): Promise<boolean> {
    const r = await etcdctl(d1(), ['put', key, 'not-json'], true, as);
    if (r.code !== 0) {
      assert.match(r.stderr, /permission denied/);
      return false;
    }
    assert.equal((await etcdctl(d1(), ['del', key])).code, 0);
    return true;
  }

  async function rolesOf(id: string): Promise<string> {
    const r = await etcdctl(d1(), ['user', 'get', id]);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  }

  it('a demoted manager loses etcd root before demote answers; its etcd member leaves; it works on as a worker', async () => {
    assert.equal(await writes(d2()), true, 'a manager writes a service key');
    await ok(d1(), ['node', 'demote', ids[1]!]);
    assert.equal(await writes(d2()), false, 'right after the demotion, its certificate still writes a service key');
    assert.match(await rolesOf(ids[1]!), /berth-worker/);
    await eventually('its etcd member gone from the list and stopped', async () => {
      const list = await etcdctl(d1(), ['member', 'list', '-w', 'json']);
      if (list.code !== 0 || list.stdout.includes(ids[1]!)) return undefined;
      const pidFile = join(d2().dataRoot, 'swarm', 'cluster', 'etcd', 'etcd.pid');
      if (!existsSync(pidFile)) return true;
      return existsSync(`/proc/${readFileSync(pidFile, 'utf8').trim()}`) ? undefined : true;
    }, 60_000, 500);
    await eventually('node 2 ready as a worker', async () => {
      const n = (await nodesOf(d1())).find((x) => x.ID === ids[1]);
      return n?.Spec.Role === 'worker' && n.Status.State === 'ready' ? true : undefined;
    }, 30_000);
    assert.equal(await ok(d2(), ['info', '--format', '{{.Swarm.ControlAvailable}}']), 'false');
  });

  it('the leader puts a user left wrong right: on a node change, and on taking the lead', async () => {
    // A half-done promotion: the worker's user holds root.
    assert.equal((await etcdctl(d1(), ['user', 'grant-role', ids[1]!, 'root'])).code, 0);
    assert.equal(await writes(d2()), true, 'the damage is real');
    await ok(d1(), ['node', 'update', '--label-add', 'repair=1', ids[1]!]);
    await eventually('the worker\'s user without root again', async () => ((await writes(d2())) ? undefined : true), 20_000, 300);
    assert.doesNotMatch(await rolesOf(ids[1]!), /\broot\b/);

    // A half-done demotion, its manager gone, and the workers' role as a berthd from before granted
    // it (address claims writable): the next leader (node 1 again, restarted) puts both right.
    assert.equal((await etcdctl(d1(), ['user', 'grant-role', ids[1]!, 'root'])).code, 0);
    assert.equal((await etcdctl(d1(), ['role', 'grant-permission', '--prefix=true', 'berth-worker', 'readwrite', CLAIMS])).code, 0);
    await d1().restart();
    await eventually('the restarted leader repaired the user', async () => ((await writes(d2())) ? undefined : true), 60_000, 500);
    assert.match(await rolesOf(ids[1]!), /berth-node-/);
    assert.equal(await writes(d2(), `${CLAIMS}forged`), false, 'the worker writes an address claim');
  });

  it('promoted again, then demoting itself: root and its etcd member go before the answer; node 1 leads', async () => {
    await ok(d1(), ['node', 'promote', ids[1]!]);
    await eventually('node 2 an etcd member again', async () => ((await etcdctl(d1(), ['member', 'list'])).stdout.includes(ids[1]!) ? true : undefined), 60_000, 500).catch((err: Error) => {
      const tail = (d: TestDaemon) => d.logTail(3000).split('\n').filter((l) => !l.includes('"level":"debug"') || /etcd member probe|skipped/.test(l)).slice(-30).join('\n');
      throw new Error(`${err.message}\nnode 2:\n${tail(d2())}\nnode 1:\n${tail(d1())}`);
    });
    await eventually('node 2 a reachable manager', async () => (await nodesOf(d2()).catch(() => [])).length === 2, 30_000, 500);
    assert.equal(await writes(d2()), true);
    await ok(d2(), ['node', 'demote', ids[1]!]);
    assert.equal(await writes(d2()), false, 'right after demoting itself, its certificate still writes a service key');
    assert.doesNotMatch((await etcdctl(d1(), ['member', 'list'])).stdout, new RegExp(ids[1]!));
    await eventually('node 1 leads, node 2 a ready worker', async () => {
      const ns = await nodesOf(d1());
      const [n1, n2] = [ns.find((n) => n.ID === ids[0]), ns.find((n) => n.ID === ids[1])];
      return n1?.ManagerStatus?.Leader && n2?.Spec.Role === 'worker' && n2.Status.State === 'ready' ? true : undefined;
    }, 30_000, 500);
  });

  it('a cluster from before auth (node 2 now a worker): every daemon restarted, auth is on, every node works, the worker is limited', async () => {
    const workerPut = () => etcdctl(d1(), ['put', PROBE, 'not-json'], true, d2());
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
    assert.equal((await etcdctl(d1(), ['del', PROBE])).code, 0);

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
    await ok(d1(), ['service', 'rm', 'upgraded']);
  });
});
