/**
 * What a worker's etcd certificate gets: the join tokens sit in etcd sealed under the data key (no
 * token a worker could read there, nor one a manager wrote plain before), and `join-token`, its
 * `--rotate` and joins keep working. etcd's auth (on the etcd berthd runs) refuses a worker's writes
 * beyond its own heartbeat and tasks' status, and its reads of secrets, configs and managers' keys;
 * the worker still runs its tasks and reports their state.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry } from '../harness/index.js';
import { askToJoin } from '../../src/engine/swarm/cluster/join-protocol.js';
import { useCluster } from './harness.js';
import { LOOP, etcdctl, eventually, formSwarm, nodesOf, ok, waitSpread } from './support.js';

const CLUSTER_KEY = '/berth/swarm/cluster';

describe('etcd access of a worker', () => {
  const reg = useSeededRegistry('open');
  const c = useCluster(2, reg);
  const d1 = () => c().node(1).daemon;
  const d2 = () => c().node(2).daemon;
  let tokens: { workerToken: string; managerToken: string; nodeIds: string[] };

  before(async () => {
    tokens = await formSwarm(c(), 1);
  });

  /** Every value under the prefix, read with node `as`'s certificate. */
  async function dump(as = d1()): Promise<string> {
    const r = await etcdctl(d1(), ['get', '--prefix', '/berth/swarm/'], true, as);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  }

  it('keeps the join tokens sealed in etcd; join-token and --rotate still answer them', async () => {
    const all = await dump();
    assert.match(all, /sealedJoinTokens/);
    for (const t of [tokens.workerToken, tokens.managerToken]) assert.equal(all.includes(t), false, 'a join token in etcd, plain');
    const cluster = await etcdctl(d1(), ['get', CLUSTER_KEY, '--print-value-only'], true, d2());
    assert.equal(cluster.code, 0, cluster.stderr);
    assert.doesNotMatch(cluster.stdout, /SWMTKN/, 'the worker reads a token');
    const rotated = await ok(d1(), ['swarm', 'join-token', '--rotate', '-q', 'worker']);
    assert.notEqual(rotated, tokens.workerToken);
    assert.equal(await ok(d1(), ['swarm', 'join-token', '-q', 'worker']), rotated);
    assert.equal(await ok(d1(), ['swarm', 'join-token', '-q', 'manager']), tokens.managerToken);
    await eventually('the rotated token sealed in etcd', async () => {
      const now = await dump();
      return !now.includes(rotated) && !now.includes(tokens.workerToken) ? true : undefined;
    }, 10_000, 200);
    tokens.workerToken = rotated;
  });

  it('seals a cluster record that holds the tokens plain (from before) as a manager hears it', async () => {
    const got = await etcdctl(d1(), ['get', CLUSTER_KEY, '--print-value-only']);
    assert.equal(got.code, 0, got.stderr);
    const value = JSON.parse(got.stdout.trim()) as { w: string; d: Record<string, unknown> };
    const { sealedJoinTokens: _s, ...doc } = value.d;
    const plain = { w: 'a-node-from-before', d: { ...doc, joinTokens: { worker: tokens.workerToken, manager: tokens.managerToken } } };
    const put = await etcdctl(d1(), ['put', CLUSTER_KEY, JSON.stringify(plain)]);
    assert.equal(put.code, 0, put.stderr);
    await eventually('the manager sealed the plain record', async () => {
      const now = (await etcdctl(d1(), ['get', CLUSTER_KEY, '--print-value-only'])).stdout;
      return now.includes('sealedJoinTokens') && !now.includes('SWMTKN') ? true : undefined;
    }, 15_000, 200);
    assert.equal(await ok(d1(), ['swarm', 'join-token', '-q', 'worker']), tokens.workerToken);
    assert.equal(await ok(d1(), ['swarm', 'join-token', '-q', 'manager']), tokens.managerToken);
  });

  it('refuses a worker\'s certificate what is not its own; the worker still runs and reports its tasks', async () => {
    const [id1, id2] = tokens.nodeIds as [string, string];
    assert.equal((await d1().docker(['secret', 'create', 'pw', '-'], { input: 'not-for-workers' })).code, 0);
    await ok(d1(), ['service', 'create', '-d', '--name', 'acl', '--replicas', '2', '--secret', 'pw', c().image, 'sh', '-c', LOOP]);
    await waitSpread(d1(), 'acl', { [id1]: 1, [id2]: 1 });
    const asWorker = (args: string[]) => etcdctl(d1(), args, true, d2());
    const refused = async (what: string, args: string[]) => {
      const r = await asWorker(args);
      assert.notEqual(r.code, 0, `${what}: allowed\n${r.stdout}`);
      assert.match(r.stderr, /permission denied/, what);
    };
    await refused('writing a service', ['put', '/berth/swarm/services/forged', '{"w":"x","d":{}}']);
    await refused('deleting a service', ['del', '--prefix', '/berth/swarm/services/']);
    await refused('promoting itself', ['put', `/berth/swarm/nodes/${id2}`, '{"w":"x","d":{}}']);
    await refused('writing another node\'s task status', ['put', `/berth/swarm/taskstatus/${id1}/forged`, '{"w":"x","d":{}}']);
    await refused('writing the cluster', ['put', CLUSTER_KEY, '{"w":"x","d":{}}']);
    await refused('reading the secrets', ['get', '--prefix', '/berth/swarm/secrets/']);
    await refused('reading the CA key', ['get', '/berth/swarm/keys/ca']);
    await refused('reading everything', ['get', '--prefix', '/berth/swarm/']);
    // What it needs it reads, and its own task's status is its to write.
    const services = await asWorker(['get', '--prefix', '/berth/swarm/services/', '--keys-only']);
    assert.equal(services.code, 0, services.stderr);
    assert.match(services.stdout, /\/berth\/swarm\/services\//);
    const own = await asWorker(['get', '--prefix', `/berth/swarm/taskstatus/${id2}/`]);
    assert.equal(own.code, 0, own.stderr);
    assert.match(own.stdout, /"state":"running"/);
    // Managers keep full access.
    assert.equal((await etcdctl(d1(), ['get', '--prefix', '/berth/swarm/secrets/', '--keys-only'])).code, 0);
    // Scaled up, the worker starts its new task and the manager hears it running.
    await ok(d1(), ['service', 'scale', '-d', 'acl=4']);
    await waitSpread(d1(), 'acl', { [id1]: 2, [id2]: 2 });
    const secret = (await d2().docker(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=acl'])).stdout.trim().split('\n')[0]!;
    assert.equal((await d2().docker(['exec', secret, 'cat', '/run/secrets/pw'])).stdout, 'not-for-workers');
    await ok(d1(), ['service', 'rm', 'acl']);
  });

  it('refuses a join whose ports are no ports (400), and counts no node for it', async () => {
    const ask = {
      token: tokens.workerToken, csr: '', addr: c().net.hostAddr, hostname: 'h', architecture: 'x86_64', ncpu: 1, memTotal: 1, availability: 'active',
    };
    for (const bad of [{ listenPort: 70000 }, { listenPort: 0 }, { clientPort: 2379.5, peerPort: 2380 }]) {
      await assert.rejects(askToJoin(`${c().node(1).addr}:2377`, { ...ask, ...bad }), (err: Error) => /is no port/.test(err.message), JSON.stringify(bad));
    }
    assert.equal((await nodesOf(d1())).length, 2);
  });

  it('a stopped manager closes its link to etcd before it exits', async () => {
    await d1().stop();
    const log = d1().logs();
    const closed = log.indexOf('swarm closed');
    assert.ok(closed > 0 && closed < log.indexOf('berthd stopped'), log.slice(-3000));
    await d1().restart();
    await eventually('node 1 serves the swarm again', async () => (await nodesOf(d1())).length === 2, 60_000, 300);
  });
});
