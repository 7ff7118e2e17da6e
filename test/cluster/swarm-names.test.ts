/**
 * Names unique cluster-wide, kept by etcd (swarm-names.ts): two managers creating one service,
 * secret or network name at the same moment, through the docker CLI, end with one object and
 * dockerd's error for the other; a name etcd holds is refused even where the manager's cache knows
 * nothing of it; `service rm` frees the name at once; records an older berthd made without name
 * keys keep working, and the next leader fits them their keys (and drops a key left without record),
 * as the leader does for one an older manager makes while it leads.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { LOOP, etcdctl, eventually, formSwarm, nodesOf } from './support.js';

const NAMES = '/berth/swarm/names/';

describe('swarm names unique across managers', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  const d = (i: number): TestDaemon => c.node(i).daemon;

  before(async () => {
    c = await startCluster(2, reg());
    await formSwarm(c, 2);
    await eventually('two ready managers', async () => {
      const list = await nodesOf(d(2));
      return list.length === 2 && list.every((n) => n.Status.State === 'ready') && list.some((n) => n.ManagerStatus?.Leader) ? list : undefined;
    });
  });
  after(async () => {
    await c?.teardown();
  });

  /** The name keys under `kind`, name → holder id. */
  async function nameKeys(kind: string): Promise<Map<string, string>> {
    const r = await etcdctl(d(1), ['get', '--prefix', `${NAMES}${kind}/`]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n').filter(Boolean);
    const out = new Map<string, string>();
    for (let i = 0; i + 1 < lines.length; i += 2) out.set(lines[i]!.slice(NAMES.length + kind.length + 1), lines[i + 1]!);
    return out;
  }

  const idOf = async (what: string, name: string) => (await d(1).docker([what, 'inspect', '--format', '{{.ID}}', name])).stdout.trim();
  const serviceArgs = (name: string) => ['service', 'create', '-d', '--name', name, '--replicas', '0', c.image, 'sh', '-c', LOOP];

  /** Both managers create `name` at once: exactly one succeeds, the other answers `refusal`. */
  async function race(args: (name: string) => string[], name: string, refusal: RegExp, input?: string): Promise<void> {
    const [a, b] = await Promise.all([1, 2].map((i) => d(i).docker(args(name), input === undefined ? {} : { input })));
    assert.deepEqual([a!.code, b!.code].filter((x) => x === 0).length, 1, `${name}: ${a!.stderr} | ${b!.stderr}`);
    assert.match((a!.code ? a! : b!).stderr, refusal);
  }

  it('two managers create one service name at once: one service, the other gets dockerd\'s 409', async () => {
    for (let round = 0; round < 4; round++) {
      const name = `twin${round}`;
      await race(serviceArgs, name, new RegExp(`Error response from daemon: rpc error: code = AlreadyExists desc = name conflicts with an existing object: service ${name} already exists`));
      for (const i of [1, 2]) {
        const ls = await eventually(`node ${i} lists ${name} once`, async () => {
          const out = (await d(i).docker(['service', 'ls', '--filter', `name=${name}`, '--format', '{{.Name}}'])).stdout.split('\n').filter(Boolean);
          return out.length ? out : undefined;
        });
        assert.deepEqual(ls, [name]);
      }
      assert.equal((await nameKeys('services')).get(name), await idOf('service', name));
    }
    // Names compare lower-cased, as in swarmkit's store.
    const upper = await d(2).docker(serviceArgs('TWIN0'));
    assert.notEqual(upper.code, 0);
    assert.match(upper.stderr, /name conflicts with an existing object: service TWIN0 already exists/);
  });

  it('two managers create one secret name at once: one secret, the other gets dockerd\'s 409', async () => {
    for (let round = 0; round < 3; round++) {
      const name = `pw${round}`;
      await race((n) => ['secret', 'create', n, '-'], name, new RegExp(`Error response from daemon: rpc error: code = AlreadyExists desc = secret ${name} already exists`), 'hush');
      const ids = await eventually('both managers list the one secret', async () => {
        const lists = await Promise.all([1, 2].map(async (i) => (await d(i).docker(['secret', 'ls', '--filter', `name=${name}`, '--format', '{{.ID}}'])).stdout.split('\n').filter(Boolean)));
        return lists.every((l) => l.length === 1) ? lists.flat() : undefined;
      });
      assert.equal(ids[0], ids[1]);
      assert.equal((await nameKeys('secrets')).get(name), ids[0]);
    }
  });

  it('two managers create one overlay network name at once: one network, the other gets dockerd\'s 409', async () => {
    await race((n) => ['network', 'create', '-d', 'overlay', n], 'shared-net', /Error response from daemon: network with name shared-net already exists/);
    const id = await eventually('the network on both managers', async () => {
      const lists = await Promise.all([1, 2].map(async (i) => (await d(i).docker(['network', 'ls', '--format', '{{.ID}} {{.Name}}'])).stdout.split('\n').filter((l) => l.endsWith(' shared-net'))));
      return lists.every((l) => l.length === 1) && lists[0]![0] === lists[1]![0] ? lists[0]![0]!.split(' ')[0] : undefined;
    });
    assert.ok((await nameKeys('networks')).get('shared-net')?.startsWith(id));
    assert.equal((await d(2).docker(['network', 'rm', 'shared-net'])).code, 0);
    assert.equal((await nameKeys('networks')).has('shared-net'), false, 'the removal freed the name');
  });

  it('network rm frees the name at once on the other manager too, though that one still has the network', async () => {
    for (let round = 0; round < 4; round++) {
      const [mine, other] = round % 2 ? [d(2), d(1)] : [d(1), d(2)];
      const made = await mine.request('POST', '/networks/create', { body: { Name: 'again-net', Driver: 'overlay' } });
      assert.equal(made.status, 201, made.text());
      const id = made.json<{ Id: string }>().Id;
      await eventually(`round ${round}: the other manager has the network`, async () => ((await other.request('GET', `/networks/${id}`)).status === 200 ? true : undefined));
      assert.equal((await mine.request('DELETE', `/networks/${id}`)).status, 204);
      // At once: the other manager may not have heard of the removal, and still has the network.
      const re = await other.request('POST', '/networks/create', { body: { Name: 'again-net', Driver: 'overlay' } });
      assert.equal(re.status, 201, `round ${round}: ${re.text()}`);
      const again = re.json<{ Id: string }>().Id;
      assert.notEqual(again, id);
      assert.equal((await other.request('GET', `/networks/${id}`)).status, 404, 'the removed network is gone there');
      assert.equal((await nameKeys('networks')).get('again-net'), again);
      assert.equal((await other.request('DELETE', `/networks/${again}`)).status, 204);
    }
    assert.equal((await nameKeys('networks')).has('again-net'), false);
  });

  it('a name etcd holds is refused even where no cache knows of it', async () => {
    // A name key without its object: what only etcd knows (the leader's fitting drops such a key later).
    assert.equal((await etcdctl(d(1), ['put', `${NAMES}services/planted`, 'not-a-service'])).code, 0);
    const r = await d(2).docker(serviceArgs('planted'));
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /rpc error: code = AlreadyExists desc = name conflicts with an existing object: service planted already exists/);
    assert.equal((await d(2).docker(['service', 'ls', '--filter', 'name=planted', '-q'])).stdout.trim(), '');
    assert.equal((await etcdctl(d(1), ['del', `${NAMES}services/planted`])).code, 0);
  });

  it('service rm frees the name at once, on every manager; a rename is refused as swarmkit does', async () => {
    for (let round = 0; round < 3; round++) {
      const [mine, other] = round % 2 ? [d(2), d(1)] : [d(1), d(2)];
      const made = await mine.docker(serviceArgs('again'));
      assert.equal(made.code, 0, made.stderr);
      const rm = await mine.docker(['service', 'rm', 'again']);
      assert.equal(rm.code, 0, rm.stderr);
      // At once on the other manager: the removal was in etcd, name and all, before its answer.
      const re = await other.docker(serviceArgs('again'));
      assert.equal(re.code, 0, re.stderr);
      assert.equal((await other.docker(['service', 'rm', 'again'])).code, 0);
    }
    assert.equal((await nameKeys('services')).has('again'), false);
    const s = (await d(1).request('GET', '/services/twin0')).json<{ ID: string; Version: { Index: number }; Spec: Record<string, unknown> }>();
    const res = await d(2).request('POST', `/services/${s.ID}/update?version=${s.Version.Index}`, { body: { ...s.Spec, Name: 'renamed' } });
    assert.equal(res.status, 501, res.text());
    assert.equal(res.json<{ message: string }>().message, 'rpc error: code = Unimplemented desc = renaming services is not supported');
    // A secret's removal frees its name too.
    assert.equal((await d(2).docker(['secret', 'rm', 'pw0'])).code, 0);
    assert.equal((await d(1).docker(['secret', 'create', 'pw0', '-'], { input: 'again' })).code, 0);
  });

  it("an older berthd's records (no name keys) keep working, and the next leader fits them their keys", async () => {
    for (const name of ['old-a', 'old-b']) assert.equal((await d(1).docker(serviceArgs(name))).code, 0);
    assert.equal((await d(1).docker(['secret', 'create', 'old-pw', '-'], { input: 'x' })).code, 0);
    const ids = { a: await idOf('service', 'old-a'), pw: await idOf('secret', 'old-pw') };
    // As an older berthd leaves them: records without name keys, and a key its removal left behind.
    for (const key of ['services/old-a', 'services/old-b', 'secrets/old-pw']) assert.equal((await etcdctl(d(1), ['del', NAMES + key])).code, 0);
    assert.equal((await etcdctl(d(1), ['put', `${NAMES}services/ghost`, 'gone-long-ago'])).code, 0);
    // Each manager's cache still refuses the names; the records change and go as before.
    for (const i of [1, 2]) {
      const dup = await d(i).docker(serviceArgs('old-a'));
      assert.match(dup.stderr, /name conflicts with an existing object: service old-a already exists/);
      const dupSecret = await d(i).docker(['secret', 'create', 'old-pw', '-'], { input: 'y' });
      assert.match(dupSecret.stderr, /secret old-pw already exists/);
    }
    const upd = await d(2).docker(['service', 'update', '-d', '--env-add', 'X=1', 'old-a']);
    assert.equal(upd.code, 0, upd.stderr);
    assert.equal((await d(2).docker(['service', 'rm', 'old-b'])).code, 0);
    assert.equal((await nameKeys('services')).has('old-b'), false);
    // The leader stops; the other manager leads and fits the names: the records' keys are back, the
    // ghost's is gone (its record is not there).
    const leader = (await nodesOf(d(1))).find((n) => n.ManagerStatus?.Leader)!.ID;
    const leaderNode = (await d(1).docker(['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim() === leader ? 1 : 2;
    await d(leaderNode).restart();
    const keys = await eventually('the name keys fitted', async () => {
      const [services, secrets] = [await nameKeys('services'), await nameKeys('secrets')];
      return services.get('old-a') === ids.a && secrets.get('old-pw') === ids.pw && !services.has('ghost') ? services : undefined;
    }, 60_000);
    assert.equal(keys.has('old-b'), false);
    // Now etcd keeps them: freed by the removal, and taken again.
    const other = leaderNode === 1 ? d(2) : d(1);
    assert.equal((await other.docker(['service', 'rm', 'old-a'])).code, 0);
    assert.equal((await nameKeys('services')).has('old-a'), false);
    assert.equal((await other.docker(serviceArgs('ghost'))).code, 0, 'the name the ghost key held is free');
    assert.equal((await other.docker(serviceArgs('old-a'))).code, 0);
  });
  it('a record an older manager makes while one leads gets its name key from the leader', async () => {
    assert.equal((await d(1).docker(serviceArgs('model'))).code, 0);
    const id = await idOf('service', 'model');
    const got = await etcdctl(d(1), ['get', `/berth/swarm/services/${id}`, '--print-value-only']);
    assert.equal(got.code, 0, got.stderr);
    const doc = JSON.parse(got.stdout.trim()) as { w: string; d: { id: string; spec: Record<string, unknown> } };
    // As an older berthd writes one: the record alone, no name key, from a writer neither node is.
    const old = `${id.slice(0, -4)}old1`;
    const made = { ...doc, w: 'a-node-from-before', d: { ...doc.d, id: old, spec: { ...doc.d.spec, Name: 'From-Old' } } };
    assert.equal((await etcdctl(d(1), ['put', `/berth/swarm/services/${old}`, JSON.stringify(made)])).code, 0);
    // No leader change: the leader hears of it and fits its key.
    await eventually('the leader fits the new record its name key', async () => ((await nameKeys('services')).get('from-old') === old ? true : undefined), 30_000);
    // Its removal frees the name the leader fitted.
    assert.equal((await d(2).docker(['service', 'rm', old])).code, 0);
    assert.equal((await nameKeys('services')).has('from-old'), false);
    assert.equal((await d(1).docker(['service', 'rm', 'model'])).code, 0);
  });

  it('two services of one name, as an older cluster could leave them: every manager takes both and stays up', async () => {
    assert.equal((await d(1).docker(serviceArgs('pair'))).code, 0);
    const id = await idOf('service', 'pair');
    const got = await etcdctl(d(1), ['get', `/berth/swarm/services/${id}`, '--print-value-only']);
    assert.equal(got.code, 0, got.stderr);
    const doc = JSON.parse(got.stdout.trim()) as { w: string; d: { id: string } };
    const twin = `${id.slice(0, -4)}dup0`;
    assert.equal((await etcdctl(d(1), ['put', `/berth/swarm/services/${twin}`, JSON.stringify({ ...doc, w: 'a-node-from-before', d: { ...doc.d, id: twin } })])).code, 0);
    for (const i of [1, 2]) {
      await eventually(`node ${i} lists both`, async () => {
        const out = (await d(i).docker(['service', 'ls', '--filter', 'name=pair', '--format', '{{.ID}}'])).stdout.split('\n').filter(Boolean);
        return out.length === 2 ? out : undefined;
      });
    }
    assert.equal((await d(2).docker(['service', 'rm', twin])).code, 0);
    for (const i of [1, 2]) {
      assert.equal((await d(i).request('GET', '/_ping')).status, 200, `node ${i} is up`);
      assert.equal((await d(i).docker(['service', 'inspect', '--format', '{{.ID}}', 'pair'])).stdout.trim(), id);
    }
  });
});
