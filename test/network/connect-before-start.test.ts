/**
 * Network connect and disconnect on containers that are not running, as compose 1.29 does before
 * every start: create on `<project>_default`, disconnect, connect again with aliases and links, start.
 * The container must keep the network it was connected to, and inspect must show what connect asked
 * for (Aliases, Links, DriverOpts) before and after the start.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';

async function ok(d: TestDaemon, method: string, path: string, body?: unknown): Promise<Record<string, any>> {
  const r = await d.request(method, path, body === undefined ? {} : { body });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path}: ${r.status} ${r.text()}`);
  return r.body.length ? r.json() : {};
}

describe('network connect before start', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  before(async () => {
    image = reg().seeded.refs.busybox;
    assert.equal((await daemon().docker(['pull', '-q', image])).code, 0);
  });

  it('create, disconnect, connect with aliases, start: the container joins that network under its aliases', async () => {
    const d = daemon();
    const net = await ok(d, 'POST', '/networks/create', { Name: 'cbs_default', Labels: { 'com.docker.compose.network': 'default' } });
    await ok(d, 'POST', '/containers/create?name=cbs_web_1', {
      Image: image, Cmd: ['httpd', '-f', '-p', '80', '-h', '/etc'],
      HostConfig: { NetworkMode: 'cbs_default' },
      NetworkingConfig: { EndpointsConfig: { cbs_default: { Aliases: ['web'] } } },
    });
    let nets = (await ok(d, 'GET', '/containers/cbs_web_1/json')).NetworkSettings.Networks;
    assert.deepEqual(Object.keys(nets), ['cbs_default']);
    assert.deepEqual(nets.cbs_default.Aliases, ['web']);

    await ok(d, 'POST', '/networks/cbs_default/disconnect', { Container: 'cbs_web_1' });
    const gone = await ok(d, 'GET', '/containers/cbs_web_1/json');
    assert.deepEqual(Object.keys(gone.NetworkSettings.Networks), []);
    assert.equal(gone.HostConfig.NetworkMode, 'cbs_default');
    const id = gone.Id as string;

    await ok(d, 'POST', '/networks/cbs_default/connect', {
      Container: 'cbs_web_1',
      EndpointConfig: { Aliases: ['web', id.slice(0, 12)], Links: ['cbs_db_1:db'], DriverOpts: { 'com.example.opt': 'x' } },
    });
    nets = (await ok(d, 'GET', '/containers/cbs_web_1/json')).NetworkSettings.Networks;
    assert.deepEqual(Object.keys(nets), ['cbs_default']);
    assert.deepEqual(nets.cbs_default.Aliases, ['web', id.slice(0, 12)]);
    assert.deepEqual(nets.cbs_default.Links, ['cbs_db_1:db']);
    assert.deepEqual(nets.cbs_default.DriverOpts, { 'com.example.opt': 'x' });
    // Connecting it twice is refused, as dockerd does for an endpoint that exists.
    const twice = await d.request('POST', '/networks/cbs_default/connect', { body: { Container: 'cbs_web_1' } });
    assert.equal(twice.status, 403, twice.text());

    await ok(d, 'POST', '/containers/cbs_web_1/start');
    const running = await ok(d, 'GET', '/containers/cbs_web_1/json');
    const ep = running.NetworkSettings.Networks.cbs_default;
    assert.deepEqual(Object.keys(running.NetworkSettings.Networks), ['cbs_default']);
    assert.equal(ep.NetworkID, net.Id);
    assert.match(ep.IPAddress, /^\d+\.\d+\.\d+\.\d+$/);
    assert.ok(ep.Aliases.includes('web'), JSON.stringify(ep));
    assert.deepEqual(ep.Links, ['cbs_db_1:db']);
    assert.deepEqual(ep.DriverOpts, { 'com.example.opt': 'x' });

    // The alias resolves on that network: another container reaches the server as `web`.
    const probe = await d.docker(['run', '--rm', '--network', 'cbs_default', image, 'wget', '-q', '-O-', 'http://web/hostname'], { timeoutMs: 60_000 });
    assert.equal(probe.code, 0, probe.stderr);
    assert.equal(probe.stdout.trim(), id.slice(0, 12));
    await ok(d, 'DELETE', '/containers/cbs_web_1?force=1');
    await ok(d, 'DELETE', '/networks/cbs_default');
  });

  it('a running container connected to a second network shows Links and DriverOpts; after stop and disconnect of every network it starts without one', async () => {
    const d = daemon();
    await ok(d, 'POST', '/networks/create', { Name: 'cbs_a' });
    await ok(d, 'POST', '/networks/create', { Name: 'cbs_b' });
    await ok(d, 'POST', '/containers/create?name=cbs_two', { Image: image, Cmd: ['sleep', '60'], HostConfig: { NetworkMode: 'cbs_a' } });
    await ok(d, 'POST', '/containers/cbs_two/start');
    await ok(d, 'POST', '/networks/cbs_b/connect', { Container: 'cbs_two', EndpointConfig: { Aliases: ['two'], Links: ['x:y'], DriverOpts: { k: 'v' } } });
    let nets = (await ok(d, 'GET', '/containers/cbs_two/json')).NetworkSettings.Networks;
    assert.deepEqual(Object.keys(nets).sort(), ['cbs_a', 'cbs_b']);
    assert.ok(nets.cbs_b.Aliases.includes('two'));
    assert.deepEqual(nets.cbs_b.Links, ['x:y']);
    assert.deepEqual(nets.cbs_b.DriverOpts, { k: 'v' });

    await ok(d, 'POST', '/containers/cbs_two/stop?t=0');
    await ok(d, 'POST', '/networks/cbs_a/disconnect', { Container: 'cbs_two' });
    nets = (await ok(d, 'GET', '/containers/cbs_two/json')).NetworkSettings.Networks;
    assert.deepEqual(Object.keys(nets), ['cbs_b']);
    await ok(d, 'POST', '/containers/cbs_two/start');
    nets = (await ok(d, 'GET', '/containers/cbs_two/json')).NetworkSettings.Networks;
    assert.deepEqual(Object.keys(nets), ['cbs_b']);
    assert.notEqual(nets.cbs_b.IPAddress, '');
    const ifs = await d.docker(['exec', 'cbs_two', 'ls', '/sys/class/net']);
    assert.deepEqual(ifs.stdout.trim().split(/\s+/).sort(), ['eth0', 'lo']);

    await ok(d, 'POST', '/containers/cbs_two/stop?t=0');
    await ok(d, 'POST', '/networks/cbs_b/disconnect', { Container: 'cbs_two' });
    await ok(d, 'POST', '/containers/cbs_two/start');
    const alone = await ok(d, 'GET', '/containers/cbs_two/json');
    assert.equal(alone.State.Running, true);
    const lo = await d.docker(['exec', 'cbs_two', 'ls', '/sys/class/net']);
    assert.equal(lo.stdout.trim(), 'lo');
    await ok(d, 'DELETE', '/containers/cbs_two?force=1');

    // A container created with `none` cannot join another network (dockerd's 400), before start or after.
    await ok(d, 'POST', '/containers/create?name=cbs_none', { Image: image, Cmd: ['sleep', '60'], HostConfig: { NetworkMode: 'none' } });
    for (const when of ['created', 'running']) {
      const r = await d.request('POST', '/networks/cbs_a/connect', { body: { Container: 'cbs_none' } });
      assert.equal(r.status, 400, `${when}: ${r.text()}`);
      assert.match(r.json().message, /private \(none\) mode/);
      if (when === 'created') await ok(d, 'POST', '/containers/cbs_none/start');
    }
    assert.deepEqual(Object.keys((await ok(d, 'GET', '/containers/cbs_none/json')).NetworkSettings.Networks), ['none']);
    await ok(d, 'DELETE', '/containers/cbs_none?force=1');
    await ok(d, 'DELETE', '/networks/cbs_a');
    await ok(d, 'DELETE', '/networks/cbs_b');
  });
});
