/**
 * The `overlay` driver name: refused outside a swarm with dockerd's 403; in a (single-node) swarm a
 * bridge-like network shown as driver overlay, scope swarm, that plain containers may join only when
 * created attachable.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemonWithBusybox } from '../harness/busybox-daemon.js';

describe('overlay networks', () => {
  const { daemon, image: busybox } = useDaemonWithBusybox();
  let image = '';
  before(() => (image = busybox()));
  after(async () => {
    await daemon().docker(['rm', '-f', 'ovserver', 'ovclient']);
    await daemon().docker(['network', 'rm', 'ovplain', 'ovattach']);
    await daemon().docker(['swarm', 'leave', '--force']);
  });

  it('outside a swarm: 403 "not a swarm manager", attachable or not', async () => {
    for (const extra of [[], ['--attachable']]) {
      const r = await daemon().docker(['network', 'create', '-d', 'overlay', ...extra, 'ovearly']);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /This node is not a swarm manager\. Use "docker swarm init" or "docker swarm join"/);
    }
    const api = await daemon().request('POST', '/networks/create', { body: { Name: 'ovearly', Driver: 'overlay' } });
    assert.equal(api.status, 403);
  });

  it('in a swarm: driver overlay, scope swarm; containers join only an attachable one and reach each other by name', async () => {
    const d = daemon();
    const init = await d.docker(['swarm', 'init', '--advertise-addr', '127.0.0.1', '--listen-addr', '127.0.0.1:0']);
    assert.equal(init.code, 0, init.stderr);
    assert.equal((await d.docker(['network', 'create', '-d', 'overlay', 'ovplain'])).code, 0);
    assert.equal((await d.docker(['network', 'create', '-d', 'overlay', '--attachable', 'ovattach'])).code, 0);
    const n = (await d.request('GET', '/networks/ovattach')).json();
    assert.equal(n.Driver, 'overlay');
    assert.equal(n.Scope, 'swarm');
    assert.equal(n.Attachable, true);
    const listed = (await d.docker(['network', 'ls', '--filter', 'driver=overlay', '--format', '{{.Name}}'])).stdout.trim().split('\n').sort();
    assert.deepEqual(listed, ['ingress', 'ovattach', 'ovplain'], 'with the ingress network swarm init made');
    const refused = await d.docker(['run', '--rm', '--network', 'ovplain', image, 'true']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /network ovplain not manually attachable/);
    assert.equal((await d.docker(['run', '-d', '--name', 'ovserver', '--network', 'ovattach', image, 'sleep', '300'])).code, 0);
    const ping = await d.docker(['run', '--name', 'ovclient', '--network', 'ovattach', image, 'ping', '-c', '1', '-W', '2', 'ovserver']);
    assert.equal(ping.code, 0, ping.stdout + ping.stderr);
    assert.match(ping.stdout, /1 packets received/);
  });
});
