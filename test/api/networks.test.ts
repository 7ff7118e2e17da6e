/**
 * routes/networks.ts on the wire, for what test/network/ (connectivity, ports, connect/disconnect
 * through the CLI) and test/containers/list.test.ts do not ask: list filters, inspect by name and id
 * prefix, create's answer and refusals, remove of what cannot go, and prune's filters with a network
 * in use kept.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, usePulledBusybox, type TestDaemon } from '../harness/index.js';
import { query } from './support.js';

interface WireNetwork {
  Id: string;
  Name: string;
  Driver: string;
  Labels: Record<string, string>;
  Containers: Record<string, { Name: string; IPv4Address: string }>;
}

async function names(d: TestDaemon, filters: Record<string, string[]>): Promise<string[]> {
  const res = await d.request('GET', `/networks${query({ filters: JSON.stringify(filters) })}`);
  assert.equal(res.status, 200, res.text());
  return res.json<WireNetwork[]>().map((n) => n.Name).sort();
}

async function create(d: TestDaemon, body: Record<string, unknown>): Promise<string> {
  const res = await d.request('POST', '/networks/create', { body });
  assert.equal(res.status, 201, res.text());
  const out = res.json<{ Id: string; Warning: string }>();
  assert.match(out.Id, /^[0-9a-f]{64}$/);
  return out.Id;
}

describe('networks API', () => {
  const daemon = useDaemon();
  const busybox = usePulledBusybox(daemon, useSeededRegistry('open'));

  it('list filters by name, id prefix, label, driver, type and dangling; inspect takes a name or an id prefix', async () => {
    const d = daemon();
    const front = await create(d, { Name: 'mirror-front', Labels: { tier: 'front', team: 'a' } });
    const back = await create(d, { Name: 'mirror-back', Labels: { tier: 'back' }, Internal: true });
    const used = await d.docker(['run', '-d', '--network', 'mirror-back', busybox(), 'sleep', '300']);
    assert.equal(used.code, 0, used.stderr);
    try {
      assert.deepEqual(await names(d, { name: ['mirror-'] }), ['mirror-back', 'mirror-front']);
      assert.deepEqual(await names(d, { id: [front.slice(0, 12)] }), ['mirror-front']);
      assert.deepEqual(await names(d, { label: ['tier=back'] }), ['mirror-back']);
      assert.deepEqual(await names(d, { label: ['tier'], name: ['mirror-'] }), ['mirror-back', 'mirror-front']);
      assert.deepEqual(await names(d, { type: ['builtin'] }), ['bridge', 'host', 'none']);
      assert.deepEqual(await names(d, { type: ['custom'] }), ['mirror-back', 'mirror-front']);
      assert.deepEqual(await names(d, { dangling: ['true'] }), ['mirror-front'], 'back has a container');
      assert.deepEqual(await names(d, { driver: ['bridge'], name: ['mirror-f'] }), ['mirror-front']);
      const badType = await d.request('GET', `/networks${query({ filters: JSON.stringify({ type: ['other'] }) })}`);
      assert.equal(badType.status, 400);
      assert.equal((await d.request('GET', `/networks${query({ filters: JSON.stringify({ colour: ['red'] }) })}`)).status, 400);

      const byName = (await d.request('GET', '/networks/mirror-back')).json<WireNetwork>();
      assert.equal(byName.Id, back);
      assert.deepEqual(Object.keys(byName.Containers), [used.stdout.trim()]);
      const byPrefix = await d.request('GET', `/networks/${back.slice(0, 10)}`);
      assert.equal(byPrefix.status, 200);
      assert.equal(byPrefix.json<WireNetwork>().Name, 'mirror-back');
      assert.equal((await d.request('GET', '/networks/no-such-network')).status, 404);
    } finally {
      await d.docker(['rm', '-f', used.stdout.trim()]);
      await d.request('DELETE', `/networks/${front}`);
      await d.request('DELETE', `/networks/${back}`);
    }
  });

  it('create refuses a taken name and input without a name; remove refuses predefined and unknown networks', async () => {
    const d = daemon();
    const id = await create(d, { Name: 'mirror-taken' });
    try {
      const taken = await d.request('POST', '/networks/create', { body: { Name: 'mirror-taken' } });
      assert.equal(taken.status, 409, taken.text());
      assert.match(taken.json<{ message: string }>().message, /mirror-taken/);
      assert.equal((await d.request('POST', '/networks/create', { body: { Driver: 'bridge' } })).status, 400);
      assert.equal((await d.request('POST', '/networks/create', { body: '{"Name": ', headers: { 'content-type': 'application/json' } })).status, 400);
      const predefined = await d.request('DELETE', '/networks/bridge');
      assert.equal(predefined.status, 403, predefined.text());
      assert.equal((await d.request('DELETE', '/networks/no-such-network')).status, 404);
      assert.equal((await d.request('POST', '/networks/mirror-taken/connect', { body: {} })).status, 400, 'connect needs a Container');
      assert.equal((await d.request('POST', '/networks/mirror-taken/disconnect', { body: { Container: 'no-such-container' } })).status, 404);
    } finally {
      assert.equal((await d.request('DELETE', `/networks/${id}`)).status, 204);
    }
  });

  it('prune removes unused custom networks matching label, label! and until; in-use and predefined ones stay', async () => {
    const d = daemon();
    const a = await create(d, { Name: 'prune-a', Labels: { prune: 'yes' } });
    const b = await create(d, { Name: 'prune-b', Labels: { prune: 'no' } });
    const busy = await create(d, { Name: 'prune-busy', Labels: { prune: 'yes' } });
    const c = await d.docker(['run', '-d', '--network', 'prune-busy', busybox(), 'sleep', '300']);
    assert.equal(c.code, 0, c.stderr);
    try {
      const pruneWith = async (filters: Record<string, string[]>) => {
        const res = await d.request('POST', `/networks/prune${query({ filters: JSON.stringify(filters) })}`);
        assert.equal(res.status, 200, res.text());
        return res.json<{ NetworksDeleted: string[] | null }>().NetworksDeleted ?? [];
      };
      assert.deepEqual(await pruneWith({ until: ['1h'] }), [], 'all are younger than an hour');
      assert.deepEqual(await pruneWith({ label: ['prune=yes'] }), ['prune-a']);
      assert.deepEqual(await pruneWith({ 'label!': ['prune=no'] }), []);
      assert.deepEqual(await pruneWith({}), ['prune-b']);
      assert.deepEqual(await names(d, { type: ['custom'] }), ['prune-busy']);
      assert.equal((await d.request('GET', `/networks/${a}`)).status, 404);
      assert.equal((await d.request('GET', `/networks/${b}`)).status, 404);
      assert.equal((await d.request('POST', `/networks/prune${query({ filters: JSON.stringify({ driver: ['bridge'] }) })}`)).status, 400);
    } finally {
      await d.docker(['rm', '-f', c.stdout.trim()]);
      await d.request('DELETE', `/networks/${busy}`);
    }
  });
});
