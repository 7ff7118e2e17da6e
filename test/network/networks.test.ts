/**
 * Networking through the docker CLI and raw HTTP: user networks with name resolution, the default
 * bridge, published ports reached from 127.0.0.1, host/none/container modes, and no leftovers.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';

function links(): string[] {
  return (JSON.parse(execFileSync('ip', ['-j', 'link', 'show'], { encoding: 'utf8' })) as { ifname: string }[]).map((l) => l.ifname);
}

async function httpGet(port: number, path: string): Promise<string> {
  for (let i = 0; i < 20; i++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      return await res.text();
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`nothing answered on 127.0.0.1:${port}`);
}

describe('networking', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  before(async () => {
    image = reg().seeded.refs.busybox;
    assert.equal((await daemon().docker(['pull', '-q', image])).code, 0);
  });

  async function ok(d: TestDaemon, args: string[]): Promise<string> {
    const r = await d.docker(args, { timeoutMs: 60_000 });
    assert.equal(r.code, 0, `docker ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  }

  it('lists the built-in networks', async () => {
    const d = daemon();
    const names = (await ok(d, ['network', 'ls', '--format', '{{.Name}} {{.Driver}}'])).trim().split('\n').sort();
    assert.deepEqual(names, ['bridge bridge', 'host host', 'none null']);
    const bridge = (await d.request('GET', '/networks/bridge')).json();
    assert.match(bridge.IPAM.Config[0].Subnet, /^\d+\.\d+\.\d+\.\d+\/\d+$/);
  });

  it('containers on a user network reach each other by name, alias and short id; the default bridge does not resolve', async () => {
    const d = daemon();
    await ok(d, ['network', 'create', '--label', 'team=a', 'appnet']);
    const web = (await ok(d, ['run', '-d', '--name', 'web', '--network', 'appnet', '--network-alias', 'www', image, 'httpd', '-f', '-p', '80', '-h', '/etc'])).trim();
    const viaName = await ok(d, ['run', '--rm', '--network', 'appnet', image, 'wget', '-q', '-O-', 'http://web/hostname']);
    assert.equal(viaName.trim(), web.slice(0, 12));
    assert.equal((await ok(d, ['run', '--rm', '--network', 'appnet', image, 'wget', '-q', '-O-', 'http://www/hostname'])).trim(), web.slice(0, 12));
    assert.equal((await ok(d, ['run', '--rm', '--network', 'appnet', image, 'wget', '-q', '-O-', `http://${web.slice(0, 12)}/hostname`])).trim(), web.slice(0, 12));
    const resolv = await ok(d, ['run', '--rm', '--network', 'appnet', image, 'cat', '/etc/resolv.conf']);
    assert.match(resolv, /nameserver 127\.0\.0\.11/);

    const insp = (await d.request('GET', '/containers/web/json')).json();
    const ep = insp.NetworkSettings.Networks.appnet;
    assert.match(ep.IPAddress, /^\d+\.\d+\.\d+\.\d+$/);
    assert.ok(ep.Gateway && ep.MacAddress && ep.NetworkID && ep.EndpointID);
    const net = (await d.request('GET', '/networks/appnet')).json();
    assert.equal(net.Containers[web].Name, 'web');
    assert.equal(net.Labels.team, 'a');

    await ok(d, ['run', '-d', '--name', 'web0', image, 'httpd', '-f', '-p', '80', '-h', '/etc']);
    const noName = await d.docker(['run', '--rm', image, 'nslookup', 'web0'], { timeoutMs: 30_000 });
    assert.notEqual(noName.code, 0, 'no name resolution on the default bridge');
    const bridgeIp = (await d.request('GET', '/containers/web0/json')).json().NetworkSettings.Networks.bridge.IPAddress;
    assert.equal((await ok(d, ['run', '--rm', image, 'wget', '-q', '-O-', `http://${bridgeIp}/hostname`])).trim().length, 12, 'but addresses work');

    const rm = await d.docker(['network', 'rm', 'appnet']);
    assert.notEqual(rm.code, 0, 'in use');
    assert.equal((await d.request('DELETE', '/networks/appnet')).status, 409);
    await ok(d, ['rm', '-f', 'web', 'web0']);
    await ok(d, ['network', 'rm', 'appnet']);
    assert.equal((await d.request('GET', '/networks/appnet')).status, 404);
  });

  it('connect and disconnect a running container', async () => {
    const d = daemon();
    await ok(d, ['network', 'create', 'n1']);
    await ok(d, ['network', 'create', 'n2']);
    await ok(d, ['run', '-d', '--name', 'srv', '--network', 'n1', image, 'httpd', '-f', '-p', '80', '-h', '/etc']);
    await ok(d, ['run', '-d', '--name', 'cli', '--network', 'n2', image, 'sleep', '60']);
    const before = await d.docker(['exec', 'cli', 'wget', '-q', '-O-', 'http://srv/hostname']);
    assert.notEqual(before.code, 0);
    await ok(d, ['network', 'connect', 'n1', 'cli']);
    const after = await ok(d, ['exec', 'cli', 'wget', '-q', '-O-', 'http://srv/hostname']);
    assert.equal(after.trim().length, 12);
    const nets = Object.keys((await d.request('GET', '/containers/cli/json')).json().NetworkSettings.Networks).sort();
    assert.deepEqual(nets, ['n1', 'n2']);
    await ok(d, ['network', 'disconnect', 'n1', 'cli']);
    assert.deepEqual(Object.keys((await d.request('GET', '/containers/cli/json')).json().NetworkSettings.Networks), ['n2']);
    await ok(d, ['rm', '-f', 'srv', 'cli']);
    const pruned = await ok(d, ['network', 'prune', '-f']);
    assert.match(pruned, /n1/);
    assert.match(pruned, /n2/);
  });

  it('publishes ports on 127.0.0.1: fixed, random, -P, udp; a taken port is a clear error', async () => {
    const d = daemon();
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const free = (probe.address() as { port: number }).port;
    probe.close();
    await new Promise((r) => setTimeout(r, 50));
    await ok(d, ['run', '-d', '--name', 'pub1', '-p', `127.0.0.1:${free}:80`, image, 'httpd', '-f', '-p', '80', '-h', '/etc']);
    const id1 = (await d.request('GET', '/containers/pub1/json')).json().Id as string;
    assert.equal((await httpGet(free, '/hostname')).trim(), id1.slice(0, 12));
    assert.equal((await ok(d, ['port', 'pub1', '80'])).trim(), `127.0.0.1:${free}`);
    const ps = await ok(d, ['ps', '--filter', 'name=pub1', '--format', '{{.Ports}}']);
    assert.equal(ps.trim(), `127.0.0.1:${free}->80/tcp`);

    await ok(d, ['run', '-d', '--name', 'pub2', '-p', '127.0.0.1::80', image, 'httpd', '-f', '-p', '80', '-h', '/etc']);
    const ports = (await d.request('GET', '/containers/pub2/json')).json().NetworkSettings.Ports['80/tcp'];
    assert.equal(ports[0].HostIp, '127.0.0.1');
    const randomPort = Number(ports[0].HostPort);
    assert.ok(randomPort > 0);
    assert.equal((await httpGet(randomPort, '/hostname')).trim().length, 12);

    await ok(d, ['run', '-d', '--name', 'pub3', '--expose', '80', '-P', image, 'httpd', '-f', '-p', '80', '-h', '/etc']);
    const p3 = (await d.request('GET', '/containers/pub3/json')).json().NetworkSettings.Ports['80/tcp'];
    assert.ok(Number(p3[0].HostPort) > 0);
    assert.equal((await httpGet(Number(p3[0].HostPort), '/hostname')).trim().length, 12);

    const taken = await d.docker(['run', '-d', '--name', 'pub4', '-p', `127.0.0.1:${free}:80`, image, 'sleep', '30']);
    assert.notEqual(taken.code, 0);
    assert.match(taken.stderr, new RegExp(`${free}.*(already allocated|in use)`));

    // udp: Debian's busybox has no UDP server, so one runs inside the container's network namespace
    // from the host (nsenter + python3): it answers each datagram with "pong".
    await ok(d, ['run', '-d', '--name', 'udp1', '-p', '127.0.0.1::5000/udp', image, 'sleep', '60']);
    const u = (await d.request('GET', '/containers/udp1/json')).json();
    const udpPort = Number(u.NetworkSettings.Ports['5000/udp'][0].HostPort);
    const { spawn } = await import('node:child_process');
    const server = spawn('nsenter', [`--net=${u.NetworkSettings.SandboxKey}`, 'python3', '-c',
      "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('0.0.0.0', 5000))\nprint('ready', flush=True)\nd,a=s.recvfrom(100)\ns.sendto(b'pong', a)\n"], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => server.stdout!.once('data', () => resolve()));
    const dgram = await import('node:dgram');
    const sock = dgram.createSocket('udp4');
    const reply = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no udp reply')), 8000);
      sock.once('message', (m) => {
        clearTimeout(t);
        resolve(m.toString());
      });
      sock.send('ping', udpPort, '127.0.0.1');
    });
    sock.close();
    server.kill();
    assert.equal(reply, 'pong');
    await ok(d, ['rm', '-f', 'pub1', 'pub2', 'pub3', 'udp1']);
    await d.docker(['rm', '-f', 'pub4']);
  });

  it('host, none and container: modes', async () => {
    const d = daemon();
    const hostName = execFileSync('hostname', { encoding: 'utf8' }).trim();
    assert.equal((await ok(d, ['run', '--rm', '--network', 'host', image, 'hostname'])).trim(), hostName);
    assert.equal((await ok(d, ['run', '--rm', '--network', 'none', image, 'ls', '/sys/class/net'])).trim(), 'lo');
    // Loopback is up (IFF_UP|IFF_LOOPBACK), whether its namespace was made ahead or at the start.
    for (let i = 0; i < 4; i++) assert.equal((await ok(d, ['run', '--rm', '--network', 'none', image, 'cat', '/sys/class/net/lo/flags'])).trim(), '0x9');
    const a = (await ok(d, ['run', '-d', '--name', 'shared', image, 'httpd', '-f', '-p', '8080', '-h', '/etc'])).trim();
    const viaLocal = await ok(d, ['run', '--rm', '--network', `container:${a}`, image, 'wget', '-q', '-O-', 'http://127.0.0.1:8080/hostname']);
    assert.equal(viaLocal.trim(), a.slice(0, 12));
    await ok(d, ['rm', '-f', 'shared']);
  });

  it('leaves no device or rule behind when networks and containers go', async () => {
    const d = daemon();
    await ok(d, ['network', 'create', 'tmpnet']);
    const net = (await d.request('GET', '/networks/tmpnet')).json();
    const gateway = net.IPAM.Config[0].Gateway as string;
    // The network's bridge is the device holding its gateway address; the container's veth is its port.
    const addrs = JSON.parse(execFileSync('ip', ['-j', 'addr', 'show'], { encoding: 'utf8' })) as { ifname: string; addr_info: { local: string }[] }[];
    const bridge = addrs.find((a) => a.addr_info.some((i) => i.local === gateway))!.ifname;
    const ports = () => (JSON.parse(execFileSync('ip', ['-j', 'link', 'show', 'master', bridge], { encoding: 'utf8' }) || '[]') as unknown[]).length;
    await ok(d, ['run', '-d', '--name', 'tmpc', '--network', 'tmpnet', '-p', '127.0.0.1::80', image, 'sleep', '60']);
    assert.equal(ports(), 1, 'the container has a veth on the bridge');
    await ok(d, ['rm', '-f', 'tmpc']);
    // The veth goes with the container's namespace, which the kernel frees in the background.
    for (let i = 0; i < 100 && ports() > 0; i++) await sleep(20);
    assert.equal(ports(), 0, 'the veth is gone');
    await ok(d, ['network', 'rm', 'tmpnet']);
    assert.ok(!links().includes(bridge), 'the bridge is gone');
    const rules = execFileSync('nft', ['list', 'ruleset'], { encoding: 'utf8' });
    assert.ok(!rules.includes(bridge), 'no rule mentions the bridge');
  });

  it('refuses a bridge name the host already has, and leaves that device alone', async () => {
    const r = await daemon().request('POST', '/networks/create', { body: { Name: 'takenbr', Options: { 'com.docker.network.bridge.name': 'lo' } } });
    assert.equal(r.status, 409, r.text());
    assert.match(r.json().message, /a network interface named lo already exists on the host/);
    assert.ok(links().includes('lo'));
    assert.equal((await daemon().request('GET', '/networks/takenbr')).status, 404);
  });
});
