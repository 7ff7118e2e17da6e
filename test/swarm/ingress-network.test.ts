/**
 * The `ingress` network object of a swarm, as dockerd shows and guards it: made by `swarm init`
 * (overlay, scope swarm, Ingress true, VXLAN id 4096, its own subnet of the pool, the node as its
 * peer), kept while a service publishes a port through the routing mesh, removable otherwise, one
 * user-made `--ingress` network at most in its place, spared by `network prune`, gone with `swarm leave`.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { useDaemonWithBusybox } from '../harness/busybox-daemon.js';

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
    // The CLI asks before it removes the routing mesh's network.
    const refused = await d.docker(['network', 'rm', 'ingress'], { input: 'y\n' });
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, new RegExp(`ingress network cannot be removed because service ${serviceId} depends on it`));
    const api = await d.request('DELETE', '/networks/ingress');
    assert.equal(api.status, 400);
    assert.deepEqual((await overlays()).filter((x) => x.startsWith('ingress')), ['ingress swarm']);

    const update = await d.docker(['service', 'update', '-d', '--publish-rm', `${port}:80`, 'ingsvc']);
    assert.equal(update.code, 0, update.stderr);
    const removed = await d.docker(['network', 'rm', 'ingress'], { input: 'y\n' });
    assert.equal(removed.code, 0, removed.stderr);
    assert.deepEqual(await overlays(), ['ovx swarm']);

    const mine = await d.docker(['network', 'create', '-d', 'overlay', '--ingress', 'my-ingress']);
    assert.equal(mine.code, 0, mine.stderr);
    const n = await inspect('my-ingress');
    assert.equal(n.Ingress, true);
    assert.equal(n.Options['com.docker.network.driver.overlay.vxlanid_list'], '4096');
    // Pruning spares it, unused as it is.
    assert.equal((await d.docker(['network', 'prune', '-f'])).code, 0);
    assert.ok((await overlays()).includes('my-ingress swarm'));
  });

  it('swarm leave takes the ingress network with it', async () => {
    const d = daemon();
    await d.docker(['service', 'rm', 'ingsvc']);
    const leave = await d.docker(['swarm', 'leave', '--force']);
    assert.equal(leave.code, 0, leave.stderr);
    const names = (await d.docker(['network', 'ls', '--format', '{{.Name}}'])).stdout.split('\n');
    assert.ok(!names.includes('my-ingress') && !names.includes('ingress'), names.join(' '));
  });
});
