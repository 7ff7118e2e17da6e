/**
 * `docker swarm leave` (a manager's `--force` too) takes every swarm network off the node, as dockerd
 * does: the overlay networks of its tasks, the attachable ones (a plain container on one is
 * disconnected first and keeps running) and ingress, with their bridges, vxlan devices and the ARP
 * guard's nft table.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useSeededRegistry, run, type TestDaemon } from '../harness/index.js';
import { useCluster } from './harness.js';
import { LOOP, eventually, formSwarm, ok, tasksOf } from './support.js';

/** What `ip`/`nft` list in node `ns`'s namespace, one name per line. */
async function inNode(ns: string, args: string[]): Promise<string[]> {
  const r = await run('ip', ['netns', 'exec', ns, ...args], { timeoutMs: 10_000 });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.split('\n').filter(Boolean);
}
const links = async (ns: string, type: string) => (await inNode(ns, ['ip', '-o', 'link', 'show', 'type', type])).map((l) => l.split(':')[1]!.trim().split('@')[0]!);
const tables = (ns: string) => inNode(ns, ['nft', 'list', 'tables']);
const swarmNetworks = async (d: TestDaemon) => (await ok(d, ['network', 'ls', '--filter', 'scope=swarm', '--format', '{{.Name}}'])).split('\n').filter(Boolean).sort();

describe('swarm leave and overlay networks', () => {
  const reg = useSeededRegistry('open');
  const cluster = useCluster(2, reg);

  it('a worker that leaves keeps no swarm network, bridge, vxlan device or nft table of one; its plain container is disconnected', async () => {
    const c = cluster();
    const [m, w] = [c.node(1).daemon, c.node(2).daemon];
    const ns = c.net.netns(2);
    const before = { bridges: await links(ns, 'bridge'), tables: await tables(ns) };
    assert.deepEqual(await links(ns, 'vxlan'), []);
    await formSwarm(c);
    await ok(m, ['network', 'create', '-d', 'overlay', '--attachable', 'att']);
    await ok(m, ['network', 'create', '-d', 'overlay', 'ovl']);
    await ok(m, ['service', 'create', '-d', '--name', 'onw', '--network', 'ovl', '--constraint', 'node.role==worker', c.image, 'sh', '-c', LOOP]);
    await eventually('the task runs on the worker', async () => (await tasksOf(m, 'onw')).some((t) => t.Status.State === 'running'), 120_000, 300);
    await eventually('the worker has the attachable network', async () => (await swarmNetworks(w)).includes('att'), 30_000, 300);
    const plain = await ok(w, ['run', '-d', '--name', 'plain', '--network', 'att', c.image, 'sh', '-c', LOOP]);
    assert.deepEqual(await swarmNetworks(w), ['att', 'ingress', 'ovl']);
    await eventually('the worker has vxlan devices for both networks', async () => (await links(ns, 'vxlan')).length >= 2, 30_000, 300);

    const left = await w.docker(['swarm', 'leave']);
    assert.equal(left.code, 0, left.stderr);
    assert.deepEqual(await swarmNetworks(w), []);
    assert.equal(await ok(w, ['network', 'ls', '--filter', 'driver=overlay', '-q']), '');
    assert.deepEqual(await links(ns, 'vxlan'), []);
    const bridges = await links(ns, 'bridge');
    assert.deepEqual(bridges.filter((b) => !before.bridges.includes(b)), [], 'no bridge of a swarm network is left');
    assert.deepEqual((await tables(ns)).filter((t) => !before.tables.includes(t)), [], 'no nft table of a swarm network is left');
    // As dockerd: the plain container was disconnected first, and runs on.
    assert.equal(await ok(w, ['inspect', '--format', '{{.State.Running}}', plain]), 'true');
    assert.equal(await ok(w, ['inspect', '--format', '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}', plain]), '');
    assert.equal(await ok(w, ['ps', '-aq', '--filter', 'label=com.docker.swarm.service.name=onw']), '');
    await ok(w, ['rm', '-f', plain]);
    await ok(m, ['service', 'rm', 'onw']);
  });

  it('so does a manager with leave --force', async () => {
    const c = cluster();
    const m = c.node(1).daemon;
    const ns = c.net.netns(1);
    const plain = await ok(m, ['run', '-d', '--network', 'att', c.image, 'sh', '-c', LOOP]);
    await eventually('the manager has a vxlan device', async () => (await links(ns, 'vxlan')).length >= 1, 30_000, 300);
    assert.notEqual((await m.docker(['swarm', 'leave'])).code, 0, 'a manager leaves only with --force');
    await ok(m, ['swarm', 'leave', '--force']);
    assert.deepEqual(await swarmNetworks(m), []);
    assert.deepEqual(await links(ns, 'vxlan'), []);
    assert.equal(await ok(m, ['inspect', '--format', '{{.State.Running}} {{len .NetworkSettings.Networks}}', plain]), 'true 0');
    await ok(m, ['rm', '-f', plain]);
  });
});
