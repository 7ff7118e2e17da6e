/**
 * The network controller and its bridge driver against the real kernel: namespaces, bridges, veths, nftables, aardvark-dns and
 * busybox inside the namespaces. Every device and the nft table carry a per-run prefix; traffic stays on
 * 127.0.0.0/8 and the test networks (aardvark forwards unknown names to 127.0.0.1, where nothing listens).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { createSocket } from 'node:dgram';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openDatabase, type Db } from '../../state/db.js';
import { NetworkRecords } from '../../state/network-records.js';
import { BridgeDriver, type BridgeDriverOptions } from '../../network/bridge-driver.js';
import { NetworkController, type AttachSpec, type NetworkControllerOptions } from './network-controller.js';
import { mountPoints } from '../../network/netns.js';
import { macForIPv4 } from '../../network/mac.js';
import { parseAddress } from '../../network/cidr.js';
import { purgeHostState } from '../../network/purge-host-state.js';
import { prefixClaimPath } from '../../network/host-lock.js';
import { runTool } from '../../network/run-tool.js';

const prefix = `bt${randomBytes(3).toString('hex')}`;
let root = '';
let db: Db;
let driver: NetworkController;
const processes: ChildProcess[] = [];
const servers: Server[] = [];
const ids: string[] = [];

function containerId(): string {
  const id = randomBytes(32).toString('hex');
  ids.push(id);
  return id;
}

function newDriver(readyNamespaces = 0): NetworkController {
  return controllerOn(db, {
    execRoot: join(root, 'exec'),
    prefix,
    hostResolvConf: join(root, 'host-resolv.conf'),
    dnsPort: 5380, // containers still ask 127.0.0.11:53
  }, { readyNamespaces, bridgeHooks: [recordingHooks] });
}

/** What the bridge hooks saw: `<event> <network> <whether its bridge device existed then>`. */
const hookCalls: string[] = [];
let failNextCreatedHook = false;
const recordingHooks = {
  async created(n: { name: string; bridgeName: string }) {
    hookCalls.push(`created ${n.name} ${(await hostLinks()).includes(n.bridgeName)}`);
    if (failNextCreatedHook) {
      failNextCreatedHook = false;
      throw new Error('hook refused');
    }
  },
  async deleting(n: { name: string; bridgeName: string }) {
    hookCalls.push(`deleting ${n.name} ${(await hostLinks()).includes(n.bridgeName)}`);
  },
};

/** The controller over its records in `db` and a bridge driver, as main.ts wires them. */
function controllerOn(db: Db, driver: BridgeDriverOptions, opts: Partial<NetworkControllerOptions> = {}): NetworkController {
  return new NetworkController({ records: new NetworkRecords(db), driver: new BridgeDriver(driver), ...opts });
}

/** Runs a command inside a namespace file. */
function inNs(netns: string, args: string[]): Promise<string> {
  return runTool('nsenter', [`--net=${netns}`, ...args]);
}

/** A long-running process inside a namespace, stopped (by pid) in after(). */
function spawnInNs(netns: string, args: string[], stdout: 'ignore' | 'pipe' = 'ignore'): ChildProcess {
  const p = spawn('nsenter', [`--net=${netns}`, ...args], { stdio: ['ignore', stdout, 'ignore'] });
  processes.push(p);
  cleanups.push(async () => {
    if (p.exitCode === null && p.signalCode === null && p.pid) process.kill(p.pid, 'SIGKILL');
  });
  return p;
}

async function hostLinks(): Promise<string[]> {
  const links = JSON.parse(await runTool('ip', ['-j', 'link', 'show'])) as { ifname: string }[];
  return links.map((l) => l.ifname).filter((n) => n.startsWith(prefix));
}

async function nsLinks(netns: string): Promise<{ ifname: string; addr_info: { local: string }[] }[]> {
  return JSON.parse(await inNs(netns, ['ip', '-j', 'addr', 'show']));
}

function httpGet(port: number, host = '127.0.0.1'): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path: '/index.html', timeout: 3000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

async function retry<T>(fn: () => Promise<T>, ms = 3000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(50);
    }
  }
}

/** What the running test created, undone in reverse order when it ends, whether it passed or not. */
let cleanups: (() => Promise<unknown>)[] = [];

function netTest(name: string, fn: () => Promise<void>): void {
  test(name, async () => {
    cleanups = [];
    try {
      await fn();
    } finally {
      for (const undo of cleanups.reverse()) await undo().catch(() => {});
    }
  });
}

async function startContainer(spec: Omit<AttachSpec, 'netnsPath'>, fast = true) {
  cleanups.push(() => stopContainer(spec.containerId));
  if (fast) return driver.setup(spec);
  const netnsPath = await driver.createNetns(spec.containerId);
  return { ...(await driver.attach({ ...spec, netnsPath })), netnsPath };
}

async function createNetwork(spec: Parameters<NetworkController['create']>[0]) {
  const n = await driver.create(spec);
  cleanups.push(() => driver.remove(n.id));
  return n;
}

async function stopContainer(id: string): Promise<void> {
  await driver.detach(id);
  await driver.removeNetns(id);
  // The host ends of the veths go with the namespace, in the background.
  await driver.settled();
}

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'berth-net-'));
  await writeFile(join(root, 'host-resolv.conf'), 'nameserver 127.0.0.1\n');
  db = openDatabase(join(root, 'berth.db'));
  driver = newDriver();
  await driver.init();
});

after(async () => {
  for (const p of processes) {
    try {
      if (p.pid && p.exitCode === null && p.signalCode === null) process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const s of servers) s.close();
  let destroyError: unknown = null;
  try {
    await (driver as NetworkController | undefined)?.destroy();
  } catch (err) {
    destroyError = err;
  }
  (db as Db | undefined)?.close();
  // Namespaces are freed by the kernel asynchronously, and their veths with them.
  const leftLinks = await retry(async () => {
    const l = await hostLinks();
    if (l.length) throw new Error(`left: ${l.join(' ')}`);
    return l;
  }).catch(() => hostLinks());
  const tables = await runTool('nft', ['list', 'tables']);
  const mounts = [...(await mountPoints())].filter((m) => m.startsWith(root));
  if (mounts.length === 0) await rm(root, { recursive: true, force: true });
  assert.equal(destroyError, null, 'destroy succeeded');
  assert.deepEqual(leftLinks, [], 'no bridges or veths left');
  assert.ok(!tables.includes(` ${prefix}\n`), `no nft table left: ${tables}`);
  assert.deepEqual(mounts, [], 'no namespace mounts left');
});

netTest('predefined networks: bridge on its own device and a free subnet, host, none', async () => {
  const names = driver.list().map((n) => `${n.name}/${n.driver}`);
  assert.deepEqual(names.sort(), ['bridge/bridge', 'host/host', 'none/null']);
  const bridge = driver.get('bridge');
  assert.equal(bridge.bridgeName, `${prefix}0`);
  assert.match(bridge.subnet, /^(172\.(1[7-9]|2\d|3[01])\.0\.0\/16|192\.168\.\d+\.0\/20)$/);
  assert.equal(bridge.dnsEnabled, false);
  const addrs = JSON.parse(await runTool('ip', ['-j', 'addr', 'show', 'dev', bridge.bridgeName])) as { addr_info: { local: string }[] }[];
  assert.ok(addrs[0]!.addr_info.some((a) => a.local === bridge.gateway));
  // No other route on the host overlaps it.
  const routes = JSON.parse(await runTool('ip', ['-j', 'route', 'show'])) as { dst: string; dev: string }[];
  const clash = routes.filter((r) => r.dst === bridge.subnet && r.dev !== bridge.bridgeName);
  assert.deepEqual(clash, []);
  assert.equal(driver.get(bridge.id.slice(0, 6)).name, 'bridge', 'by id prefix');
  await assert.rejects(driver.remove('bridge'), { kind: 'forbidden', message: /pre-defined network/ });

  // host: no namespace of its own; none: a namespace with only loopback; neither mixes with others.
  const h = containerId();
  assert.deepEqual(await driver.setup({ containerId: h, name: '/h', networks: [{ network: 'host' }] }), { endpoints: {}, ports: [], netnsPath: '' });
  const n = containerId();
  const none = await startContainer({ containerId: n, name: '/n', networks: [{ network: 'none' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '', hostPort: 0 }] });
  assert.deepEqual(none.ports, []);
  const links = await nsLinks(none.netnsPath);
  assert.deepEqual(links.map((l) => l.ifname), ['lo']);
  assert.deepEqual(links[0]!.addr_info.map((a) => a.local), ['127.0.0.1', '::1']);
  await assert.rejects(driver.setup({ containerId: containerId(), name: '/x', networks: [{ network: 'none' }, { network: 'bridge' }] }), { kind: 'invalid-argument' });
});

netTest('a network with a given id, subnet and gateway; hooks run while its bridge exists; a failing hook undoes the create', async () => {
  const id = randomBytes(32).toString('hex');
  hookCalls.length = 0;
  const n = await createNetwork({ id, name: 'given', ipam: { config: [{ subnet: '10.213.70.0/24', gateway: '10.213.70.1' }] } });
  assert.equal(n.id, id);
  assert.equal(driver.get(id).bridgeName, n.bridgeName);
  assert.deepEqual([n.subnet, n.gateway], ['10.213.70.0/24', '10.213.70.1']);
  await assert.rejects(driver.create({ id, name: 'again' }), { kind: 'conflict' });
  await assert.rejects(driver.create({ id: 'short', name: 'again' }), { kind: 'conflict' });
  await driver.remove(id);
  assert.deepEqual(hookCalls, ['created given true', 'deleting given true']);
  assert.ok(!(await hostLinks()).includes(n.bridgeName));

  failNextCreatedHook = true;
  await assert.rejects(driver.create({ name: 'refused' }), /hook refused/);
  assert.throws(() => driver.get('refused'), { kind: 'not-found' });
  assert.deepEqual((await hostLinks()).filter((l) => l.startsWith(`${prefix}-`)), [], 'no bridge left by the refused create');
});

netTest('create checks names, drivers and subnets like dockerd', async () => {
  const n = await driver.create({ name: 'chk', labels: { a: 'b' }, ipam: { config: [{ subnet: '10.213.64.0/24', gateway: '10.213.64.254' }] } });
  try {
    assert.equal(n.gateway, '10.213.64.254');
    assert.equal(n.dnsEnabled, true);
    assert.ok(n.bridgeName.startsWith(`${prefix}-`) && n.bridgeName.length <= 15);
    assert.deepEqual(driver.get(n.id).labels, { a: 'b' });
    await assert.rejects(driver.create({ name: 'chk' }), { kind: 'conflict', message: 'network with name chk already exists' });
    await assert.rejects(driver.create({ name: 'host' }), { kind: 'forbidden' });
    await assert.rejects(driver.create({ name: 'o', driver: 'macvlan' }), { kind: 'not-found', message: 'plugin "macvlan" not found' });
    await assert.rejects(driver.create({ name: 'bad name' }), { kind: 'invalid-argument' });
    await assert.rejects(driver.create({ name: 'ov', ipam: { config: [{ subnet: '10.213.64.128/25' }] } }), { kind: 'forbidden', message: /overlaps/ });
    await assert.rejects(driver.create({ name: 'hb', ipam: { config: [{ subnet: '10.213.65.1/24' }] } }), { kind: 'invalid-argument' });
    assert.throws(() => driver.get('nope'), { kind: 'not-found', message: 'network nope not found' });
  } finally {
    await driver.remove('chk');
  }
  assert.throws(() => driver.get('chk'), { kind: 'not-found' });
  assert.deepEqual((await hostLinks()).filter((l) => l === n.bridgeName), []);
});

netTest('containers on a user network reach each other and resolve names, aliases and short ids', async () => {
  const net = await createNetwork({ name: 'app' });
  const a = containerId();
  const b = containerId();
  const ca = await startContainer({ containerId: a, name: '/web', networks: [{ network: 'app', aliases: ['frontend'] }], dns: ['127.0.0.1'] });
  const cb = await startContainer({ containerId: b, name: '/db', networks: [{ network: 'app', aliases: ['database'] }], dns: ['127.0.0.1'] }, false);
  const ipA = ca.endpoints.app!.ipAddress;
  const ipB = cb.endpoints.app!.ipAddress;
  assert.notEqual(ipA, ipB);
  assert.equal(ca.endpoints.app!.gateway, net.gateway);
  assert.deepEqual(ca.endpoints.app!.dnsNames, ['web', 'frontend', a.slice(0, 12)]);
  assert.equal(ca.endpoints.app!.ifName, 'eth0');

  await inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', ipB]);
  await driver.renameContainer(b, '/db-renamed');
  assert.match(await retry(() => inNs(ca.netnsPath, ['busybox', 'nslookup', 'db-renamed', '127.0.0.11'])), new RegExp(`Address:\\s+${ipB.replace(/\./g, '\\.')}`));
  await driver.renameContainer(b, '/db');
  for (const name of ['db', 'database', b.slice(0, 12), 'DB']) {
    const out = await retry(() => inNs(ca.netnsPath, ['busybox', 'nslookup', name, '127.0.0.11']));
    assert.match(out, new RegExp(`Address:\\s+${ipB.replace(/\./g, '\\.')}`), name);
  }
  // Through the resolv.conf the engine would write: ping by name.
  const rc = join(root, 'resolv-app.conf');
  await writeFile(rc, await driver.resolvConf(['app']));
  assert.match(await readFile(rc, 'utf8'), /^nameserver 127\.0\.0\.11$/m);
  const ping = await inNs(cb.netnsPath, ['unshare', '-m', 'sh', '-c', `mount --bind ${rc} /etc/resolv.conf && busybox ping -c 1 -W 2 web`]);
  assert.match(ping, new RegExp(`PING web \\(${ipA.replace(/\./g, '\\.')}\\)`));

  // route_localnet (needed for 127.0.0.11) exposes nothing bound to loopback on the host: a container
  // that routes 127.0.0.2 to the gateway itself gets nowhere.
  const hostOnly = createServer((sock) => sock.end('host secret\n'));
  servers.push(hostOnly);
  await new Promise<void>((resolve) => hostOnly.listen({ host: '127.0.0.2', port: 0 }, resolve));
  const secretPort = (hostOnly.address() as { port: number }).port;
  await inNs(ca.netnsPath, ['ip', 'route', 'add', '127.0.0.2/32', 'via', net.gateway, 'dev', 'eth0', 'src', ipA, 'table', 'local']);
  await assert.rejects(inNs(ca.netnsPath, ['timeout', '3', 'busybox', 'nc', '127.0.0.2', String(secretPort)]));
  await inNs(ca.netnsPath, ['ip', 'route', 'del', '127.0.0.2/32', 'table', 'local']);
  // Nor in a neighbour: db cannot reach a server web binds to 127.0.0.2.
  const www = join(root, 'www-loopback');
  await mkdir(www, { recursive: true });
  await writeFile(join(www, 'index.html'), 'loopback only\n');
  spawnInNs(ca.netnsPath, ['busybox', 'httpd', '-f', '-p', '127.0.0.2:8088', '-h', www]);
  const local = await retry(() => inNs(ca.netnsPath, ['timeout', '3', 'busybox', 'wget', '-q', '-O', '-', 'http://127.0.0.2:8088/index.html']));
  assert.equal(local, 'loopback only\n');
  await inNs(cb.netnsPath, ['ip', 'route', 'add', '127.0.0.2/32', 'via', ipA, 'dev', 'eth0', 'src', ipB, 'table', 'local']);
  await assert.rejects(inNs(cb.netnsPath, ['timeout', '3', 'busybox', 'wget', '-q', '-O', '-', 'http://127.0.0.2:8088/index.html']));
  await inNs(cb.netnsPath, ['ip', 'route', 'del', '127.0.0.2/32', 'table', 'local']);

  // The default bridge has no name resolution.
  const c = containerId();
  const cc = await startContainer({ containerId: c, name: '/plain', networks: [{ network: 'bridge' }] });
  const bridge = driver.get('bridge');
  assert.match(await driver.resolvConf(['bridge']), /^nameserver 8\.8\.8\.8$/m, 'loopback host servers are dropped');
  await assert.rejects(inNs(cc.netnsPath, ['timeout', '3', 'busybox', 'nslookup', 'web', '127.0.0.11']));
  assert.ok(bridge.gateway);
  // Networks are isolated from each other.
  await assert.rejects(inNs(cc.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '1', ipA]));

  await stopContainer(a);
  await stopContainer(b);
  await stopContainer(c);
  await driver.remove('app');
});

netTest('a published port answers on 127.0.0.1 (TCP and UDP), a random port when 0', async () => {
  const a = containerId();
  const www = join(root, 'www');
  await rm(www, { recursive: true, force: true });
  await mkdir(www);
  await writeFile(join(www, 'index.html'), 'hello from the container\n');
  const started = await startContainer({
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
  assert.deepEqual(driver.containerNetworks(a).ports, started.ports);

  spawnInNs(started.netnsPath, ['busybox', 'httpd', '-f', '-p', '80', '-h', www]);
  assert.equal(await retry(() => httpGet(local!.hostPort)), 'hello from the container\n');
  assert.equal(await retry(() => httpGet(any!.hostPort)), 'hello from the container\n', '0.0.0.0 binding reached from loopback');

  // busybox nc has no UDP: a two-line node UDP listener inside the namespace.
  const listener = "require('dgram').createSocket('udp4').on('message', (m) => process.stdout.write(m)).bind(5000)";
  // Hairpin: the container reaches its own published port through the gateway, and so does a neighbour.
  const bridge = driver.get('bridge');
  const url = `http://${bridge.gateway}:${any!.hostPort}/index.html`;
  assert.equal(await inNs(started.netnsPath, ['timeout', '5', 'busybox', 'wget', '-q', '-O', '-', url]), 'hello from the container\n');
  const n = containerId();
  const neighbour = await startContainer({ containerId: n, name: '/neighbour', networks: [{ network: 'bridge' }] });
  assert.equal(await inNs(neighbour.netnsPath, ['timeout', '5', 'busybox', 'wget', '-q', '-O', '-', url]), 'hello from the container\n');

  const nc = spawnInNs(started.netnsPath, [process.execPath, '-e', listener], 'pipe');
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

  await stopContainer(a);
  const table = await runTool('nft', ['list', 'table', 'inet', prefix]);
  assert.ok(!table.includes(String(local!.hostPort)), 'port rules removed with the container');
  await assert.rejects(httpGet(local!.hostPort));
});

netTest('a host port that is taken fails clearly and leaves nothing behind', async () => {
  const holder = createServer();
  servers.push(holder);
  await new Promise<void>((resolve) => holder.listen({ host: '127.0.0.1', port: 0 }, resolve));
  const port = (holder.address() as { port: number }).port;
  const before = await hostLinks();
  const a = containerId();
  await assert.rejects(
    startContainer({ containerId: a, name: '/clash', networks: [{ network: 'bridge' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: port }] }),
    { kind: 'conflict', message: `failed to bind host port 127.0.0.1:${port}/tcp: address already in use` },
  );
  assert.deepEqual(driver.containerNetworks(a), { endpoints: {}, ports: [] });
  assert.deepEqual(await hostLinks(), before);

  // A port another container publishes is refused before touching the host.
  const b = containerId();
  const got = await startContainer({ containerId: b, name: '/first', networks: [{ network: 'bridge' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '', hostPort: 0 }] });
  const taken = got.ports[0]!.hostPort;
  const c = containerId();
  const netnsC = await driver.createNetns(c);
  await assert.rejects(
    driver.attach({ containerId: c, name: '/second', netnsPath: netnsC, networks: [{ network: 'bridge' }], ports: [{ containerPort: 81, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: taken }] }),
    { kind: 'conflict', message: `Bind for 127.0.0.1:${taken} failed: port is already allocated` },
  );
  assert.deepEqual((await nsLinks(netnsC)).map((l) => l.ifname), ['lo'], 'no interface added');
  await driver.removeNetns(c);
  await stopContainer(b);
  assert.deepEqual(await hostLinks(), before);
});

netTest('a released veth goes with its namespace; its address stays taken until then, unless asked for', async () => {
  const net = await createNetwork({ name: 'drain', ipam: { config: [{ subnet: '10.213.70.0/24' }] } });
  const veths = async () => (await hostLinks()).filter((l) => l !== net.bridgeName && l !== `${prefix}0`);
  const a = containerId();
  const first = await startContainer({ containerId: a, name: '/first', networks: [{ network: 'drain' }] });
  assert.equal(first.endpoints.drain!.ipAddress, '10.213.70.2');
  const veth = await veths();
  assert.equal(veth.length, 1);
  await driver.detach(a);
  // Namespace still mounted: the device stays and so does its address.
  assert.deepEqual(await veths(), veth);
  const b = containerId();
  const second = await startContainer({ containerId: b, name: '/second', networks: [{ network: 'drain' }] });
  assert.equal(second.endpoints.drain!.ipAddress, '10.213.70.3', 'a draining address is not handed out');
  await driver.removeNetns(a);
  await driver.settled();
  assert.equal((await veths()).length, 1, 'only the second container\'s veth is left');
  const c = containerId();
  const third = await startContainer({ containerId: c, name: '/third', networks: [{ network: 'drain' }] });
  assert.equal(third.endpoints.drain!.ipAddress, '10.213.70.2', 'free again once the device is gone');

  // A static address whose holder is still draining is taken back at once.
  await driver.detach(b);
  const d = containerId();
  const fourth = await startContainer({ containerId: d, name: '/fourth', networks: [{ network: 'drain', ipv4: '10.213.70.3' }] });
  assert.equal(fourth.endpoints.drain!.ipAddress, '10.213.70.3');
  await inNs(fourth.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', third.endpoints.drain!.ipAddress]);
  await driver.removeNetns(b);
  await stopContainer(c);
  await stopContainer(d);
  assert.deepEqual(await veths(), []);
});

netTest('connect and disconnect a running container', async () => {
  await createNetwork({ name: 'front' });
  await createNetwork({ name: 'back', internal: true });
  const a = containerId();
  const b = containerId();
  const ca = await startContainer({ containerId: a, name: '/api', networks: [{ network: 'front' }], dns: ['127.0.0.1'] });
  const cb = await startContainer({ containerId: b, name: '/store', networks: [{ network: 'back' }], dns: ['127.0.0.1'] });
  const routesB = await inNs(cb.netnsPath, ['ip', '-j', 'route', 'show', 'default']);
  assert.deepEqual(JSON.parse(routesB), [], 'an internal network gives no default route');
  await assert.rejects(inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '1', cb.endpoints.back!.ipAddress]));

  const ep = await driver.connect({ containerId: a, name: '/api', netnsPath: ca.netnsPath, network: 'back', aliases: ['api-internal'] });
  assert.equal(ep.ifName, 'eth1');
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth0', 'eth1', 'lo']);
  await inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', cb.endpoints.back!.ipAddress]);
  const out = await retry(() => inNs(cb.netnsPath, ['busybox', 'nslookup', 'api-internal', '127.0.0.11']));
  assert.match(out, new RegExp(`Address:\\s+${ep.ipAddress.replace(/\./g, '\\.')}`));
  await assert.rejects(driver.connect({ containerId: a, name: '/api', netnsPath: ca.netnsPath, network: 'back' }), { kind: 'forbidden' });
  const routesA = JSON.parse(await inNs(ca.netnsPath, ['ip', '-j', 'route', 'show', 'default'])) as { dev: string }[];
  assert.equal(routesA[0]!.dev, 'eth0', 'the default route stays on the first network');

  await driver.disconnect(a, 'back');
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth0', 'lo']);
  await assert.rejects(driver.disconnect(a, 'back'), { kind: 'forbidden' });
  assert.deepEqual(Object.keys(driver.containerNetworks(a).endpoints), ['front']);

  // Leaving the network that carried the default route and DNS: names still resolve through the other.
  await driver.connect({ containerId: a, name: '/api', netnsPath: ca.netnsPath, network: 'back' });
  await driver.disconnect(a, 'front');
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth1', 'lo']);
  assert.deepEqual(JSON.parse(await inNs(ca.netnsPath, ['ip', '-j', 'route', 'show', 'default'])), []);
  const viaBack = await retry(() => inNs(ca.netnsPath, ['busybox', 'nslookup', 'store', '127.0.0.11']));
  assert.match(viaBack, new RegExp(`Address:\\s+${cb.endpoints.back!.ipAddress.replace(/\./g, '\\.')}`));
  const again = await driver.connect({ containerId: a, name: '/api', netnsPath: ca.netnsPath, network: 'front' });
  assert.equal(again.ifName, 'eth0');
  const routesAgain = JSON.parse(await inNs(ca.netnsPath, ['ip', '-j', 'route', 'show', 'default'])) as { dev: string }[];
  assert.equal(routesAgain[0]!.dev, 'eth0', 'a non-internal network brings the default route back');

  await stopContainer(a);
  await stopContainer(b);
  await driver.remove('front');
  await driver.remove('back');
});

netTest('remove refuses a network in use and leaves no rules, bridges or veths behind', async () => {
  const net = await createNetwork({ name: 'busy' });
  const a = containerId();
  const started = await startContainer({ containerId: a, name: '/user', networks: [{ network: 'busy' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: 0 }] });
  await assert.rejects(driver.remove('busy'), { kind: 'forbidden', message: /has active endpoints/ });
  const hostVeths = (await hostLinks()).filter((l) => l !== net.bridgeName && !l.startsWith(`${prefix}-`) && l !== `${prefix}0`);
  assert.equal(hostVeths.length, 1);
  await stopContainer(a);
  assert.ok(!(await mountPoints()).has(started.netnsPath));
  await driver.remove('busy');
  assert.deepEqual(await hostLinks(), [`${prefix}0`], 'only the default bridge remains');
  const table = await runTool('nft', ['list', 'table', 'inet', prefix]);
  assert.ok(!table.includes(net.id.slice(0, 12)), 'no chain of the network remains');
  assert.ok(!table.includes(net.bridgeName));
  assert.doesNotMatch(table, / \. tcp \. /, 'no port elements remain');
  assert.deepEqual(await driver.prune(), []);
});

netTest('namespaces made ahead: taken by a start, topped up, dropped at shutdown, kept when taken', async () => {
  await driver.shutdown();
  driver = newDriver(2);
  await driver.init();
  await driver.settled();
  const netnsDir = join(root, 'exec', 'network', 'netns');
  const readyFiles = async () => (await readdir(netnsDir)).filter((f) => f.startsWith('ready-')).sort();
  const made = await readyFiles();
  assert.equal(made.length, 4, 'two on the default bridge, two with only loopback');
  const bridge = driver.get('bridge');

  const a = containerId();
  const ca = await startContainer({ containerId: a, name: '/ahead', networks: [{ network: 'bridge' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: 0 }] });
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
  const table = await runTool('nft', ['list', 'table', 'inet', prefix]);
  assert.ok(table.includes(`${ep.ipAddress} . 80`), 'published port points at the address made ahead');
  // connect/disconnect work through the container's link.
  await createNetwork({ name: 'extra' });
  const extra = await driver.connect({ containerId: a, name: '/ahead', netnsPath: ca.netnsPath, network: 'extra' });
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth0', 'eth1', 'lo']);
  await inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', driver.get('extra').gateway]);
  assert.equal(extra.ifName, 'eth1');
  await driver.disconnect(a, 'extra');
  assert.deepEqual((await nsLinks(ca.netnsPath)).map((l) => l.ifname).sort(), ['eth0', 'lo']);
  await driver.remove('extra');

  const n = containerId();
  const cn = await startContainer({ containerId: n, name: '/nothing', networks: [{ network: 'none' }] });
  assert.ok(made.includes(await readlink(cn.netnsPath)));
  assert.deepEqual((await nsLinks(cn.netnsPath)).map((l) => l.ifname), ['lo']);

  // A static MAC cannot use one: the ordinary path.
  const m = containerId();
  const cm = await startContainer({ containerId: m, name: '/mac', networks: [{ network: 'bridge', mac: '02:42:00:00:00:42' }] });
  await assert.rejects(readlink(cm.netnsPath), { code: 'EINVAL' });
  assert.equal(cm.endpoints.bridge!.macAddress, '02:42:00:00:00:42');
  await inNs(cm.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', ep.ipAddress]);

  await driver.settled();
  assert.equal((await readyFiles()).length, 4, 'not topped up before the engine says the containers started');
  driver.replenish();
  await driver.settled();
  assert.equal((await readyFiles()).length, 6, 'topped up: four ready, two taken');

  // A restart drops what nobody took and keeps what containers use.
  await driver.shutdown();
  assert.deepEqual((await readyFiles()).sort(), [await readlink(ca.netnsPath), await readlink(cn.netnsPath)].sort());
  driver = newDriver(2);
  await driver.init();
  assert.equal(driver.containerNetworks(a).endpoints.bridge!.ipAddress, ep.ipAddress);
  await stopContainer(a);
  await stopContainer(n);
  await stopContainer(m);
  await assert.rejects(readlink(ca.netnsPath), { code: 'ENOENT' });
  assert.deepEqual((await readyFiles()).length, 4, 'the taken ones are gone, the ready ones stay');
  await driver.shutdown();
  assert.deepEqual(await readyFiles(), []);
  assert.deepEqual(await hostLinks(), [`${prefix}0`], 'no veth left');
  driver = newDriver();
  await driver.init();
});

netTest('allocations survive a daemon restart', async () => {
  await createNetwork({ name: 'keep' });
  const a = containerId();
  const started = await startContainer({ containerId: a, name: '/survivor', networks: [{ network: 'keep' }], ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: 0 }] });
  const ip = started.endpoints.keep!.ipAddress;
  await driver.shutdown();

  driver = newDriver();
  await driver.init();
  const again = driver.containerNetworks(a);
  assert.equal(again.endpoints.keep!.ipAddress, ip);
  assert.deepEqual(again.ports, started.ports);
  const table = await runTool('nft', ['list', 'table', 'inet', prefix]);
  assert.ok(table.includes(`${ip} . 80`), 'port rules rebuilt');
  const b = containerId();
  const other = await startContainer({ containerId: b, name: '/newcomer', networks: [{ network: 'keep' }] });
  assert.notEqual(other.endpoints.keep!.ipAddress, ip, 'no address handed out twice');
  await inNs(other.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', ip]);

  // A container whose namespace vanished while the daemon was down loses its allocation at init.
  await driver.shutdown();
  await runTool('umount', [started.netnsPath]);
  driver = newDriver();
  await driver.init();
  assert.deepEqual(driver.containerNetworks(a), { endpoints: {}, ports: [] });
  await driver.removeNetns(a);
  await stopContainer(b);
  assert.deepEqual(await driver.prune(), ['keep']);
});

netTest('IPv6: addresses from a unique-local subnet, reachable, and AAAA records', async () => {
  const net = await createNetwork({ name: 'six', enableIPv6: true });
  assert.match(net.subnet6 ?? '', /^fd[0-9a-f]{2}:[0-9a-f:]+\/64$/);
  const a = containerId();
  const b = containerId();
  const ca = await startContainer({ containerId: a, name: '/alpha', networks: [{ network: 'six' }], dns: ['127.0.0.1'] });
  const cb = await startContainer({ containerId: b, name: '/beta', networks: [{ network: 'six' }], dns: ['127.0.0.1'] });
  const ip6 = cb.endpoints.six!.ipv6Address;
  assert.ok(ip6.startsWith(net.subnet6!.split('::')[0]!));
  assert.equal(ca.endpoints.six!.ipv6Gateway, net.gateway6);
  await inNs(ca.netnsPath, ['busybox', 'ping', '-c', '1', '-W', '2', ip6]);
  const out = await retry(() => inNs(ca.netnsPath, ['busybox', 'nslookup', '-type=AAAA', 'beta', '127.0.0.11']));
  assert.ok(out.includes(ip6), out);
});

netTest('parallel daemons get their own subnets, devices and tables', async () => {
  const ours = await runTool('nft', ['list', 'table', 'inet', prefix]);
  const others = await Promise.all([1, 2].map(async (i) => {
    const otherPrefix = `bo${randomBytes(3).toString('hex')}`;
    const otherDb = openDatabase(join(root, `other-${i}.db`));
    const d = controllerOn(otherDb, { execRoot: join(root, `other-${i}`), prefix: otherPrefix, hostResolvConf: join(root, 'host-resolv.conf') });
    cleanups.push(async () => {
      await d.destroy();
      otherDb.close();
    });
    return d;
  }));
  await Promise.all(others.map((d) => d.init()));
  const subnets = [driver.get('bridge').subnet, ...others.map((d) => d.get('bridge').subnet)];
  assert.equal(new Set(subnets).size, 3, `distinct default subnets: ${subnets.join(' ')}`);
  assert.deepEqual(others.map((d) => d.get('bridge').bridgeName), others.map((d) => `${d.prefix}0`));
  for (const d of others) await d.destroy();
  assert.equal(await runTool('nft', ['list', 'table', 'inet', prefix]), ours, 'our table is untouched');
  // Another process cannot start with our prefix while we run.
  const hostLock = new URL('../../network/host-lock.js', import.meta.url).href;
  await assert.rejects(
    runTool(process.execPath, ['--input-type=module', '-e', `import { claimPrefix } from '${hostLock}'; claimPrefix('${prefix}');`]),
    /network prefix "[a-z0-9]+" is in use by another daemon/,
  );
});

netTest('parallel starts get distinct addresses and ports', async () => {
  await createNetwork({ name: 'crowd' });
  const ids8 = Array.from({ length: 8 }, () => containerId());
  const results = await Promise.all(ids8.map((id, i) => startContainer({
    containerId: id,
    name: `/crowd${i}`,
    networks: [{ network: i % 2 ? 'crowd' : 'bridge' }],
    ports: [{ containerPort: 80, protocol: 'tcp', hostIp: '', hostPort: 0 }],
  })));
  const addrs = results.map((r) => Object.values(r.endpoints)[0]!.ipAddress);
  const hostPorts = results.map((r) => r.ports[0]!.hostPort);
  assert.equal(new Set(addrs).size, 8, addrs.join(' '));
  assert.equal(new Set(hostPorts).size, 8, hostPorts.join(' '));
  await Promise.all(ids8.map((id) => stopContainer(id)));
  assert.deepEqual(ids8.map((id) => driver.containerNetworks(id)), ids8.map(() => ({ endpoints: {}, ports: [] })));
});

/** A controller of its own (prefix, exec root, database, DNS port) whose host state is purged after the test. */
function ownController(tag: string, dnsPort: number): { d: NetworkController; p: string; execRoot: string } {
  const p = `${tag}${randomBytes(3).toString('hex')}`;
  const execRoot = join(root, p);
  const pdb = openDatabase(join(root, `${p}.db`));
  const d = controllerOn(pdb, { execRoot, prefix: p, hostResolvConf: join(root, 'host-resolv.conf'), dnsPort });
  cleanups.push(async () => {
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

netTest('purgeHostState removes what a stopped daemon left behind', async () => {
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

netTest('a new DNS-enabled network has its DNS server serving before any container joins; it goes with the network', async () => {
  const { d, execRoot } = ownController('bd', 5382);
  cleanups.push(() => d.shutdown());
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

netTest('a bridge device of the prefix left on the host is taken over: its old addresses go, the network gets its gateway', async () => {
  const { d, p } = ownController('bl', 5383);
  cleanups.push(() => d.shutdown());
  await runTool('ip', ['link', 'add', 'name', `${p}0`, 'type', 'bridge']);
  await runTool('ip', ['addr', 'add', '10.251.77.1/24', 'dev', `${p}0`]);
  await d.init();
  const gateway = d.get('bridge').gateway;
  const [link] = JSON.parse(await runTool('ip', ['-j', 'addr', 'show', 'dev', `${p}0`])) as { operstate: string; flags: string[]; addr_info: { family: string; local: string }[] }[];
  assert.deepEqual(link!.addr_info.filter((a) => a.family === 'inet').map((a) => a.local), [gateway]);
  assert.ok(link!.flags.includes('UP'), link!.flags.join(','));
});
