/**
 * Writes etcd itself refuses when they are stale. Three managers: two of them update one record
 * (service, node, swarm, secret) at the same version at once, and one wins while the other gets
 * dockerd's "update out of sequence" (each manager's own check passes: only etcd's comparison of
 * the revision catches it). And a leader whose election key etcd no longer holds (deposed as far as
 * etcd knows, though its lease is fine and it has heard nothing) lands no decision: etcd refuses
 * its task writes, it stops leading, and its successor's decisions make the service converge.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { LOOP, etcdctl, eventually, formSwarm, nodesOf, ok, tasksOf, waitSpread } from './support.js';

const OUT_OF_SEQUENCE = 'rpc error: code = Unknown desc = update out of sequence';

interface EtcdKv {
  key: string;
  create_revision: number;
  mod_revision: number;
  value: string;
}

/** The keys under `prefix` as etcd holds them (key and value decoded), and the revision read at. */
async function etcdGet(d: TestDaemon, prefix: string): Promise<{ revision: number; kvs: EtcdKv[] }> {
  const r = await etcdctl(d, ['get', '--prefix', prefix, '-w', 'json']);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { header: { revision: number }; kvs?: EtcdKv[] };
  const b64 = (s: string) => Buffer.from(s, 'base64').toString();
  return { revision: out.header.revision, kvs: (out.kvs ?? []).map((kv) => ({ ...kv, key: b64(kv.key), value: b64(kv.value) })) };
}

describe('writes etcd refuses as stale', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  let ids: string[] = [];
  const d = (i: number) => c.node(i).daemon;

  before(async () => {
    c = await startCluster(3, reg());
    ids = (await formSwarm(c, 3)).nodeIds;
    for (const i of [1, 2, 3]) await eventually(`node ${i} sees three ready managers`, async () => (await nodesOf(d(i))).filter((n) => n.Status.State === 'ready').length === 3);
  });
  after(async () => {
    await c?.teardown();
  });

  /**
   * The same update, each with its own change, at the same version through nodes 2 and 3 at once
   * (rounds times): exactly one is answered 200, the other dockerd's error; all managers then agree.
   */
  async function race(what: string, read: (d: TestDaemon) => Promise<{ version: number; body: Record<string, unknown> }>, update: (d: TestDaemon, version: number, body: Record<string, unknown>, mark: string) => Promise<{ status: number; text(): string }>, marked: (body: Record<string, unknown>) => string | undefined) {
    for (let round = 0; round < 4; round++) {
      const { version, body } = await read(d(2));
      await eventually(`node 3 at ${what} version ${version}`, async () => (await read(d(3))).version === version);
      const [a, b] = await Promise.all([update(d(2), version, body, `two-${round}`), update(d(3), version, body, `three-${round}`)]);
      const answers = [a, b].map((r) => `${r.status} ${r.status === 200 ? '' : JSON.parse(r.text()).message}`.trim());
      assert.deepEqual([...answers].sort(), ['200', `500 ${OUT_OF_SEQUENCE}`], `${what}, round ${round}: ${answers.join(' | ')}`);
      const winner = a.status === 200 ? `two-${round}` : `three-${round}`;
      for (const i of [1, 2, 3]) await eventually(`node ${i} holds the winner's ${what}`, async () => marked((await read(d(i))).body) === winner);
    }
  }

  it('two managers update one service at the same version: one wins, the other gets dockerd\'s error', async () => {
    await ok(d(1), ['service', 'create', '-d', '--name', 'web', '--replicas', '3', c.image, 'sh', '-c', LOOP]);
    await eventually('the service on node 3', async () => (await d(3).request('GET', '/services/web')).status === 200);
    const read = async (x: TestDaemon) => {
      const s = (await x.request('GET', '/services/web')).json<{ Version: { Index: number }; Spec: Record<string, unknown> }>();
      return { version: s.Version.Index, body: s.Spec };
    };
    await race(
      'service',
      read,
      (x, version, spec, mark) => x.request('POST', `/services/web/update?version=${version}`, { body: { ...spec, Labels: { mark } } }),
      (spec) => (spec.Labels as Record<string, string> | undefined)?.mark,
    );
  });

  it('so too a node, the swarm and a secret', async () => {
    const nodeId = ids[0]!;
    await race(
      'node',
      async (x) => {
        const n = (await x.request('GET', `/nodes/${nodeId}`)).json<{ Version: { Index: number }; Spec: Record<string, unknown> }>();
        return { version: n.Version.Index, body: n.Spec };
      },
      (x, version, spec, mark) => x.request('POST', `/nodes/${nodeId}/update?version=${version}`, { body: { ...spec, Labels: { mark } } }),
      (spec) => (spec.Labels as Record<string, string> | undefined)?.mark,
    );
    await race(
      'swarm',
      async (x) => {
        const s = (await x.request('GET', '/swarm')).json<{ Version: { Index: number }; Spec: Record<string, unknown> }>();
        return { version: s.Version.Index, body: s.Spec };
      },
      (x, version, spec, mark) => x.request('POST', `/swarm/update?version=${version}`, { body: { ...spec, Labels: { mark } } }),
      (spec) => (spec.Labels as Record<string, string> | undefined)?.mark,
    );
    const secret = await d(1).docker(['secret', 'create', 'pw', '-'], { input: 'hush' });
    assert.equal(secret.code, 0, secret.stderr);
    await eventually('the secret on node 3', async () => (await d(3).request('GET', '/secrets/pw')).status === 200);
    await race(
      'secret',
      async (x) => {
        const s = (await x.request('GET', '/secrets/pw')).json<{ Version: { Index: number }; Spec: Record<string, unknown> }>();
        return { version: s.Version.Index, body: s.Spec };
      },
      (x, version, spec, mark) => x.request('POST', `/secrets/pw/update?version=${version}`, { body: { ...spec, Labels: { mark } } }),
      (spec) => (spec.Labels as Record<string, string> | undefined)?.mark,
    );
  });

  it('a leader whose election key etcd no longer holds lands no decision; its successor\'s converge the service', async () => {
    await waitSpread(d(1), 'web', Object.fromEntries(ids.map((id) => [id, 1])), 90_000);
    const leader = await eventually('a leader', async () => (await nodesOf(d(1))).find((n) => n.ManagerStatus?.Leader)?.ID);
    const via = d(ids.indexOf(leader) + 1);
    // Its election key, deleted behind its back: its lease lives on and its campaign hears nothing.
    const keys = (await etcdGet(via, 'election//berth/swarm/leader/')).kvs.filter((kv) => kv.value === leader);
    assert.equal(keys.length, 1, JSON.stringify(keys));
    const del = await etcdctl(via, ['del', keys[0]!.key, '-w', 'json']);
    assert.equal(del.code, 0, del.stderr);
    const deposedAt = (JSON.parse(del.stdout) as { header: { revision: number } }).header.revision;
    // Through the old leader, which still takes itself for the leader and places the new tasks at once.
    await ok(via, ['service', 'scale', '-d', 'web=6']);
    await eventually('six tasks running, one per slot', async () => {
      const live = (await tasksOf(d(1), 'web')).filter((t) => t.DesiredState === 'running' && t.Status.State === 'running');
      return live.length === 6 && new Set(live.map((t) => t.Slot)).size === 6;
    }, 90_000);
    // Not one task document of the old leader's since: etcd refused them all.
    const late = (await etcdGet(d(1), '/berth/swarm/tasks/')).kvs.filter((kv) => kv.mod_revision > deposedAt && (JSON.parse(kv.value) as { w: string }).w === leader);
    assert.deepEqual(late.map((kv) => kv.key), []);
    // Another manager leads, announced in etcd, and every manager says so.
    const next = await eventually('a new leader on every manager', async () => {
      const seen = await Promise.all([1, 2, 3].map(async (i) => (await nodesOf(d(i))).find((n) => n.ManagerStatus?.Leader)?.ID ?? ''));
      return seen.every((l) => l && l !== leader && l === seen[0]) ? seen[0] : undefined;
    }, 30_000);
    const term = (await etcdGet(d(1), '/berth/swarm/leader-term')).kvs[0];
    assert.equal((JSON.parse(term?.value ?? '{}') as { w?: string }).w, next);
    assert.ok(via.logs().includes('etcd refused a stale write of this node'), 'the old leader was refused');
  });
});
