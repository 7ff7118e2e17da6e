/**
 * The network controller and its bridge driver against the real kernel, containers' endpoints:
 * namespaces, veths, nftables, aardvark-dns and busybox inside the namespaces; name resolution,
 * published ports, veths draining, connect and disconnect, namespaces made ahead, IPv6 and parallel
 * starts. Networks themselves are in network-controller.test.ts; the fixture in
 * test/fixtures/network-controller.ts. Traffic stays on 127.0.0.0/8 and the test networks
 * (aardvark forwards unknown names to 127.0.0.1, where nothing listens).
 */
import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { createSocket } from 'node:dgram';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { macForIPv4 } from '../../network/mac.js';
import { parseAddress } from '../../network/cidr.js';
import { runTool } from '../../network/run-tool.js';
import { httpGet, inNs, NetFixture, nsLinks, retry } from '../../../test/fixtures/network-controller.js';

const fx = new NetFixture();
fx.register();

fx.test('containers on a user network reach each other and resolve names, aliases and short ids', async () => {
  const net = await fx.createNetwork({ name: 'app' });
  const a = fx.containerId();
  const b = fx.containerId();
  const ca = await fx.startContainer({ containerId: a, name: '/web', networks: [{ network: 'app', aliases: ['frontend'] }], dns: ['127.0.0.1'] });
  const cb = await fx.startContainer({ containerId: b, name: '/db', networks: [{ network: 'app', aliases: ['database'] }], dns: ['127.0.0.1'] }, false);
  const ipA = ca.endpoints.app!.ipAddress;
  const ipB = cb.endpoints.app!.ipAddress;
  assert.notEqual(ipA, ipB);
  assert.equal(ca.endpoints.app!.gateway, net.gateway);
  assert.deepEqual(ca.endpoints.app!.dnsNames, ['web', 'frontend', a.slice(0, 12)]);
  assert.equal(ca.endpoints.app!.ifName, 'eth0');

  await inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', ipB]);
  await fx.driver.renameContainer(b, '/db-renamed');
  assert.match(await retry(() => inNs(ca.netnsPath, ['busybox', 'nslookup', 'db-renamed', '127.0.0.11'])), new RegExp(`Address:\\s+${ipB.replace(/\./g, '\\.')}`));
  await fx.driver.renameContainer(b, '/db');
  for (const name of ['db', 'database', b.slice(0, 12), 'DB']) {
    const out = await retry(() => inNs(ca.netnsPath, ['busybox', 'nslookup', name, '127.0.0.11']));
    assert.match(out, new RegExp(`Address:\\s+${ipB.replace(/\./g, '\\.')}`), name);
  }
  // Through the resolv.conf the engine would write: ping by name.
  const rc = join(fx.root, 'resolv-app.conf');
  await writeFile(rc, await fx.driver.resolvConf(['app']));
  assert.match(await readFile(rc, 'utf8'), /^nameserver 127\.0\.0\.11$/m);
  const ping = await inNs(cb.netnsPath, ['unshare', '-m', 'sh', '-c', `mount --bind ${rc} /etc/resolv.conf && busybox ping -c 1 -W 2 web`]);
  assert.match(ping, new RegExp(`PING web \\(${ipA.replace(/\./g, '\\.')}\\)`));

  // route_localnet (needed for 127.0.0.11) exposes nothing bound to loopback on the host: a container
  // that routes 127.0.0.2 to the gateway itself gets nowhere.
  const hostOnly = createServer((sock) => sock.end('host secret\n'));
  fx.servers.push(hostOnly);
  await new Promise<void>((resolve) => hostOnly.listen({ host: '127.0.0.2', port: 0 }, resolve));
  const secretPort = (hostOnly.address() as { port: number }).port;
  await inNs(ca.netnsPath, ['ip', 'route', 'add', '127.0.0.2/32', 'via', net.gateway, 'dev', 'eth0', 'src', ipA, 'table', 'local']);
  await assert.rejects(inNs(ca.netnsPath, ['timeout', '3', 'busybox', 'nc', '127.0.0.2', String(secretPort)]));
  await inNs(ca.netnsPath, ['ip', 'route', 'del', '127.0.0.2/32', 'table', 'local']);
  // Nor in a neighbour: db cannot reach a server web binds to 127.0.0.2.
  const www = join(fx.root, 'www-loopback');
  await mkdir(www, { recursive: true });
  await writeFile(join(www, 'index.html'), 'loopback only\n');
  fx.spawnInNs(ca.netnsPath, ['busybox', 'httpd', '-f', '-p', '127.0.0.2:8088', '-h', www]);
  const local = await retry(() => inNs(ca.netnsPath, ['timeout', '3', 'busybox', 'wget', '-q', '-O', '-', 'http://127.0.0.2:8088/index.html']));
  assert.equal(local, 'loopback only\n');
  await inNs(cb.netnsPath, ['ip', 'route', 'add', '127.0.0.2/32', 'via', ipA, 'dev', 'eth0', 'src', ipB, 'table', 'local']);
  await assert.rejects(inNs(cb.netnsPath, ['timeout', '3', 'busybox', 'wget', '-q', '-O', '-', 'http://127.0.0.2:8088/index.html']));
  await inNs(cb.netnsPath, ['ip', 'route', 'del', '127.0.0.2/32', 'table', 'local']);

  // The default bridge has no name resolution.
  const c = fx.containerId();
  const cc = await fx.startContainer({ containerId: c, name: '/plain', networks: [{ network: 'bridge' }] });
  const bridge = fx.driver.get('bridge');
  assert.match(await fx.driver.resolvConf(['bridge']), /^nameserver 8\.8\.8\.8$/m, 'loopback host servers are dropped');
  await assert.rejects(inNs(cc.netnsPath, ['timeout', '3', 'busybox', 'nslookup', 'web', '127.0.0.11']));
  assert.ok(bridge.gateway);
  // Networks are isolated from each other.
  await assert.rejects(inNs(cc.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '1', ipA]));

  await fx.stopContainer(a);
  await fx.stopContainer(b);
  await fx.stopContainer(c);
  await fx.driver.remove('app');
});

fx.test('a published port answers on 127.0.0.1 (TCP and UDP), a random port when 0', async () => {
  const a = fx.containerId();
  const www = join(fx.root, 'www');
  await rm(www, { recursive: true, force: true });
  await mkdir(www);
  await writeFile(join(www, 'index.html'), 'hello from the container\n');
  const started = await fx.startContainer({
    containerId: a,
    name: '/httpd',
    networks: [{ network: 'bridge' }],
    ports: [
      { containerPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: 0 },
      { containerPort: 80, protocol: 'tcp', hostIp: '', hostPort: 0 },
      { containerPort: 5000, protocol: 'udp', hostIp: '127.0.0.1', hostPort: 0 },
    ],
  });
  assert.equal(started.ports.length, 3);
  const [local, any, udp] = started.ports;
  assert.equal(local!.hostIp, '127.0.0.1');
  assert.equal(any!.hostIp, '0.0.0.0');
  assert.ok(local!.hostPort > 0 && any!.hostPort > 0 && local!.hostPort !== any!.hostPort);
  assert.deepEqual(fx.driver.containerNetworks(a).ports, started.ports);

  fx.spawnInNs(started.netnsPath, ['busybox', 'httpd', '-f', '-p', '80', '-h', www]);
  assert.equal(await retry(() => httpGet(local!.hostPort)), 'hello from the container\n');
  assert.equal(await retry(() => httpGet(any!.hostPort)), 'hello from the container\n', '0.0.0.0 binding reached from loopback');

  // busybox nc has no UDP: a two-line node UDP listener inside the namespace.
  const listener = "require('dgram').createSocket('udp4').on('message', (m) => process.stdout.write(m)).bind(5000)";
  // Hairpin: the container reaches its own published port through the gateway, and so does a neighbour.
  const bridge = fx.driver.get('bridge');
  const url = `http://${bridge.gateway}:${any!.hostPort}/index.html`;
  assert.equal(await inNs(started.netnsPath, ['timeout', '5', 'busybox', 'wget', '-q', '-O', '-', url]), 'hello from the container\n');
  const n = fx.containerId();
  const neighbour = await fx.startContainer({ containerId: n, name: '/neighbour', networks: [{ network: 'bridge' }] });
  assert.equal(await inNs(neighbour.netnsPath, ['timeout', '5', 'busybox', 'wget', '-q', '-O', '-', url]), 'hello from the container\n');

  const nc = fx.spawnInNs(started.netnsPath, [process.execPath, '-e', listener], 'pipe');
  let received = '';
  nc.stdout!.on('data', (d: Buffer) => (received += d.toString()));
  const sock = createSocket('udp4');
  try {
    await retry(async () => {
      sock.send('ping over udp\n', udp!.hostPort, '127.0.0.1');
      await sleep(100);
      if (!received.includes('ping over udp')) throw new Error('nothing received yet');
    });
  } finally {
    sock.close();
  }

  await fx.stopContainer(a);
  const table = await runTool('nft', ['list', 'table', 'inet', fx.prefix]);
  assert.ok(!table.includes(String(local!.hostPort)), 'port rules removed with the container');
  await assert.rejects(httpGet(local!.hostPort));
});

fx.test('a host port that is taken fails clearly and leaves nothing behind', async () => {
  const holder = createServer();
  fx.servers.push(holder);
  await new Promise<void>((resolve) => holder.listen({ host: '127.0.0.1', port: 0 }, resolve));
  const port = (holder.address() as { port: number }).port;
  const before = await fx.hostLinks();
  const a = fx.containerId();
  await assert.rejects(
    fx.startContainer({ containerId: a, name: '/clash', networks: [{ network: 'bridge' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: port }] }),
    { kind: 'conflict', message: `failed to bind host port 127.0.0.1:${port}/tcp: address already in use` },
  );
  assert.deepEqual(fx.driver.containerNetworks(a), { endpoints: {}, ports: [] });
  assert.deepEqual(await fx.hostLinks(), before);

  // A port another container publishes is refused before touching the host.
  const b = fx.containerId();
  const got = await fx.startContainer({ containerId: b, name: '/first', networks: [{ network: 'bridge' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '', hostPort: 0 }] });
  const taken = got.ports[0]!.hostPort;
  const c = fx.containerId();
  const netnsC = await fx.driver.createNetns(c);
  await assert.rejects(
    fx.driver.attach({ containerId: c, name: '/second', netnsPath: netnsC, networks: [{ network: 'bridge' }], ports: [{ containerPort: 81, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: taken }] }),
    { kind: 'conflict', message: `Bind for 127.0.0.1:${taken} failed: port is already allocated` },
  );
  assert.deepEqual((await nsLinks(netnsC)).map((l) => l.ifname), ['lo'], 'no interface added');
  await fx.driver.removeNetns(c);
  await fx.stopContainer(b);
  assert.deepEqual(await fx.hostLinks(), before);
});

fx.test('a released veth goes with its namespace; its address stays taken until then, unless asked for', async () => {
  // Not network-controller.test.ts's 10.213.70.0/24: the two files may run at once.
  const net = await fx.createNetwork({ name: 'drain', ipam: { config: [{ subnet: '10.213.71.0/24' }] } });
  const veths = async () => (await fx.hostLinks()).filter((l) => l !== net.bridgeName && l !== `${fx.prefix}0`);
  const a = fx.containerId();
  const first = await fx.startContainer({ containerId: a, name: '/first', networks: [{ network: 'drain' }] });
  assert.equal(first.endpoints.drain!.ipAddress, '10.213.71.2');
  const veth = await veths();
  assert.equal(veth.length, 1);
  await fx.driver.detach(a);
  // Namespace still mounted: the device stays and so does its address.
  assert.deepEqual(await veths(), veth);
  const b = fx.containerId();
  const second = await fx.startContainer({ containerId: b, name: '/second', networks: [{ network: 'drain' }] });
  assert.equal(second.endpoints.drain!.ipAddress, '10.213.71.3', 'a draining address is not handed out');
  await fx.driver.removeNetns(a);
  await fx.driver.settled();
  assert.equal((await veths()).length, 1, 'only the second container\'s veth is left');
  const c = fx.containerId();
  const third = await fx.startContainer({ containerId: c, name: '/third', networks: [{ network: 'drain' }] });
  assert.equal(third.endpoints.drain!.ipAddress, '10.213.71.2', 'free again once the device is gone');

  // A static address whose holder is still draining is taken back at once.
  await fx.driver.detach(b);
  const d = fx.containerId();
  const fourth = await fx.startContainer({ containerId: d, name: '/fourth', networks: [{ network: 'drain', ipv4: '10.213.71.3' }] });
  assert.equal(fourth.endpoints.drain!.ipAddress, '10.213.71.3');
  await inNs(fourth.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', third.endpoints.drain!.ipAddress]);
  await fx.driver.removeNetns(b);
  await fx.stopContainer(c);
  await fx.stopContainer(d);
  assert.deepEqual(await veths(), []);
});

fx.test('connect and disconnect a running container', async () => {
  await fx.createNetwork({ name: 'front' });
  await fx.createNetwork({ name: 'back', internal: true });
  const a = fx.containerId();
  const b = fx.containerId();
  const ca = await fx.startContainer({ containerId: a, name: '/api', networks: [{ network: 'front' }], dns: ['127.0.0.1'] });
  const cb = await fx.startContainer({ containerId: b, name: '/store', networks: [{ network: 'back' }], dns: ['127.0.0.1'] });
  const routesB = await inNs(cb.netnsPath, ['ip', '-j', 'route', 'show', 'default']);
  assert.deepEqual(JSON.parse(routesB), [], 'an internal network gives no default route');
  await assert.rejects(inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '1', cb.endpoints.back!.ipAddress]));

  const ep = await fx.driver.connect({ containerId: a, name: '/api', netnsPath: ca.netnsPath, network: 'back', aliases: ['api-internal'] });
  assert.equal(ep.ifName, 'eth1');
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth0', 'eth1', 'lo']);
  await inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', cb.endpoints.back!.ipAddress]);
  const out = await retry(() => inNs(cb.netnsPath, ['busybox', 'nslookup', 'api-internal', '127.0.0.11']));
  assert.match(out, new RegExp(`Address:\\s+${ep.ipAddress.replace(/\./g, '\\.')}`));
  await assert.rejects(fx.driver.connect({ containerId: a, name: '/api', netnsPath: ca.netnsPath, network: 'back' }), { kind: 'forbidden' });
  const routesA = JSON.parse(await inNs(ca.netnsPath, ['ip', '-j', 'route', 'show', 'default'])) as { dev: string }[];
  assert.equal(routesA[0]!.dev, 'eth0', 'the default route stays on the first network');

  await fx.driver.disconnect(a, 'back');
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth0', 'lo']);
  await assert.rejects(fx.driver.disconnect(a, 'back'), { kind: 'forbidden' });
  assert.deepEqual(Object.keys(fx.driver.containerNetworks(a).endpoints), ['front']);

  // Leaving the network that carried the default route and DNS: names still resolve through the other.
  await fx.driver.connect({ containerId: a, name: '/api', netnsPath: ca.netnsPath, network: 'back' });
  await fx.driver.disconnect(a, 'front');
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth1', 'lo']);
  assert.deepEqual(JSON.parse(await inNs(ca.netnsPath, ['ip', '-j', 'route', 'show', 'default'])), []);
  const viaBack = await retry(() => inNs(ca.netnsPath, ['busybox', 'nslookup', 'store', '127.0.0.11']));
  assert.match(viaBack, new RegExp(`Address:\\s+${cb.endpoints.back!.ipAddress.replace(/\./g, '\\.')}`));
  const again = await fx.driver.connect({ containerId: a, name: '/api', netnsPath: ca.netnsPath, network: 'front' });
  assert.equal(again.ifName, 'eth0');
  const routesAgain = JSON.parse(await inNs(ca.netnsPath, ['ip', '-j', 'route', 'show', 'default'])) as { dev: string }[];
  assert.equal(routesAgain[0]!.dev, 'eth0', 'a non-internal network brings the default route back');

  await fx.stopContainer(a);
  await fx.stopContainer(b);
  await fx.driver.remove('front');
  await fx.driver.remove('back');
});

fx.test('namespaces made ahead: taken by a start, topped up, dropped at shutdown, kept when taken', async () => {
  await fx.driver.shutdown();
  fx.driver = fx.newDriver(2);
  await fx.driver.init();
  await fx.driver.settled();
  const netnsDir = join(fx.root, 'exec', 'network', 'netns');
  const readyFiles = async () => (await readdir(netnsDir)).filter((f) => f.startsWith('ready-')).sort();
  const made = await readyFiles();
  assert.equal(made.length, 4, 'two on the default bridge, two with only loopback');
  const bridge = fx.driver.get('bridge');

  const a = fx.containerId();
  const ca = await fx.startContainer({ containerId: a, name: '/ahead', networks: [{ network: 'bridge' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: 0 }] });
  assert.equal(ca.netnsPath, join(netnsDir, a));
  assert.ok(made.includes(await readlink(ca.netnsPath)), 'the container path links to a namespace made ahead');
  const ep = ca.endpoints.bridge!;
  assert.equal(ep.macAddress, macForIPv4(parseAddress(ep.ipAddress)!));
  const links = await nsLinks(ca.netnsPath);
  assert.deepEqual(links.map((l) => l.ifname), ['lo', 'eth0']);
  assert.ok(links[1]!.addr_info.some((x) => x.local === ep.ipAddress));
  const routes = JSON.parse(await inNs(ca.netnsPath, ['ip', '-j', 'route', 'show', 'default'])) as { gateway: string; dev: string }[];
  assert.deepEqual(routes.map((r) => [r.gateway, r.dev]), [[bridge.gateway, 'eth0']]);
  await inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', bridge.gateway]);
  const table = await runTool('nft', ['list', 'table', 'inet', fx.prefix]);
  assert.ok(table.includes(`${ep.ipAddress} . 80`), 'published port points at the address made ahead');
  // connect/disconnect work through the container's link.
  await fx.createNetwork({ name: 'extra' });
  const extra = await fx.driver.connect({ containerId: a, name: '/ahead', netnsPath: ca.netnsPath, network: 'extra' });
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth0', 'eth1', 'lo']);
  await inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', fx.driver.get('extra').gateway]);
  assert.equal(extra.ifName, 'eth1');
  await fx.driver.disconnect(a, 'extra');
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth0', 'lo']);
  await fx.driver.remove('extra');

  const n = fx.containerId();
  const cn = await fx.startContainer({ containerId: n, name: '/nothing', networks: [{ network: 'none' }] });
  assert.ok(made.includes(await readlink(cn.netnsPath)));
  assert.deepEqual((await nsLinks(cn.netnsPath)).map((l) => l.ifname), ['lo']);

  // A static MAC cannot use one addressed ahead: it takes one with only loopback, its interface put in
  // at the start.
  const m = fx.containerId();
  const cm = await fx.startContainer({ containerId: m, name: '/mac', networks: [{ network: 'bridge', mac: '02:42:00:00:00:42' }] });
  assert.ok(made.includes(await readlink(cm.netnsPath)));
  assert.equal(cm.endpoints.bridge!.macAddress, '02:42:00:00:00:42');
  assert.deepEqual((await nsLinks(cm.netnsPath)).map((l) => l.ifname), ['lo', 'eth0']);
  assert.equal((JSON.parse(await inNs(cm.netnsPath, ['ip', '-j', 'link', 'show', 'eth0'])) as { address: string }[])[0]!.address, '02:42:00:00:00:42');
  await inNs(cm.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', ep.ipAddress]);

  await fx.driver.settled();
  assert.equal((await readyFiles()).length, 4, 'not topped up before the engine says the containers started');
  fx.driver.replenish();
  await fx.driver.settled();
  assert.equal((await readyFiles()).length, 7, 'topped up: four ready, three taken');

  // A restart drops what nobody took and keeps what containers use.
  await fx.driver.shutdown();
  assert.deepEqual((await readyFiles()).sort(), [await readlink(ca.netnsPath), await readlink(cn.netnsPath), await readlink(cm.netnsPath)].sort());
  fx.driver = fx.newDriver(2);
  await fx.driver.init();
  assert.equal(fx.driver.containerNetworks(a).endpoints.bridge!.ipAddress, ep.ipAddress);
  await fx.stopContainer(a);
  await fx.stopContainer(n);
  await fx.stopContainer(m);
  await assert.rejects(readlink(ca.netnsPath), { code: 'ENOENT' });
  assert.deepEqual((await readyFiles()).length, 4, 'the taken ones are gone, the ready ones stay');
  await fx.driver.shutdown();
  assert.deepEqual(await readyFiles(), []);
  assert.deepEqual(await fx.hostLinks(), [`${fx.prefix}0`], 'no veth left');
  fx.driver = fx.newDriver();
  await fx.driver.init();
});

fx.test('IPv6: addresses from a unique-local subnet, reachable, and AAAA records', async () => {
  const net = await fx.createNetwork({ name: 'six', enableIPv6: true });
  assert.match(net.subnet6 ?? '', /^fd[0-9a-f]{2}:[0-9a-f:]+\/64$/);
  const a = fx.containerId();
  const b = fx.containerId();
  const ca = await fx.startContainer({ containerId: a, name: '/alpha', networks: [{ network: 'six' }], dns: ['127.0.0.1'] });
  const cb = await fx.startContainer({ containerId: b, name: '/beta', networks: [{ network: 'six' }], dns: ['127.0.0.1'] });
  const ip6 = cb.endpoints.six!.ipv6Address;
  assert.ok(ip6.startsWith(net.subnet6!.split('::')[0]!));
  assert.equal(ca.endpoints.six!.ipv6Gateway, net.gateway6);
  await inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', ip6]);
  const out = await retry(() => inNs(ca.netnsPath, ['busybox', 'nslookup', '-type=AAAA', 'beta', '127.0.0.11']));
  assert.ok(out.includes(ip6), out);
});

fx.test('parallel starts get distinct addresses and ports', async () => {
  await fx.createNetwork({ name: 'crowd' });
  const ids8 = Array.from({ length: 8 }, () => fx.containerId());
  const results = await Promise.all(ids8.map((id, i) => fx.startContainer({
    containerId: id,
    name: `/crowd${i}`,
    networks: [{ network: i % 2 ? 'crowd' : 'bridge' }],
    ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '', hostPort: 0 }],
  })));
  const addrs = results.map((r) => Object.values(r.endpoints)[0]!.ipAddress);
  const hostPorts = results.map((r) => r.ports[0]!.hostPort);
  assert.equal(new Set(addrs).size, 8, addrs.join(' '));
  assert.equal(new Set(hostPorts).size, 8, hostPorts.join(' '));
  await Promise.all(ids8.map((id) => fx.stopContainer(id)));
  assert.deepEqual(ids8.map((id) => fx.driver.containerNetworks(id)), ids8.map(() => ({ endpoints: {}, ports: [] })));
});

fx.test('containers starting together on a new network, and one after another, resolve each other at once: no reload of the DNS server is lost', async () => {
  await fx.createNetwork({ name: 'burst' });
  // As compose starts them: together, right after the network's create (its DNS server starting).
  const together = await Promise.all([0, 1, 2, 3].map((i) => fx.startContainer({ containerId: fx.containerId(), name: `/t${i}`, networks: [{ network: 'burst' }], dns: ['127.0.0.1'] })));
  const joined = together.map((c, i) => ({ name: `t${i}`, ip: c.endpoints.burst!.ipAddress }));
  for (let i = 0; i < 4; i++) {
    const c = await fx.startContainer({ containerId: fx.containerId(), name: `/b${i}`, networks: [{ network: 'burst' }], dns: ['127.0.0.1'] });
    // No retry: the attach has finished only once the server answers the names it just wrote.
    for (const earlier of joined) {
      const out = await inNs(c.netnsPath, ['busybox', 'nslookup', earlier.name, '127.0.0.11']);
      assert.match(out, new RegExp(`Address:\\s+${earlier.ip.replace(/\./g, '\\.')}`), `b${i} resolving ${earlier.name}`);
    }
    joined.push({ name: `b${i}`, ip: c.endpoints.burst!.ipAddress });
  }
});
