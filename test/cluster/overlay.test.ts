/**
 * Overlay networking across three berthd nodes, each in its own network namespace (test/cluster's
 * harness): a service on an overlay network is reachable by name (its VIP) from a task on another
 * node, `tasks.<name>` resolves every task whichever node runs it, so does a task's own name, and the port it publishes
 * answers on every node, reaching tasks on the other nodes too.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { useCluster } from './harness.js';
import { runningTasks } from '../swarm/support.js';
import { eventually, formSwarm, httpGet as get, nodesOf } from './support.js';

const SERVE = 'mkdir -p /www && echo "hello from $HOSTNAME" > /www/index.html && exec httpd -f -p 8000 -h /www';
/** n GETs of http://<host>:8000/ from inside a container, one body line each. */
const gets = (host: string, n: number) => `for i in $(seq ${n}); do printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${host} 8000 | tail -n 1; done`;

async function ok(d: TestDaemon, args: string[]): Promise<string> {
  const r = await d.docker(args, { timeoutMs: 60_000 });
  assert.equal(r.code, 0, `docker ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

describe('overlay networks across nodes', () => {
  const reg = useSeededRegistry('open');
  const cluster = useCluster(3, reg);
  after(async () => {
    const c = cluster();
    await c.node(1).daemon.docker(['service', 'rm', 'web', 'probe']).catch(() => undefined);
  });

  it('names, the VIP and the published port work from and on every node', async () => {
    const c = cluster();
    const [m, w2] = [c.node(1).daemon, c.node(2).daemon];
    // Node 2 is a second manager: it lists the network created on node 1 and may name it.
    const { nodeIds } = await formSwarm(c, 2);
    const node2 = nodeIds[1]!;
    await eventually('three ready nodes', async () => (await nodesOf(m)).filter((n) => n.Status.State === 'ready').length === 3, 90_000);

    await ok(m, ['network', 'create', '-d', 'overlay', 'ovl']);
    const overlaysOn = async (d: TestDaemon) => (await ok(d, ['network', 'ls', '--filter', 'driver=overlay', '--format', '{{.Name}}'])).split('\n').filter(Boolean);
    await eventually('node 2 lists the network', async () => (await overlaysOn(w2)).includes('ovl'), 30_000);
    const published = randomInt(20_000, 30_000);
    await ok(m, ['service', 'create', '-d', '--name', 'web', '--replicas', '3', '--hostname', 'web-{{.Task.Slot}}', '--network', 'ovl', '-p', `${published}:8000`, c.image, 'sh', '-c', SERVE]);
    const tasks = await runningTasks(m, 'web', 3, 120_000);
    const spread = new Set(tasks.map((t) => t.NodeID));
    assert.equal(spread.size, 3, 'one task per node');

    // A task on node 2 asks for the service by name.
    await ok(w2, ['service', 'create', '-d', '--name', 'probe', '--network', 'ovl', '--constraint', `node.id==${node2}`, c.image, 'sleep', '600']);
    const [probe] = await runningTasks(m, 'probe', 1, 120_000);
    assert.equal(probe!.NodeID, node2);
    const probeContainer = probe!.Status.ContainerStatus!.ContainerID;
    const inProbe = (script: string) => w2.docker(['exec', probeContainer, 'sh', '-c', script], { timeoutMs: 60_000 });

    // The ingress VIP comes first (the service publishes a port), then ovl's.
    const ovlId = (await m.request('GET', '/networks/ovl')).json().Id as string;
    const ingressId = (await m.request('GET', '/networks/ingress')).json().Id as string;
    const vips = (await m.request('GET', '/services/web')).json().Endpoint.VirtualIPs as { NetworkID: string; Addr: string }[];
    assert.deepEqual(vips.map((v) => v.NetworkID), [ingressId, ovlId]);
    const vip = vips[1]!.Addr.split('/')[0];
    const attachments = await Promise.all(tasks.map(async (t) => (await m.request('GET', `/tasks/${t.ID}`)).json().NetworksAttachments as { Network: { ID: string }; Addresses: string[] }[]));
    const taskIps = attachments.map((a) => a.find((x) => x.Network.ID === ovlId)!.Addresses[0]!.split('/')[0]!);
    // On ingress too, listed first as dockerd lists it; the container's own network stays ovl.
    assert.ok(attachments.every((a) => a.map((x) => x.Network.ID).join() === [ingressId, ovlId].join()), JSON.stringify(attachments));
    const onNode1 = tasks.find((t) => t.NodeID === nodeIds[0])!;
    assert.equal((await m.request('GET', `/containers/${onNode1.Status.ContainerStatus!.ContainerID}/json`)).json().HostConfig.NetworkMode, 'ovl');
    const resolved = async (name: string) =>
      [...new Set([...(await inProbe(`nslookup ${name}`)).stdout.matchAll(/Address(?: \d+)?:\s+(\d+\.\d+\.\d+\.\d+)/g)].map((x) => x[1]!))].filter((a) => a !== '127.0.0.11').sort().join();
    await eventually('web resolves to its VIP on node 2', async () => (await resolved('web')) === vip, 60_000);
    await eventually('tasks.web resolves to all three tasks on node 2', async () => (await resolved('tasks.web')) === [...taskIps].sort().join(), 60_000);
    // A task's own name (its container's, `<service>.<slot>.<task id>`) too, for a task on another node.
    const k1 = tasks.findIndex((t) => t.NodeID === nodeIds[0]);
    const taskName = `web.${tasks[k1]!.Slot}.${tasks[k1]!.ID}`;
    await eventually(`${taskName} (on node 1) resolves on node 2`, async () => (await resolved(taskName)) === taskIps[k1], 60_000);
    const viaVip = await eventually('the VIP reaches the tasks on all three nodes', async () => {
      const r = await inProbe(gets('web', 9));
      const seen = new Set(r.stdout.trim().split('\n').filter(Boolean));
      return seen.size === 3 ? seen : undefined;
    }, 60_000);
    assert.deepEqual([...viaVip].sort(), ['hello from web-1', 'hello from web-2', 'hello from web-3']);

    // The published port answers on every node and reaches tasks beyond that node.
    for (const n of c.nodes) {
      const seen = await eventually(`port ${published} on node ${n.index} reaching every task`, async () => {
        const answers = new Set<string>();
        for (let i = 0; i < 9; i++) answers.add(await get(n.addr, published));
        return answers.size === 3 ? answers : undefined;
      }, 60_000);
      assert.deepEqual([...seen].sort(), ['hello from web-1', 'hello from web-2', 'hello from web-3']);
    }

    // An attachable network: a plain container on a worker joins it and reaches the task on node 1.
    await ok(m, ['network', 'create', '-d', 'overlay', '--attachable', 'ovla']);
    await ok(m, ['service', 'create', '-d', '--name', 'peer', '--hostname', 'peer', '--network', 'ovla', '--constraint', `node.id==${nodeIds[0]}`, c.image, 'sh', '-c', SERVE]);
    await runningTasks(m, 'peer', 1, 120_000);
    const w3 = c.node(3).daemon;
    await eventually('the worker knows the attachable network', async () => (await overlaysOn(w3)).includes('ovla'), 30_000);
    let lastTry = '';
    const fromWorker = await eventually('a container on the worker reaches the service by name', async () => {
      const r = await w3.docker(['run', '--rm', '--network', 'ovla', c.image, 'sh', '-c', `nslookup peer; ${gets('peer', 1)}`], { timeoutMs: 60_000 });
      lastTry = `exit ${r.code}\n${r.stdout}\n${r.stderr}`;
      return r.stdout.includes('hello from peer') ? r.stdout.slice(r.stdout.indexOf('hello from peer')).trim() : undefined;
    }, 60_000).catch((err) => {
      throw new Error(`${(err as Error).message}\nlast try: ${lastTry}\nnode 3:\n${w3.logTail(40)}`);
    });
    assert.equal(fromWorker, 'hello from peer');
    // Once the names are known, every short-lived container reaches the VIP at once: its namespace
    // gets the VIP rules before its process starts, not after.
    for (let i = 0; i < 3; i++) {
      const r = await w3.docker(['run', '--rm', '--network', 'ovla', c.image, 'sh', '-c', gets('peer', 1)], { timeoutMs: 60_000 });
      assert.equal(r.stdout.trim(), 'hello from peer', `short-lived container ${i + 1}: exit ${r.code} ${r.stderr}`);
    }
    // The address node 3 gave its container is not given out on node 2.
    const att = await ok(w3, ['run', '-d', '--network', 'ovla', c.image, 'sleep', '300']);
    const held = (await w3.request('GET', `/containers/${att}/json`)).json().NetworkSettings.Networks.ovla.IPAddress as string;
    await eventually(`node 2 refuses ${held}, held on node 3`, async () => {
      const r = await w2.docker(['run', '--rm', '--network', 'ovla', '--ip', held, c.image, 'true'], { timeoutMs: 60_000 });
      return r.code !== 0 && /already in use/.test(r.stderr);
    }, 30_000);
    const other = await ok(w2, ['run', '--rm', '--network', 'ovla', c.image, 'sh', '-c', "ip -4 -o addr show eth0 | awk '{print $4}'"]);
    assert.notEqual(other.split('/')[0], held);
    await ok(w3, ['rm', '-f', att]);
    await ok(m, ['service', 'rm', 'peer']);

    // Removed on node 1 once its services are gone: node 2 drops its copy too.
    await ok(m, ['service', 'rm', 'web', 'probe']);
    await eventually('the network removed on node 1', async () => (await m.docker(['network', 'rm', 'ovl'])).code === 0, 60_000);
    await eventually('node 2 drops the network', async () => !(await overlaysOn(w2)).includes('ovl'), 60_000);
  });
});
