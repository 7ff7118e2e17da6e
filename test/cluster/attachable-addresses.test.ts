/**
 * Plain containers on an attachable overlay network, started on two nodes at the same moment: each
 * node picks their addresses itself, so without a claim in etcd both would take the lowest free one.
 * Every address is claimed in one etcd transaction (`addresses/<network>/<ip>`): however the starts
 * interleave, no address is held twice, and each claim names the node and container holding it.
 * Node 2 is a worker: a manager makes its claims for it, and its own certificate can neither write
 * nor delete one (so it cannot squat or drop another node's address).
 * And the `ingress` network swarm init makes is on every node, worker included, with both as peers.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { useCluster } from './harness.js';
import { etcdctl, eventually, formSwarm, nodesOf, ok } from './support.js';

const ROUNDS = 6;
const PER_NODE = 2;

describe('attachable overlay addresses across nodes', () => {
  const reg = useSeededRegistry('open');
  const cluster = useCluster(2, reg);
  const made: { d: TestDaemon; name: string }[] = [];
  after(async () => {
    const c = cluster();
    for (const n of c.nodes) {
      const names = made.filter((m) => m.d === n.daemon).map((m) => m.name);
      if (names.length) await n.daemon.docker(['rm', '-f', ...names]).catch(() => undefined);
    }
    await c.node(1).daemon.docker(['network', 'rm', 'claimnet']).catch(() => undefined);
  });

  it(`${ROUNDS} rounds of ${PER_NODE} starts on each of two nodes at once: every address is held once, and claimed in etcd`, async () => {
    const c = cluster();
    const [d1, d2] = [c.node(1).daemon, c.node(2).daemon];
    const { nodeIds } = await formSwarm(c);
    await eventually('two ready nodes', async () => (await nodesOf(d1)).filter((n) => n.Status.State === 'ready').length === 2, 90_000);
    await ok(d1, ['network', 'create', '-d', 'overlay', '--attachable', 'claimnet']);
    await eventually('node 2 has the network', async () => (await d2.request('GET', '/networks/claimnet')).status === 200, 30_000);

    for (let round = 0; round < ROUNDS; round++) {
      const starts = [d1, d2].flatMap((d, node) =>
        Array.from({ length: PER_NODE }, (_, k) => {
          const name = `claim-${round}-${node + 1}-${k}`;
          made.push({ d, name });
          return ok(d, ['run', '-d', '--name', name, '--network', 'claimnet', c.image, 'sleep', '600']);
        }),
      );
      await Promise.all(starts);
    }

    const held = new Map<string, string>();
    for (const { d, name } of made) {
      const ip = await ok(d, ['inspect', '--format', '{{(index .NetworkSettings.Networks "claimnet").IPAddress}}', name]);
      assert.match(ip, /^\d+\.\d+\.\d+\.\d+$/, name);
      assert.ok(!held.has(ip), `${ip} is held by both ${held.get(ip)} and ${name}`);
      held.set(ip, name);
    }
    assert.equal(held.size, ROUNDS * PER_NODE * 2);

    // Each address is a key in etcd naming the container that holds it.
    const netId = (await d1.request('GET', '/networks/claimnet')).json<{ Id: string }>().Id;
    const got = await etcdctl(d1, ['get', '--prefix', `/berth/swarm/addresses/${netId}/`]);
    assert.equal(got.code, 0, got.stderr);
    const lines = got.stdout.split('\n').filter(Boolean);
    const claims = new Map<string, { container: string; node: string }>();
    for (let i = 0; i + 1 < lines.length; i += 2) claims.set(lines[i]!.split('/').pop()!, (JSON.parse(lines[i + 1]!) as { d: { container: string; node: string } }).d);
    for (const [ip, name] of held) {
      const owner = made.find((m) => m.name === name)!;
      const id = await ok(owner.d, ['inspect', '--format', '{{.Id}}', name]);
      assert.equal(claims.get(ip)?.container, id, `the claim of ${ip} names ${name}`);
      assert.equal(claims.get(ip)?.node, nodeIds[owner.d === d1 ? 0 : 1], `the claim of ${ip} names the node of ${name}`);
    }

    // The worker's certificate may read the claims, never make, take over or drop one.
    const [someIp, someClaim] = [...claims].find(([, cl]) => cl.node === nodeIds[0])!;
    const forged = JSON.stringify({ w: nodeIds[1], d: { node: nodeIds[1], container: 'f'.repeat(64) } });
    for (const args of [
      ['put', `/berth/swarm/addresses/${netId}/${someIp.replace(/\d+$/, '1')}`, forged],
      ['put', `/berth/swarm/addresses/${netId}/${someIp}`, forged],
      ['del', `/berth/swarm/addresses/${netId}/${someIp}`],
      ['del', '--prefix', `/berth/swarm/addresses/`],
    ]) {
      const r = await etcdctl(d1, args, true, d2);
      assert.notEqual(r.code, 0, `the worker's ${args.join(' ')} was allowed`);
      assert.match(r.stderr, /permission denied/);
    }
    const read = await etcdctl(d1, ['get', `/berth/swarm/addresses/${netId}/${someIp}`, '--print-value-only'], true, d2);
    assert.equal(read.code, 0, read.stderr);
    assert.equal((JSON.parse(read.stdout) as { d: { container: string } }).d.container, someClaim.container);

    // A claim of a node gone from the swarm (left there by a node removed while down): the leader
    // drops it at the next node change.
    const free = Array.from({ length: 50 }, (_, i) => someIp.replace(/\d+$/, String(200 + i))).find((ip) => !claims.has(ip))!;
    const gone = `/berth/swarm/addresses/${netId}/${free}`;
    assert.equal((await etcdctl(d1, ['put', gone, JSON.stringify({ w: 'gone', d: { node: 'gone', container: 'e'.repeat(64) } })])).code, 0);
    await ok(d1, ['node', 'update', '--label-add', 'claims=checked', nodeIds[1]!]);
    await eventually('the removed node\'s claim dropped', async () => ((await etcdctl(d1, ['get', gone, '--keys-only'])).stdout.trim() === '' ? true : undefined), 20_000, 300);

    // Containers gone, their claims go (each node drops its own; a worker's, through a manager).
    for (const d of [d1, d2]) await ok(d, ['rm', '-f', ...made.filter((m) => m.d === d).map((m) => m.name)]);
    made.length = 0;
    await eventually('no address claimed any more', async () => {
      const left = await etcdctl(d1, ['get', '--prefix', '--keys-only', `/berth/swarm/addresses/${netId}/`]);
      return left.code === 0 && left.stdout.trim() === '';
    }, 30_000, 500);
  });

  it('every node lists the ingress network, every node its peer', async () => {
    const c = cluster();
    const ids = new Set<string>();
    for (const n of c.nodes) {
      const net = await eventually(`node ${n.index} has the ingress network`, async () => {
        const r = await n.daemon.request('GET', '/networks/ingress');
        return r.status === 200 ? r.json<{ Id: string; Ingress: boolean; Scope: string; Peers: { IP: string }[] }>() : undefined;
      }, 30_000);
      assert.equal(net.Ingress, true);
      assert.equal(net.Scope, 'swarm');
      assert.deepEqual(net.Peers.map((p) => p.IP).sort(), c.nodes.map((x) => x.addr).sort());
      ids.add(net.Id);
    }
    assert.equal(ids.size, 1, 'one network under one id on every node');
  });
});
