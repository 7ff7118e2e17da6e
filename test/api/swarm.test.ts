/**
 * routes/swarm.ts on the wire, for what test/swarm/swarm-api.test.ts (init, inspect, update, unlock,
 * leave, nodes list, inspect and update) and swarm-cli.test.ts do not ask: joining while in a swarm
 * and with a malformed body, removing a node, and unlocking a manager that is not locked (a locked
 * one: test/cluster/manager-keys.test.ts).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, usePulledBusybox } from '../harness/index.js';
import { useSwarmService } from './swarm-fixture.js';

describe('swarm API: join and node removal', () => {
  const daemon = useDaemon();
  const swarm = useSwarmService(daemon, usePulledBusybox(daemon, useSeededRegistry('open')));

  it('join: a malformed body is a 400, a node already in a swarm a 503', async () => {
    const d = daemon();
    const bad = await d.request('POST', '/swarm/join', { body: '{"RemoteAddrs": [', headers: { 'content-type': 'application/json' } });
    assert.equal(bad.status, 400, bad.text());
    const again = await d.request('POST', '/swarm/join', { body: { ListenAddr: '0.0.0.0:2377', RemoteAddrs: ['127.0.0.1:2377'], JoinToken: 'SWMTKN-1-x' } });
    assert.equal(again.status, 503, again.text());
    assert.match(again.json<{ message: string }>().message, /^This node is already part of a swarm\./);
  });

  it('remove node: the manager must be demoted first, an unknown node is a 404; the node stays', async () => {
    const d = daemon();
    const { nodeId } = swarm();
    const self = await d.request('DELETE', `/nodes/${nodeId}`);
    assert.equal(self.status, 400, self.text());
    assert.equal(self.json<{ message: string }>().message, `rpc error: code = FailedPrecondition desc = node ${nodeId} is a cluster manager and is a member of the raft cluster. It must be demoted to worker before removal`);
    const forced = await d.request('DELETE', `/nodes/${nodeId}?force=1`);
    assert.equal(forced.status, 400, 'force does not remove a manager either');
    const unknown = await d.request('DELETE', '/nodes/no-such-node');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json<{ message: string }>().message, 'node no-such-node not found');
    assert.deepEqual((await d.request('GET', '/nodes')).json<{ ID: string }[]>().map((n) => n.ID), [nodeId]);
  });

  it('unlock: a manager that is not locked answers 409, as dockerd; a malformed body is a 400', async () => {
    const d = daemon();
    swarm();
    const r = await d.request('POST', '/swarm/unlock', { body: { UnlockKey: 'SWMKEY-1-abc' } });
    assert.equal(r.status, 409, r.text());
    assert.equal(r.json<{ message: string }>().message, 'swarm is not locked');
    const bad = await d.request('POST', '/swarm/unlock', { body: '{"UnlockKey": ', headers: { 'content-type': 'application/json' } });
    assert.equal(bad.status, 400, bad.text());
  });
});
