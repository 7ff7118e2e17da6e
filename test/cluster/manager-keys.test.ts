/**
 * The keys only managers hold. A worker promoted to manager can sign joins (the CA key reaches it
 * sealed in etcd), so a node joins through it; demoted, it holds the key no more.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { startCluster, type TestCluster } from './harness.js';
import { eventually, nodesOf } from './support.js';

const keyFile = (d: TestDaemon, name: string) => join(d.dataRoot, 'swarm', 'cluster', name);

describe('manager keys', () => {
  const reg = useSeededRegistry('open');
  let c: TestCluster & { teardown(): Promise<void> };
  const ids: string[] = [];
  let workerToken = '';

  before(async () => {
    c = await startCluster(3, reg());
    const d1 = c.node(1).daemon;
    const init = await d1.docker(['swarm', 'init', '--advertise-addr', c.node(1).addr, '--dispatcher-heartbeat', '1s']);
    assert.equal(init.code, 0, init.stderr);
    workerToken = (await d1.docker(['swarm', 'join-token', '-q', 'worker'])).stdout.trim();
    const join2 = await c.node(2).daemon.docker(['swarm', 'join', '--token', workerToken, `${c.node(1).addr}:2377`]);
    assert.equal(join2.code, 0, join2.stderr);
    for (const i of [1, 2]) ids.push((await c.node(i).daemon.docker(['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim());
  });
  after(async () => {
    await c?.teardown();
  });

  it('a node joins through a promoted manager, which then holds the CA key; demoted, it drops it', async () => {
    const d2 = c.node(2).daemon;
    assert.equal(existsSync(keyFile(d2, 'ca-key.pem')), false, 'a worker holds no CA key');
    const p = await c.node(1).daemon.docker(['node', 'promote', ids[1]!]);
    assert.equal(p.code, 0, p.stderr);
    await eventually('node 2 a manager', async () => (await d2.docker(['info', '--format', '{{.Swarm.ControlAvailable}}'])).stdout.trim() === 'true', 60_000, 300);
    const j = await c.node(3).daemon.docker(['swarm', 'join', '--token', workerToken, `${c.node(2).addr}:2377`]);
    assert.equal(j.code, 0, `${j.stderr}\n${d2.logTail(30)}`);
    assert.match(j.stdout, /This node joined a swarm as a worker\./);
    assert.equal(existsSync(keyFile(d2, 'ca-key.pem')), true, 'the promoted manager kept the CA key it signed with');
    const id3 = (await c.node(3).daemon.docker(['info', '--format', '{{.Swarm.NodeID}}'])).stdout.trim();
    ids.push(id3);
    await eventually('node 3 ready, seen from node 1', async () => (await nodesOf(c.node(1).daemon)).find((n) => n.ID === id3)?.Status.State === 'ready', 30_000, 300);
    const d = await c.node(1).daemon.docker(['node', 'demote', ids[1]!]);
    assert.equal(d.code, 0, d.stderr);
    await eventually('node 2 a worker without the CA key', async () => !existsSync(keyFile(d2, 'ca-key.pem')) && (await d2.docker(['info', '--format', '{{.Swarm.ControlAvailable}}'])).stdout.trim() === 'false', 60_000, 300);
  });
});
