/**
 * The network controller and its bridge driver against the real kernel, networks themselves: the
 * predefined ones, create and its checks, removal, allocations across a daemon restart, parallel
 * daemons and the purge of what a stopped one left. Containers' endpoints are in
 * network-endpoints.test.ts; the fixture (temp root, per-run device prefix, teardown that checks
 * nothing is left) in test/fixtures/network-controller.ts. Traffic stays on 127.0.0.0/8 and the
 * test networks.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openDatabase } from '../../state/db.js';
import { mountPoints } from '../../network/netns.js';
import { purgeHostState } from '../../network/purge-host-state.js';
import { prefixClaimPath } from '../../network/host-lock.js';
import { runTool } from '../../network/run-tool.js';
import type { NetworkController } from './network-controller.js';
import { controllerOn, inNs, NetFixture, nsLinks, retry } from '../../../test/fixtures/network-controller.js';

const fx = new NetFixture();
fx.register();

fx.test('predefined networks: bridge on its own device and a free subnet, host, none', async () => {
  const names = fx.driver.list().map((n) => `${n.name}/${n.driver}`);
  assert.deepEqual(names.sort(), ['bridge/bridge', 'host/host', 'none/null']);
  const bridge = fx.driver.get('bridge');
  assert.equal(bridge.bridgeName, `${fx.prefix}0`);
  assert.match(bridge.subnet, /^(172\.(1[7-9]|2\d|3[01])\.0\.0\/16|192\.168\.\d+\.0\/20)$/);
  assert.equal(bridge.dnsEnabled, false);
  const addrs = JSON.parse(await runTool('ip', ['-j', 'addr', 'show', 'dev', bridge.bridgeName])) as { addr_info: { local: string }[] }[];
  assert.ok(addrs[0]!.addr_info.some((a) => a.local === bridge.gateway));
  // No other route on the host overlaps it.
  const routes = JSON.parse(await runTool('ip', ['-j', 'route', 'show'])) as { dst: string; dev: string }[];
  const clash = routes.filter((r) => r.dst === bridge.subnet && r.dev !== bridge.bridgeName);
  assert.deepEqual(clash, []);
  assert.equal(fx.driver.get(bridge.id.slice(0, 6)).name, 'bridge', 'by id prefix');
  await assert.rejects(fx.driver.remove('bridge'), { kind: 'forbidden', message: /pre-defined network/ });

  // host: no namespace of its own; none: a namespace with only loopback; neither mixes with others.
  const h = fx.containerId();
  assert.deepEqual(await fx.driver.setup({ containerId: h, name: '/h', networks: [{ network: 'host' }] }), { endpoints: {}, ports: [], netnsPath: '' });
  const n = fx.containerId();
  const none = await fx.startContainer({ containerId: n, name: '/n', networks: [{ network: 'none' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '', hostPort: 0 }] });
  assert.deepEqual(none.ports, []);
  const links = await nsLinks(none.netnsPath);
  assert.deepEqual(links.map((l) => l.ifname), ['lo']);
  assert.deepEqual(links[0]!.addr_info.map((a) => a.local), ['127.0.0.1', '::1']);
  await assert.rejects(fx.driver.setup({ containerId: fx.containerId(), name: '/x', networks: [{ network: 'none' }, { network: 'bridge' }] }), { kind: 'invalid-argument' });
});

fx.test('a network with a given id, subnet and gateway; hooks run while its bridge exists; a failing hook undoes the create', async () => {
  const id = randomBytes(32).toString('hex');
  fx.hookCalls.length = 0;
  const n = await fx.createNetwork({ id, name: 'given', ipam: { config: [{ subnet: '10.213.70.0/24', gateway: '10.213.70.1' }] } });
  assert.equal(n.id, id);
  assert.equal(fx.driver.get(id).bridgeName, n.bridgeName);
  assert.deepEqual([n.subnet, n.gateway], ['10.213.70.0/24', '10.213.70.1']);
  await assert.rejects(fx.driver.create({ id, name: 'again' }), { kind: 'conflict' });
  await assert.rejects(fx.driver.create({ id: 'short', name: 'again' }), { kind: 'conflict' });
  await fx.driver.remove(id);
  assert.deepEqual(fx.hookCalls, ['created given true', 'deleting given true']);
  assert.ok(!(await fx.hostLinks()).includes(n.bridgeName));

  fx.failNextCreatedHook = true;
  await assert.rejects(fx.driver.create({ name: 'refused' }), /hook refused/);
  assert.throws(() => fx.driver.get('refused'), { kind: 'not-found' });
  assert.deepEqual((await fx.hostLinks()).filter((l) => l.startsWith(`${fx.prefix}-`)), [], 'no bridge left by the refused create');
});

fx.test('create checks names, drivers and subnets like dockerd', async () => {
  const n = await fx.driver.create({ name: 'chk', labels: { a: 'b' }, ipam: { config: [{ subnet: '10.213.64.0/24', gateway: '10.213.64.254' }] } });
  try {
    assert.equal(n.gateway, '10.213.64.254');
    assert.equal(n.dnsEnabled, true);
    assert.ok(n.bridgeName.startsWith(`${fx.prefix}-`) && n.bridgeName.length <= 15);
    assert.deepEqual(fx.driver.get(n.id).labels, { a: 'b' });
    await assert.rejects(fx.driver.create({ name: 'chk' }), { kind: 'conflict', message: 'network with name chk already exists' });
    await assert.rejects(fx.driver.create({ name: 'host' }), { kind: 'forbidden' });
    await assert.rejects(fx.driver.create({ name: 'o', driver: 'macvlan' }), { kind: 'not-found', message: 'plugin "macvlan" not found' });
    await assert.rejects(fx.driver.create({ name: 'bad name' }), { kind: 'invalid-argument' });
    await assert.rejects(fx.driver.create({ name: 'ov', ipam: { config: [{ subnet: '10.213.64.128/25' }] } }), { kind: 'forbidden', message: /overlaps/ });
    await assert.rejects(fx.driver.create({ name: 'hb', ipam: { config: [{ subnet: '10.213.65.1/24' }] } }), { kind: 'invalid-argument' });
    assert.throws(() => fx.driver.get('nope'), { kind: 'not-found', message: 'network nope not found' });
  } finally {
    await fx.driver.remove('chk');
  }
  assert.throws(() => fx.driver.get('chk'), { kind: 'not-found' });
  assert.deepEqual((await fx.hostLinks()).filter((l) => l === n.bridgeName), []);
});

fx.test('remove refuses a network in use and leaves no rules, bridges or veths behind', async () => {
  const net = await fx.createNetwork({ name: 'busy' });
  const a = fx.containerId();
  const started = await fx.startContainer({ containerId: a, name: '/user', networks: [{ network: 'busy' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: 0 }] });
  await assert.rejects(fx.driver.remove('busy'), { kind: 'forbidden', message: /has active endpoints/ });
  const hostVeths = (await fx.hostLinks()).filter((l) => l !== net.bridgeName && !l.startsWith(`${fx.prefix}-`) && l !== `${fx.prefix}0`);
  assert.equal(hostVeths.length, 1);
  await fx.stopContainer(a);
  assert.ok(!(await mountPoints()).has(started.netnsPath));
  await fx.driver.remove('busy');
  assert.deepEqual(await fx.hostLinks(), [`${fx.prefix}0`], 'only the default bridge remains');
  const table = await runTool('nft', ['list', 'table', 'inet', fx.prefix]);
  assert.ok(!table.includes(net.id.slice(0, 12)), 'no chain of the network remains');
  assert.ok(!table.includes(net.bridgeName));
  assert.doesNotMatch(table, / \. tcp \. /, 'no port elements remain');
  assert.deepEqual(await fx.driver.prune(), []);
});

fx.test('allocations survive a daemon restart', async () => {
  await fx.createNetwork({ name: 'keep' });
  const a = fx.containerId();
  const started = await fx.startContainer({ containerId: a, name: '/survivor', networks: [{ network: 'keep' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: 0 }] });
  const ip = started.endpoints.keep!.ipAddress;
  await fx.driver.shutdown();

  fx.driver = fx.newDriver();
  await fx.driver.init();
  const again = fx.driver.containerNetworks(a);
  assert.equal(again.endpoints.keep!.ipAddress, ip);
  assert.deepEqual(again.ports, started.ports);
  const table = await runTool('nft', ['list', 'table', 'inet', fx.prefix]);
  assert.ok(table.includes(`${ip} . 80`), 'port rules rebuilt');
  const b = fx.containerId();
  const other = await fx.startContainer({ containerId: b, name: '/newcomer', networks: [{ network: 'keep' }] });
  assert.notEqual(other.endpoints.keep!.ipAddress, ip, 'no address handed out twice');
  await inNs(other.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', ip]);

  // A container whose namespace vanished while the daemon was down loses its allocation at init.
  await fx.driver.shutdown();
  await runTool('umount', [started.netnsPath]);
  fx.driver = fx.newDriver();
  await fx.driver.init();
  assert.deepEqual(fx.driver.containerNetworks(a), { endpoints: {}, ports: [] });
  await fx.driver.removeNetns(a);
  await fx.stopContainer(b);
  assert.deepEqual(await fx.driver.prune(), ['keep']);
});

fx.test('parallel daemons get their own subnets, devices and tables', async () => {
  const ours = await runTool('nft', ['list', 'table', 'inet', fx.prefix]);
  const others = await Promise.all([1, 2].map(async (i) => {
    const otherPrefix = `bo${randomBytes(3).toString('hex')}`;
    const otherDb = openDatabase(join(fx.root, `other-${i}.db`));
    const d = controllerOn(otherDb, { execRoot: join(fx.root, `other-${i}`), prefix: otherPrefix, hostResolvConf: join(fx.root, 'host-resolv.conf') });
    fx.cleanups.push(async () => {
      await d.destroy();
      otherDb.close();
    });
    return d;
  }));
  await Promise.all(others.map((d) => d.init()));
  const subnets = [fx.driver.get('bridge').subnet, ...others.map((d) => d.get('bridge').subnet)];
  assert.equal(new Set(subnets).size, 3, `distinct default subnets: ${subnets.join(' ')}`);
  assert.deepEqual(others.map((d) => d.get('bridge').bridgeName), others.map((d) => `${d.prefix}0`));
  for (const d of others) await d.destroy();
  assert.equal(await runTool('nft', ['list', 'table', 'inet', fx.prefix]), ours, 'our table is untouched');
  // Another process cannot start with our prefix while we run.
  const hostLock = new URL('../../network/host-lock.js', import.meta.url).href;
  await assert.rejects(
    runTool(process.execPath, ['--input-type=module', '-e', `import { claimPrefix } from '${hostLock}'; claimPrefix('${fx.prefix}');`]),
    /network prefix "[a-z0-9]+" is in use by another daemon/,
  );
});

/** A controller of its own (prefix, exec root, database, DNS port) whose host state is purged after the test. */
function ownController(tag: string, dnsPort: number): { d: NetworkController; p: string; execRoot: string } {
  const p = `${tag}${randomBytes(3).toString('hex')}`;
  const execRoot = join(fx.root, p);
  const pdb = openDatabase(join(fx.root, `${p}.db`));
  const d = controllerOn(pdb, { execRoot, prefix: p, hostResolvConf: join(fx.root, 'host-resolv.conf'), dnsPort });
  fx.cleanups.push(async () => {
    await purgeHostState({ prefix: p, execRoot });
    pdb.close();
  });
  return { d, p, execRoot };
}

/** Waits until aardvark-dns `pid` is gone (or a zombie). */
async function aardvarkGone(pid: number): Promise<void> {
  await retry(async () => {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => 'gone) Z');
    if (!/\) Z/.test(stat)) throw new Error('aardvark-dns still running');
  });
}

fx.test('purgeHostState removes what a stopped daemon left behind', async () => {
  const { d, p, execRoot } = ownController('bq', 5381);
  await d.init();
  await d.create({ name: 'left' });
  const id = randomBytes(32).toString('hex');
  const c = await d.setup({ containerId: id, name: '/still-running', networks: [{ network: 'left' }], dns: ['127.0.0.1'] });
  const pidText = await readFile(join(execRoot, 'network', 'dns', 'config', 'aardvark.pid'), 'utf8');
  await d.shutdown(); // the daemon stops; the container's network stays

  await purgeHostState({ prefix: p, execRoot });
  const links = (JSON.parse(await runTool('ip', ['-j', 'link', 'show'])) as { ifname: string }[]).filter((l) => l.ifname.startsWith(p));
  assert.deepEqual(links, []);
  assert.doesNotMatch(await runTool('nft', ['list', 'tables']), new RegExp(` ${p}\\n`));
  assert.deepEqual([...(await mountPoints())].filter((m) => m.startsWith(execRoot)), []);
  assert.ok(!(await mountPoints()).has(c.netnsPath));
  await assert.rejects(readFile(prefixClaimPath(p)), { code: 'ENOENT' });
  await aardvarkGone(Number(pidText));
});

fx.test('a new DNS-enabled network has its DNS server serving before any container joins; it goes with the network', async () => {
  const { d, execRoot } = ownController('bd', 5382);
  fx.cleanups.push(() => d.shutdown());
  await d.init();
  const n = await d.create({ name: 'ahead' });
  const config = join(execRoot, 'network', 'dns', 'config');
  // Made in the background of the create: the network's file (its gateway, no records) and a live server.
  const pid = await retry(async () => {
    assert.equal(await readFile(join(config, n.id), 'utf8'), `${n.gateway}\n`);
    const pidNumber = Number(await readFile(join(config, 'aardvark.pid'), 'utf8'));
    assert.match(await readFile(`/proc/${pidNumber}/cmdline`, 'utf8'), /aardvark-dns/);
    return pidNumber;
  });
  // A container joining gets its name added to that file, answered by the same server.
  const id = randomBytes(32).toString('hex');
  await d.setup({ containerId: id, name: '/early', networks: [{ network: 'ahead' }], dns: ['127.0.0.1'] });
  assert.match(await readFile(join(config, n.id), 'utf8'), new RegExp(`^${id} \\S+ +early,`, 'm'));
  assert.equal(Number(await readFile(join(config, 'aardvark.pid'), 'utf8')), pid);
  await d.detach(id);
  await d.removeNetns(id);
  await d.remove('ahead');
  await assert.rejects(readFile(join(config, n.id)), { code: 'ENOENT' });
  await aardvarkGone(pid);
});

fx.test('a bridge device of the prefix left on the host is taken over: its old addresses go, the network gets its gateway', async () => {
  const { d, p } = ownController('bl', 5383);
  fx.cleanups.push(() => d.shutdown());
  await runTool('ip', ['link', 'add', 'name', `${p}0`, 'type', 'bridge']);
  await runTool('ip', ['addr', 'add', '10.251.77.1/24', 'dev', `${p}0`]);
  await d.init();
  const gateway = d.get('bridge').gateway;
  const [link] = JSON.parse(await runTool('ip', ['-j', 'addr', 'show', 'dev', `${p}0`])) as { operstate: string; flags: string[]; addr_info: { family: string; local: string }[] }[];
  assert.deepEqual(link!.addr_info.filter((a) => a.family === 'inet').map((a) => a.local), [gateway]);
  assert.ok(link!.flags.includes('UP'), link!.flags.join(','));
});

fx.test('at start an aardvark-dns of the daemon that its pid file does not name is stopped (it would hold the addresses)', async () => {
  const { d, execRoot } = ownController('bs', 5384);
  fx.cleanups.push(() => d.shutdown());
  const config = join(execRoot, 'network', 'dns', 'config');
  await mkdir(config, { recursive: true });
  await writeFile(join(config, 'stray-net'), '127.0.0.1\n');
  await runTool('/usr/lib/podman/aardvark-dns', ['--config', config, '-p', '5384', 'run']);
  const stray = Number(await readFile(join(config, 'aardvark.pid'), 'utf8'));
  await rm(join(config, 'aardvark.pid'));
  assert.match(await readFile(`/proc/${stray}/cmdline`, 'utf8'), /aardvark-dns/);
  fx.cleanups.push(async () => void (await readFile(`/proc/${stray}/stat`, 'utf8').then(() => process.kill(stray, 'SIGKILL'), () => undefined)));
  await d.init();
  await aardvarkGone(stray);
});

fx.test("a dead daemon's aardvark-dns still bound to an address that is now this daemon's gateway is stopped, and names resolve", async () => {
  // A daemon that is gone: its DNS server stays bound to its network's gateway, and its bridge goes
  // (as another daemon's stray-device sweep removes it).
  const gone = ownController('bg', 5385);
  await gone.d.init();
  const old = await gone.d.create({ name: 'oldnet', ipam: { config: [{ subnet: '10.213.90.0/24' }] } });
  const oldServer = await retry(async () => {
    const pid = Number(await readFile(join(gone.execRoot, 'network', 'dns', 'config', 'aardvark.pid'), 'utf8'));
    assert.match(await runTool('ss', ['-ulpnH', 'sport = :5385']), new RegExp(`10\\.213\\.90\\.1:5385.*pid=${pid}`));
    return pid;
  });
  await gone.d.shutdown();
  await runTool('ip', ['link', 'del', old.bridgeName]);

  const now = ownController('bn', 5385);
  fx.cleanups.push(() => now.d.shutdown());
  await now.d.init();
  await now.d.create({ name: 'newnet', ipam: { config: [{ subnet: '10.213.90.0/24' }] } });
  const a = await now.d.setup({ containerId: fx.containerId(), name: '/alpha', networks: [{ network: 'newnet' }], dns: ['127.0.0.1'] });
  const b = await now.d.setup({ containerId: fx.containerId(), name: '/beta', networks: [{ network: 'newnet' }], dns: ['127.0.0.1'] });
  fx.cleanups.push(async () => {
    for (const id of [a, b].map((x) => x.netnsPath.split('/').pop()!)) {
      await now.d.detach(id).catch(() => {});
      await now.d.removeNetns(id).catch(() => {});
    }
  });
  await aardvarkGone(oldServer);
  const out = await inNs(b.netnsPath, ['busybox', 'nslookup', 'alpha', '127.0.0.11']);
  assert.match(out, new RegExp(`Address:\\s+${a.endpoints.newnet!.ipAddress.replace(/\./g, '\\.')}`));
});
