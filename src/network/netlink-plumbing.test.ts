import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { plumbByNetlink } from './netlink-plumbing.js';
import { NetlinkError, NetlinkSocket } from './netlink-socket.js';
import { getLink } from './netlink-messages.js';
import { createNamespace, inNamespace, ownNamespacePath } from './ns-calls.js';
import { createBridgeByNetlink, deleteBridgeByNetlink, linkExists, listLinks, listLinksByNetlink, type LinkInfo } from './bridge-device.js';
import { hostRoutePrefixes, hostRoutePrefixesByNetlink } from './host-routes.js';
import { formatCidr } from './cidr.js';

const run = (cmd: string, args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const inNs = (ns: string, args: string[]): string => run('nsenter', [`--net=${ns}`, ...args]);

test('a namespace made in-process gets its interfaces over rtnetlink as `ip` puts them', async () => {
  const tag = randomBytes(3).toString('hex');
  const bridge = `bnl${tag}`;
  const dir = mkdtempSync(join(tmpdir(), 'berth-netlink-'));
  const namespaces = [join(dir, 'a'), join(dir, 'b')];
  const veths = [`vnla${tag}`, `vnlb${tag}`, `vnlc${tag}`];
  run('ip', ['link', 'add', bridge, 'type', 'bridge']);
  try {
    run('ip', ['addr', 'add', '10.231.7.1/24', 'dev', bridge]);
    run('ip', ['addr', 'add', 'fd00:e7::1/64', 'dev', bridge, 'nodad']);
    run('ip', ['link', 'set', bridge, 'up']);
    for (const ns of namespaces) {
      writeFileSync(ns, '');
      createNamespace(ns, () => undefined);
    }
    // Berthd's own namespace is where it was: the new ones are only bound to their files.
    assert.equal(readFileSync('/proc/thread-self/net/dev', 'utf8').includes(bridge), true);
    const plan = (i: number) => ({
      loopbackUp: true,
      add: [{ ifName: 'eth0', hostVeth: veths[i]!, bridge, mac: `02:42:0a:e7:07:0${i + 2}`, mtu: 1450, ipv4: { address: `10.231.7.${i + 2}`, prefixLen: 24 }, ipv6: { address: `fd00:e7::${i + 2}`, prefixLen: 64 } }],
      routes: { ifName: 'eth0', gateway4: '10.231.7.1', gateway6: 'fd00:e7::1' },
      dns: { ifName: 'eth0', gateway: '10.231.7.1', source: `10.231.7.${i + 2}` },
    });
    await Promise.all(namespaces.map((ns, i) => plumbByNetlink(ns, plan(i))));

    const links = JSON.parse(inNs(namespaces[0]!, ['ip', '-j', '-d', 'addr'])) as { ifname: string; operstate: string; address: string; mtu: number; flags: string[]; addr_info: { local: string; prefixlen: number; broadcast?: string }[] }[];
    const lo = links.find((l) => l.ifname === 'lo')!;
    assert.ok(lo.flags.includes('UP'));
    const eth0 = links.find((l) => l.ifname === 'eth0')!;
    assert.equal(eth0.address, '02:42:0a:e7:07:02');
    assert.equal(eth0.mtu, 1450);
    assert.ok(eth0.flags.includes('UP'));
    const v4 = eth0.addr_info.find((a) => a.local === '10.231.7.2')!;
    assert.equal(v4.prefixlen, 24);
    assert.equal(v4.broadcast, '10.231.7.255');
    assert.ok(eth0.addr_info.some((a) => a.local === 'fd00:e7::2' && a.prefixlen === 64));
    assert.match(inNs(namespaces[0]!, ['ip', 'route', 'show', 'default']), /default via 10\.231\.7\.1 dev eth0/);
    assert.match(inNs(namespaces[0]!, ['ip', '-6', 'route', 'show', 'default']), /default via fd00:e7::1 dev eth0/);
    assert.match(inNs(namespaces[0]!, ['ip', 'route', 'show', 'table', 'local', '127.0.0.11']), /127\.0\.0\.11 via 10\.231\.7\.1 dev eth0 src 10\.231\.7\.2/);
    assert.equal(inNs(namespaces[0]!, ['cat', '/proc/sys/net/ipv4/conf/all/route_localnet']).trim(), '1');

    const host = JSON.parse(run('ip', ['-j', '-d', 'link', 'show', veths[0]!])) as { master: string; mtu: number; flags: string[]; linkinfo: { info_slave_data: { hairpin: boolean } } }[];
    assert.equal(host[0]!.master, bridge);
    assert.equal(host[0]!.mtu, 1450);
    assert.ok(host[0]!.flags.includes('UP'));
    assert.equal(host[0]!.linkinfo.info_slave_data.hairpin, true);
    // The two namespaces reach each other through the bridge.
    assert.match(inNs(namespaces[0]!, ['busybox', 'ping', '-c', '1', '-W', '2', '10.231.7.3']), /1 packets received/);

    // Failures carry the request and the kernel's errno (and its explanation when it gives one).
    const dup = await plumbByNetlink(namespaces[0]!, { add: [{ ifName: 'eth0', hostVeth: veths[2]!, bridge, mac: '02:42:0a:e7:07:09', mtu: 1500 }] }).catch((e: unknown) => e);
    assert.ok(dup instanceof NetlinkError);
    assert.equal(dup.code, 'EEXIST');
    assert.match(dup.message, /link add eth0 type veth/);
    const unreachable = await plumbByNetlink(namespaces[1]!, { add: [], routes: { ifName: 'eth0', gateway4: '10.99.99.1' } }).catch((e: unknown) => e);
    assert.ok(unreachable instanceof NetlinkError);
    assert.match(unreachable.message, /route replace default via 10\.99\.99\.1: ENETUNREACH/);
  } finally {
    for (const [cmd, args] of [...veths.map((v) => ['ip', ['link', 'del', v]] as const), ['ip', ['link', 'del', bridge]] as const, ...namespaces.map((ns) => ['umount', [ns]] as const)]) {
      try {
        execFileSync(cmd, args, { stdio: 'ignore' });
      } catch {
        // not there (never made, or gone with its namespace)
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bridges, links and routes over rtnetlink read and do what `ip` does', async () => {
  const name = `bnl${randomBytes(3).toString('hex')}`;
  try {
    await createBridgeByNetlink({ name, mtu: 1400, addresses: ['10.232.9.1/24', 'fd00:e8::1/64'] });
    const [ours, theirs] = await Promise.all([listLinksByNetlink(), listLinks('ip')]);
    const bridge = ours.get(name)!;
    assert.equal(bridge.kind, 'bridge');
    assert.deepEqual(new Set(bridge.addresses.filter((a) => !a.startsWith('fe80:'))), new Set(['10.232.9.1/24', 'fd00:e8::1/64']));
    // The same kind and addresses as `ip` shows (others' devices come and go meanwhile: loopback, the
    // host's own interfaces and ours).
    const sorted = (l: LinkInfo | undefined) => l && { ...l, addresses: [...l.addresses].sort() };
    for (const [n, l] of theirs) if (n === name || n === 'lo' || !l.kind) assert.deepEqual(sorted(ours.get(n)), sorted(l), n);
    const details = JSON.parse(run('ip', ['-j', '-d', 'addr', 'show', 'dev', name])) as { mtu: number; flags: string[]; addr_info: { local: string; broadcast?: string }[] }[];
    assert.equal(details[0]!.mtu, 1400);
    assert.ok(details[0]!.flags.includes('UP'));
    assert.equal(details[0]!.addr_info.find((a) => a.local === '10.232.9.1')!.broadcast, '10.232.9.255');
    assert.equal(readFileSync(`/proc/sys/net/ipv4/conf/${name}/route_localnet`, 'utf8').trim(), '1');

    const [routes, ipRoutes] = await Promise.all([hostRoutePrefixesByNetlink(), hostRoutePrefixes('ip')]);
    // Routes of loopback and of the new bridge, as `ip` has them (others' come and go meanwhile).
    const text = (cs: typeof routes) => new Set(cs.map(formatCidr).filter((c) => /^(127\.|10\.232\.9\.|fd00:e8:)/.test(c)));
    assert.deepEqual(text(routes), text(ipRoutes));
    for (const c of ['10.232.9.0/24', '10.232.9.1/32', 'fd00:e8::/64', '127.0.0.0/8']) assert.ok(text(routes).has(c), c);

    // One an earlier daemon left: taken over, its addresses replaced.
    await createBridgeByNetlink({ name, mtu: 1500, addresses: ['10.232.10.1/24'] });
    const again = (await listLinksByNetlink()).get(name)!;
    assert.deepEqual(again.addresses.filter((a) => !a.startsWith('fe80:')), ['10.232.10.1/24']);
    // Not a bridge: refused.
    const veth = `vnl${randomBytes(3).toString('hex')}`;
    run('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', `${veth}p`]);
    try {
      const refused = await createBridgeByNetlink({ name: veth, mtu: 1500, addresses: [] }).catch((e: unknown) => e);
      assert.ok(refused instanceof NetlinkError);
      assert.equal(refused.code, 'EEXIST');
    } finally {
      run('ip', ['link', 'del', veth]);
    }
    assert.equal(await linkExists(name), true);
    await deleteBridgeByNetlink(name);
    assert.equal((await listLinksByNetlink()).has(name), false);
    assert.equal(await linkExists(name), false);
    await deleteBridgeByNetlink(name); // gone already: fine
  } finally {
    try {
      execFileSync('ip', ['link', 'del', name], { stdio: 'ignore' });
    } catch {
      // deleted by the test
    }
  }
});

test('`ip` run while the main thread is inside another namespace still puts a host end into berthd\'s own (ownNamespacePath)', () => {
  const tag = randomBytes(3).toString('hex');
  const dir = mkdtempSync(join(tmpdir(), 'berth-netlink-'));
  const [target, other] = [join(dir, 'target'), join(dir, 'other')];
  const [ours, byPid] = [`vnlh${tag}`, `vnlp${tag}`];
  try {
    for (const ns of [target, other]) {
      writeFileSync(ns, '');
      createNamespace(ns, () => undefined);
    }
    // What `ip` in the container's namespace runs (endpoint-plumbing.ts) at a moment the main thread is
    // in another namespace (making one, or a socket in one): held there by running it synchronously.
    const addVeth = (ifName: string, peer: string, hostNs: string) => inNamespace(other, () => run('nsenter', [`--net=${target}`, 'ip', 'link', 'add', ifName, 'type', 'veth', 'peer', 'name', peer, 'netns', hostNs]));
    addVeth('eth1', ours, ownNamespacePath());
    assert.match(run('ip', ['link', 'show', ours]), new RegExp(ours), 'the host end is in berthd\'s namespace');
    // The main thread's namespace by pid is the one it is in at that moment: the other container's.
    addVeth('eth2', byPid, `/proc/${process.pid}/ns/net`);
    assert.match(inNs(other, ['ip', 'link', 'show', byPid]), new RegExp(byPid));
  } finally {
    for (const [cmd, args] of [['ip', ['link', 'del', ours]] as const, ...[target, other].map((ns) => ['umount', [ns]] as const)]) {
      try {
        execFileSync(cmd, args, { stdio: 'ignore' });
      } catch {
        // not there
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a netlink socket closed while a request is under way keeps its fd until the request ends', async () => {
  // plumbByNetlink closes both its sockets when one side fails, the other's request maybe still queued
  // on libuv's pool: its send must not go to whatever reuses the fd's number (here a new socket, whose
  // own request would read the stray answer as its own).
  const missing = `nosuch${randomBytes(3).toString('hex')}`;
  for (let i = 0; i < 20; i++) {
    const closed = NetlinkSocket.open();
    const under = closed.request([getLink('lo')]).catch((e: unknown) => e);
    closed.close();
    const next = NetlinkSocket.open();
    try {
      const r = await next.request([getLink(missing)]).catch((e: unknown) => e);
      assert.ok(r instanceof NetlinkError && r.code === 'ENODEV', `round ${i}: the new socket's own answer (got ${JSON.stringify(r)})`);
    } finally {
      next.close();
    }
    assert.deepEqual(await under, [{ request: 0, index: 1 }], `round ${i}: the closed socket's request ends with its own answer`);
    await assert.rejects(closed.request([getLink('lo')]), /closed/);
  }
});
