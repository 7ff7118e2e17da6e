/**
 * A node's etcd user follows its role at once and stays right. Demoted, a manager's certificate loses
 * etcd's root before `docker node demote` answers (its etcd member still leaves the etcd cluster, and
 * the node works on as a worker). A user left wrong (as a manager that died midway through a role
 * change would leave it; here rewritten with root's certificate) is put right by the leader, on the
 * next node change and when it takes the lead again. A manager demoting itself loses root and its
 * member just as well.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { useCluster } from './harness.js';
import { etcdctl, eventually, formSwarm, nodesOf, ok } from './support.js';

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
    await eventually('node 2 an etcd member again', async () => ((await etcdctl(d1(), ['member', 'list'])).stdout.includes(ids[1]!) ? true : undefined), 60_000, 500);
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
});
