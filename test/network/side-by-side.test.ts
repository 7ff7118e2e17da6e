/**
 * Two daemons with different network prefixes on one host, each with containers on its own
 * network; and a daemon started on another data root with the prefix of one killed earlier adopts
 * the default bridge, firewall table and prefix claim it left behind instead of dying, and removes
 * the killed daemon's other devices of that prefix.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { run, startDaemon, useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { newNetworkPrefix, removeNetworkLeftovers } from '../harness/network-cleanup.js';
import { listLinks } from '../../src/network/bridge-device.js';

describe('daemons side by side and leftovers', () => {
  const reg = useSeededRegistry('open');
  const prefixes = [newNetworkPrefix(), newNetworkPrefix()];
  const daemons: TestDaemon[] = [];
  after(async () => {
    for (const d of daemons) await d.teardown().catch(() => undefined);
    for (const p of prefixes) removeNetworkLeftovers(p);
  });

  async function start(prefix: string): Promise<TestDaemon> {
    const d = await startDaemon({ args: ['--network-prefix', prefix] });
    daemons.push(d);
    return d;
  }

  /** Runs a container on the default bridge that pings its gateway; returns the gateway. */
  async function reachesNetwork(d: TestDaemon): Promise<string> {
    const image = reg().seeded.refs.busybox;
    assert.equal((await d.docker(['pull', '-q', image])).code, 0);
    const r = await d.docker(['run', '--rm', image, 'sh', '-c', 'gw=$(ip route | awk "/default/ {print \\$3}"); ping -c 1 -W 2 $gw >/dev/null && echo "reached $gw"']);
    assert.equal(r.code, 0, r.stderr + d.logTail());
    const m = /^reached (\S+)$/m.exec(r.stdout);
    assert.ok(m, r.stdout);
    return m[1]!;
  }

  it('two prefixes: each daemon has its own bridge and its containers reach it', async () => {
    const [a, b] = [await start(prefixes[0]!), await start(prefixes[1]!)];
    const [gwA, gwB] = await Promise.all([reachesNetwork(a), reachesNetwork(b)]);
    assert.notEqual(gwA, gwB, 'separate subnets');
    const links = await listLinks('ip');
    assert.equal(links.get(`${prefixes[0]}0`)?.kind, 'bridge');
    assert.equal(links.get(`${prefixes[1]}0`)?.kind, 'bridge');
  });

  it('a daemon on another data root adopts the bridge, nft table and claim a killed one left, and removes its stray devices', async () => {
    const killed = daemons[0]!;
    const gateway = (await killed.request('GET', '/networks/bridge')).json().IPAM.Config[0].Gateway as string;
    assert.equal((await killed.docker(['network', 'create', 'leftnet'])).code, 0);
    const userBridge = `${prefixes[0]}-${((await killed.request('GET', '/networks/leftnet')).json().Id as string).slice(0, 14 - prefixes[0]!.length)}`;
    const orphan = await killed.docker(['run', '-d', reg().seeded.refs.busybox, 'sleep', '300']);
    assert.equal(orphan.code, 0, orphan.stderr);
    const vethsBefore = [...(await listLinks('ip')).values()].filter((l) => l.kind === 'veth' && l.name.startsWith(prefixes[0]!));
    assert.ok(vethsBefore.length >= 1, 'the running container has a host veth');
    await killed.kill9();
    const left = await listLinks('ip');
    assert.ok(left.has(`${prefixes[0]}0`) && left.has(userBridge), 'the bridges are left behind');
    const next = await start(prefixes[0]!);
    assert.equal(await reachesNetwork(next), gateway, 'adopted with its address');
    const again = (await next.request('GET', '/networks/bridge')).json();
    assert.equal(again.IPAM.Config[0].Gateway, gateway);
    const after = await listLinks('ip');
    assert.ok(!after.has(userBridge), 'the unknown user bridge of the prefix is removed');
    for (const v of vethsBefore) assert.ok(!after.has(v.name), `stray veth ${v.name} removed`);
  });

  it('a daemon on another data root sharing a killed one\'s exec root starts and its containers reach the network', async () => {
    const prefix = newNetworkPrefix();
    prefixes.push(prefix);
    const first = await start(prefix);
    const image = reg().seeded.refs.busybox;
    assert.equal((await first.docker(['pull', '-q', image])).code, 0);
    // Its leftovers: a running container, a user network with aardvark-dns serving it, the nft table.
    assert.equal((await first.docker(['network', 'create', 'firstnet'])).code, 0);
    const left = await first.docker(['run', '-d', '--network', 'firstnet', '--name', 'firstbox', image, 'sleep', '300']);
    assert.equal(left.code, 0, left.stderr);
    await first.kill9();
    const second = await startDaemon({ args: ['--network-prefix', prefix, '--exec-root', first.execRoot] });
    daemons.push(second);
    await reachesNetwork(second);
    // Names resolve on a user network of the new daemon (its own aardvark-dns configuration).
    assert.equal((await second.docker(['network', 'create', 'secondnet'])).code, 0);
    assert.equal((await second.docker(['run', '-d', '--network', 'secondnet', '--name', 'server', image, 'sleep', '300'])).code, 0);
    const ping = await second.docker(['run', '--rm', '--network', 'secondnet', image, 'ping', '-c', '1', '-W', '2', 'server']);
    // On failure: who serves DNS where (a second aardvark-dns cannot bind an address another holds).
    const listeners = ping.code === 0 ? '' : (await run('ss', ['-ulpnH', 'sport = :53']).catch((e: Error) => ({ stdout: e.message }))).stdout;
    assert.equal(ping.code, 0, ping.stdout + ping.stderr + listeners + second.logTail());
  });
});

