/**
 * What a worker's etcd certificate gets: the join tokens sit in etcd sealed under the data key (no
 * token a worker could read there, nor one a manager wrote plain before), and `join-token`, its
 * `--rotate` and joins keep working.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry } from '../harness/index.js';
import { useCluster } from './harness.js';
import { etcdctl, eventually, formSwarm, ok } from './support.js';

const CLUSTER_KEY = '/berth/swarm/cluster';

describe('etcd access of a worker', () => {
  const reg = useSeededRegistry('open');
  const c = useCluster(2, reg);
  const d1 = () => c().node(1).daemon;
  const d2 = () => c().node(2).daemon;
  let tokens: { workerToken: string; managerToken: string };

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
});
