/**
 * The `ingress` network object of a swarm, as dockerd shows and guards it: made by `swarm init`
 * (overlay, scope swarm, Ingress true, VXLAN id 4096, its own subnet of the pool, the node as its
 * peer), kept while a service publishes a port through the routing mesh, removable otherwise, one
 * user-made `--ingress` network at most in its place, spared by `network prune`, gone with `swarm leave`
 * (as every overlay network).
 * A service publishing a port gets a VIP on it and its tasks an address on it; without an ingress
 * network such a service is refused, as dockerd refuses it.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { useDaemonWithBusybox } from '../harness/busybox-daemon.js';
import { readFileSync } from 'node:fs';
import { runTool } from '../../src/network/run-tool.js';
import { eventually, runningTasks } from './support.js';

interface WireNetwork {
  Id: string;
  Name: string;
  Driver: string;
  Scope: string;
  Ingress: boolean;
  Attachable: boolean;
  IPAM: { Config: { Subnet: string; Gateway: string }[] };
  Options: Record<string, string>;
  Peers?: { Name: string; IP: string }[];
}

describe('the ingress network', () => {
  const { daemon, image: busybox } = useDaemonWithBusybox();
  let image = '';
  before(() => (image = busybox()));
  after(async () => {
    await daemon().docker(['service', 'rm', 'ingsvc']);
    await daemon().docker(['network', 'rm', 'ovx']);
    await daemon().docker(['swarm', 'leave', '--force']);
  });

  const inspect = async (name: string) => {
    const r = await daemon().docker(['network', 'inspect', name]);
    assert.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as WireNetwork[])[0]!;
  };
  const overlays = async () => (await daemon().docker(['network', 'ls', '--filter', 'driver=overlay', '--format', '{{.Name}} {{.Scope}}'])).stdout.trim().split('\n').filter(Boolean).sort();

  it('swarm init makes it: overlay, swarm scope, Ingress, VXLAN id 4096, its subnet, this node as peer', async () => {
    const d = daemon();
    const init = await d.docker(['swarm', 'init', '--advertise-addr', '127.0.0.1', '--listen-addr', '127.0.0.1:0']);
    assert.equal(init.code, 0, init.stderr);
    assert.deepEqual(await overlays(), ['ingress swarm']);
    const n = await inspect('ingress');
    assert.equal(n.Driver, 'overlay');
    assert.equal(n.Scope, 'swarm');
    assert.equal(n.Ingress, true);
    assert.equal(n.Attachable, false);
    assert.equal(n.Options['com.docker.network.driver.overlay.vxlanid_list'], '4096');
    assert.match(n.IPAM.Config[0]!.Subnet, /^10\.\d+\.\d+\.0\/24$/, 'cut from the default pool 10.0.0.0/8');
    assert.deepEqual(n.Peers?.map((p) => p.IP), ['127.0.0.1']);
    // A user's overlay network gets another subnet and is no ingress.
    assert.equal((await d.docker(['network', 'create', '-d', 'overlay', 'ovx'])).code, 0);
    const ovx = await inspect('ovx');
    assert.notEqual(ovx.IPAM.Config[0]!.Subnet, n.IPAM.Config[0]!.Subnet);
    assert.equal(ovx.Ingress, false);
    assert.equal((await d.request('GET', `/networks/${n.Id}`)).json<WireNetwork>().Name, 'ingress');
  });

  it('a second --ingress network is refused; a service publishing a port keeps it; without one it goes and a user-made one takes its place', async () => {
    const d = daemon();
    const ingressId = (await inspect('ingress')).Id;
    const again = await d.docker(['network', 'create', '-d', 'overlay', '--ingress', 'another']);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, new RegExp(`ingress network \\(${ingressId}\\) is already present`));

    const port = randomInt(20_000, 30_000);
    const svc = await d.docker(['service', 'create', '-d', '--name', 'ingsvc', '-p', `${port}:80`, image, 'sleep', '600']);
    assert.equal(svc.code, 0, svc.stderr);
    const serviceId = svc.stdout.trim();
    // dockerd's shape: the ingress VIP first in Endpoint.VirtualIPs, the task attached to ingress.
    const vips = (await d.request('GET', `/services/${serviceId}`)).json<{ Endpoint: { VirtualIPs?: { NetworkID: string; Addr: string }[] } }>().Endpoint.VirtualIPs ?? [];
    assert.equal(vips[0]?.NetworkID, ingressId, JSON.stringify(vips));
    const subnet = (await inspect('ingress')).IPAM.Config[0]!.Subnet;
    const prefix = subnet.split('.').slice(0, 3).join('.') + '.';
    assert.ok(vips[0]!.Addr.startsWith(prefix) && vips[0]!.Addr.endsWith('/24'), vips[0]!.Addr);
    const [task] = await runningTasks(d, 'ingsvc', 1);
    const attachment = (await d.request('GET', `/tasks/${task!.ID}`)).json<{ NetworksAttachments?: { Network: { ID: string }; Addresses: string[] }[] }>().NetworksAttachments?.find((a) => a.Network.ID === ingressId);
    assert.ok(attachment?.Addresses[0]?.startsWith(prefix), JSON.stringify(attachment));
    assert.notEqual(attachment!.Addresses[0], vips[0]!.Addr);
    // Ingress carries published ports, not names: the service's name is not resolved there.
    const lookup = await d.docker(['exec', task!.Status.ContainerStatus!.ContainerID, 'nslookup', 'ingsvc']);
    assert.doesNotMatch(lookup.stdout, new RegExp(vips[0]!.Addr.split('/')[0]!.replace(/\./g, '\\.')), lookup.stdout);
    // The CLI asks before it removes the routing mesh's network.
    const refused = await d.docker(['network', 'rm', 'ingress'], { input: 'y\n' });
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, new RegExp(`ingress network cannot be removed because service ${serviceId} depends on it`));
    const api = await d.request('DELETE', '/networks/ingress');
    assert.equal(api.status, 400);
    assert.deepEqual((await overlays()).filter((x) => x.startsWith('ingress')), ['ingress swarm']);

    const update = await d.docker(['service', 'update', '-d', '--publish-rm', `${port}:80`, 'ingsvc']);
    assert.equal(update.code, 0, update.stderr);
    // Once the task that was on it has been replaced.
    await eventually('the ingress network removed', async () => (await d.docker(['network', 'rm', 'ingress'], { input: 'y\n' })).code === 0);
    assert.deepEqual(await overlays(), ['ovx swarm']);

    // Without an ingress network, publishing a port through the mesh is refused (dockerd's 400 and text).
    const noIngress = /service needs ingress network, but no ingress network is present/;
    const refusedCreate = await d.docker(['service', 'create', '-d', '--name', 'nomesh', '-p', `${port}:80`, image, 'sleep', '600']);
    assert.notEqual(refusedCreate.code, 0);
    assert.match(refusedCreate.stderr, noIngress);
    const apiCreate = await d.request('POST', '/services/create', { body: { Name: 'nomesh', TaskTemplate: { ContainerSpec: { Image: image } }, EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: port }] } } });
    assert.equal(apiCreate.status, 400);
    assert.match(apiCreate.json<{ message: string }>().message, noIngress);
    const refusedUpdate = await d.docker(['service', 'update', '-d', '--publish-add', `${port}:80`, 'ingsvc']);
    assert.notEqual(refusedUpdate.code, 0);
    assert.match(refusedUpdate.stderr, noIngress);
    // Host-mode ports need no ingress network.
    const hostMode = await d.docker(['service', 'create', '-d', '--name', 'hostmode', '-p', `mode=host,target=80,published=${port}`, image, 'sleep', '600']);
    assert.equal(hostMode.code, 0, hostMode.stderr);
    assert.equal((await d.docker(['service', 'rm', 'hostmode'])).code, 0);

    const mine = await d.docker(['network', 'create', '-d', 'overlay', '--ingress', 'my-ingress']);
    assert.equal(mine.code, 0, mine.stderr);
    const n = await inspect('my-ingress');
    assert.equal(n.Ingress, true);
    assert.equal(n.Options['com.docker.network.driver.overlay.vxlanid_list'], '4096');
    // Pruning spares it, unused as it is.
    assert.equal((await d.docker(['network', 'prune', '-f'])).code, 0);
    assert.ok((await overlays()).includes('my-ingress swarm'));
  });

  it('swarm leave takes the ingress network with it, and the routing mesh\'s rules', async () => {
    const d = daemon();
    await d.docker(['service', 'rm', 'ingsvc']);
    // A port published through my-ingress: its rules are in the daemon's `ip <prefix>` table.
    const port = randomInt(20_000, 30_000);
    const svc = await d.docker(['service', 'create', '-d', '--name', 'meshsvc', '-p', `${port}:80`, image, 'sleep', '600']);
    assert.equal(svc.code, 0, svc.stderr);
    await runningTasks(d, 'meshsvc', 1);
    const args = readFileSync(`/proc/${d.pid}/cmdline`, 'utf8').split('\0');
    const table = ['list', 'table', 'ip', args[args.indexOf('--network-prefix') + 1]!];
    await eventually('the mesh rules', async () => (await runTool('nft', table).catch(() => '')).includes(`dport ${port}`));
    const leave = await d.docker(['swarm', 'leave', '--force']);
    assert.equal(leave.code, 0, leave.stderr);
    await assert.rejects(runTool('nft', table), 'the table is gone');
    const names = (await d.docker(['network', 'ls', '--format', '{{.Name}}'])).stdout.split('\n');
    assert.ok(!names.includes('my-ingress') && !names.includes('ingress'), names.join(' '));
    // The other overlay networks leave this node too, as with dockerd.
    assert.deepEqual(await overlays(), []);
  });
});
