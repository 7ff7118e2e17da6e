/**
 * Services on an overlay network, on one node: the network's subnet comes from the swarm's address
 * pool with a VXLAN id and its vxlan device; each service gets a VIP and each task a static address,
 * both kept on the records (Endpoint.VirtualIPs, NetworksAttachments); the service name resolves to
 * the VIP and `tasks.<name>` to every task; connections to the VIP reach every task, and follow the
 * tasks when the service scales. (Across nodes: test/cluster once the cluster harness is merged.)
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { runTool } from '../../src/network/run-tool.js';
import { useDaemonWithBusybox } from '../harness/busybox-daemon.js';
import { eventually, inspectService, runningTasks } from './support.js';

const SERVE = 'mkdir -p /www && echo "hello from $HOSTNAME" > /www/index.html && exec httpd -f -p 8000 -h /www';
/** n GETs of http://web:8000/ from the probe, one body line each (nc: the fixture's static wget crashes on some hosts). */
const getWeb = (n: number) => `for i in $(seq ${n}); do printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 web 8000 | tail -n 1; done`;

function prefixOf(pid: number): string {
  const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  return args[args.indexOf('--network-prefix') + 1]!;
}

describe('overlay networks with services', () => {
  const { daemon, image: busybox } = useDaemonWithBusybox();
  let image = '';
  before(() => (image = busybox()));
  after(async () => {
    const d = daemon();
    await d.docker(['rm', '-f', 'ovprobe']);
    await d.docker(['service', 'rm', 'web', 'rr']);
    await eventually('task containers gone', async () => (await d.request('GET', '/containers/json?all=1&filters=' + encodeURIComponent('{"label":["com.docker.swarm.task"]}'))).json<unknown[]>().length === 0).catch(() => undefined);
    await d.docker(['network', 'rm', 'ovl']);
    await d.docker(['swarm', 'leave', '--force']);
  });

  it('services get a VIP, tasks static addresses; names and the VIP work from an attachable container', async () => {
    const d = daemon();
    // The kernel allows one vxlan device per VNI, source address and port: a loopback address of its
    // own keeps this daemon's apart from other test daemons' on this host.
    const addr = `127.${randomInt(1, 255)}.${randomInt(1, 255)}.${randomInt(2, 255)}`;
    const init = await d.docker(['swarm', 'init', '--advertise-addr', addr, '--listen-addr', `${addr}:0`]);
    assert.equal(init.code, 0, init.stderr);
    const created = await d.docker(['network', 'create', '-d', 'overlay', '--attachable', 'ovl']);
    assert.equal(created.code, 0, created.stderr);
    const net = (await d.request('GET', '/networks/ovl')).json();
    assert.equal(net.Driver, 'overlay');
    assert.equal(net.Scope, 'swarm');
    const subnet: string = net.IPAM.Config[0].Subnet;
    assert.match(subnet, /^10\.\d+\.\d+\.0\/24$/, 'cut from the default pool 10.0.0.0/8 in /24s');
    const vni = Number(net.Options['com.docker.network.driver.overlay.vxlanid_list']);
    assert.ok(vni >= 4097, `VNI ${vni}`);
    assert.equal(net.Options['com.docker.network.driver.mtu'], '1450');

    const svc = await d.docker(['service', 'create', '-d', '--name', 'web', '--replicas', '2', '--hostname', 'web-{{.Task.Slot}}', '--network', 'ovl', image, 'sh', '-c', SERVE]);
    assert.equal(svc.code, 0, svc.stderr);
    const tasks = await runningTasks(d, 'web', 2, 60_000);

    // Realised on the node with a task on it: a vxlan device with that VNI, the data path port and
    // the advertise address as source, on the network's bridge.
    const prefix = prefixOf(d.pid);
    const dev = await eventually('the vxlan device', async () => {
      const links = JSON.parse(await runTool('ip', ['-j', '-d', 'link', 'show', 'type', 'vxlan'])) as { ifname: string; master?: string; linkinfo: { info_data: { id: number; port: number; local: string } } }[];
      return links.find((l) => l.ifname.startsWith(prefix) && l.linkinfo.info_data.id === vni);
    });
    assert.equal(dev.linkinfo.info_data.port, 4789);
    assert.equal(dev.linkinfo.info_data.local, addr);
    assert.ok(dev.master?.startsWith(prefix), `on the network's bridge (${dev.master})`);
    const service = await inspectService(d, 'web');
    assert.equal(service.Endpoint.VirtualIPs.length, 1);
    assert.equal(service.Endpoint.VirtualIPs[0].NetworkID, net.Id);
    const vip: string = service.Endpoint.VirtualIPs[0].Addr.split('/')[0];
    assert.equal(service.Endpoint.VirtualIPs[0].Addr, `${vip}/24`);
    assert.equal(vip.split('.').slice(0, 3).join('.'), subnet.split('.').slice(0, 3).join('.'));

    // Each task's address is on its record and is the one its container got.
    const taskIps: string[] = [];
    for (const t of tasks) {
      const full = (await d.request('GET', `/tasks/${t.ID}`)).json();
      const att = full.NetworksAttachments;
      assert.equal(att.length, 1);
      assert.equal(att[0].Network.ID, net.Id);
      const ip = att[0].Addresses[0].split('/')[0];
      const c = (await d.request('GET', `/containers/${t.Status.ContainerStatus!.ContainerID}/json`)).json();
      assert.equal(c.NetworkSettings.Networks.ovl.IPAddress, ip);
      taskIps.push(ip);
    }
    assert.notEqual(taskIps[0], taskIps[1]);
    assert.ok(!taskIps.includes(vip));

    // From a plain container on the network: names, then the VIP spreading over both tasks.
    assert.equal((await d.docker(['run', '-d', '--name', 'ovprobe', '--network', 'ovl', image, 'sleep', '600'])).code, 0);
    const lookup = async (name: string) => {
      const r = await d.docker(['exec', 'ovprobe', 'nslookup', name]);
      return [...new Set([...r.stdout.matchAll(/Address(?: \d+)?:\s+(\d+\.\d+\.\d+\.\d+)/g)].map((m) => m[1]!))].filter((a) => a !== '127.0.0.11').sort();
    };
    assert.deepEqual(await eventually('web resolves to its VIP', async () => ((await lookup('web')).join() === vip ? [vip] : undefined)), [vip]);
    await eventually('tasks.web resolves to both tasks', async () => (await lookup('tasks.web')).join() === [...taskIps].sort().join());
    const seen = await eventually('answers from both tasks through the VIP', async () => {
      const r = await d.docker(['exec', 'ovprobe', 'sh', '-c', getWeb(4)]);
      const answers = new Set(r.stdout.trim().split('\n'));
      return answers.size === 2 ? answers : undefined;
    }, 30_000);
    assert.deepEqual([...seen].sort(), ['hello from web-1', 'hello from web-2']);

    // Scaled to 3: the new task is behind the VIP and under tasks.web too.
    assert.equal((await d.docker(['service', 'scale', '-d', 'web=3'])).code, 0);
    const three = await runningTasks(d, 'web', 3, 60_000);
    assert.equal(three.length, 3);
    await eventually('tasks.web resolves to three tasks', async () => (await lookup('tasks.web')).length === 3);
    await eventually('answers from all three tasks through the VIP', async () => {
      const r = await d.docker(['exec', 'ovprobe', 'sh', '-c', getWeb(6)]);
      return new Set(r.stdout.trim().split('\n')).size === 3;
    }, 30_000);

    // A restart of berthd: names and VIP rules are put back for the containers that kept running.
    await d.restart();
    await eventually('tasks.web resolves to three tasks after a restart', async () => (await lookup('tasks.web')).length === 3);
    await eventually('the VIP reaches all three tasks after a restart', async () => {
      const r = await d.docker(['exec', 'ovprobe', 'sh', '-c', getWeb(6)]);
      return new Set(r.stdout.trim().split('\n')).size === 3;
    }, 30_000);

    // dnsrr: no VIP; the service name answers with its task's address.
    assert.equal((await d.docker(['service', 'create', '-d', '--name', 'rr', '--endpoint-mode', 'dnsrr', '--network', 'ovl', image, 'sleep', '600'])).code, 0);
    const [rr] = await runningTasks(d, 'rr', 1, 60_000);
    assert.equal((await inspectService(d, 'rr')).Endpoint.VirtualIPs, undefined);
    const rrIp = (await d.request('GET', `/tasks/${rr!.ID}`)).json().NetworksAttachments[0].Addresses[0].split('/')[0];
    await eventually('rr resolves to its task', async () => (await lookup('rr')).join() === rrIp);

    // The network is in use by the service: it cannot go.
    const rm = await d.docker(['network', 'rm', 'ovl']);
    assert.notEqual(rm.code, 0);
    assert.match(rm.stderr, /in use by service/);
  });

  it('refuses a service on a network that is not an overlay, or that does not exist; and what overlays lack', async () => {
    const d = daemon();
    for (const extra of [['--opt', 'encrypted'], ['--ipv6']]) {
      const r = await d.docker(['network', 'create', '-d', 'overlay', ...extra, 'ovnot']);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /not supported by Berth yet/);
    }
    assert.equal((await d.docker(['network', 'create', 'ovlocal'])).code, 0);
    try {
      const local = await d.request('POST', '/services/create', { body: { Name: 'bad', TaskTemplate: { ContainerSpec: { Image: image }, Networks: [{ Target: 'ovlocal' }] } } });
      assert.equal(local.status, 400, local.text());
      assert.match(local.json<{ message: string }>().message, /not a swarm-scoped network/);
      const missing = await d.request('POST', '/services/create', { body: { Name: 'bad', TaskTemplate: { ContainerSpec: { Image: image }, Networks: [{ Target: 'nosuchnet' }] } } });
      assert.equal(missing.status, 404, missing.text());
    } finally {
      await d.docker(['network', 'rm', 'ovlocal']);
    }
  });
});
