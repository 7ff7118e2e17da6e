/**
 * Published service ports reach the service's tasks from 127.0.0.1. This needs task containers with
 * routable addresses (container networking): without them the test says so and skips.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { freePort, useDaemon, useSeededRegistry } from '../harness/index.js';
import { eventually, inspectService, runningTasks } from './support.js';

function get(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      let body = '';
      res.on('data', (b) => (body += b));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('swarm published ports', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  after(async () => {
    await daemon().request('POST', '/swarm/leave?force=1').catch(() => undefined);
  });

  it('an ingress port spreads requests over the tasks of the service; a host-mode port is the task container binding', async (t) => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    assert.equal((await d.request('POST', '/swarm/init', { body: { ListenAddr: '127.0.0.1:0', AdvertiseAddr: '127.0.0.1' } })).status, 200);
    const serve = 'mkdir -p /www && echo "hello from $HOSTNAME" > /www/index.html && exec httpd -f -p 8000 -h /www';
    // A free port rather than one from the dynamic range, which other daemons under test may hold.
    const published = await freePort();
    const create = await d.docker(['service', 'create', '-d', '--name', 'http', '--replicas', '2', '--hostname', '{{.Task.Slot}}', '-p', `${published}:8000`, image, 'sh', '-c', serve]);
    assert.equal(create.code, 0, create.stderr);
    const tasks = await runningTasks(d, 'http', 2);
    const c = (await d.request('GET', `/containers/${tasks[0]!.Status.ContainerStatus!.ContainerID}/json`)).json();
    const ip = Object.values<{ IPAddress?: string }>(c.NetworkSettings?.Networks ?? {}).find((n) => n.IPAddress)?.IPAddress;
    if (!ip) {
      t.skip('task containers have no routable address yet (container networking is not wired into berthd)');
      return;
    }
    const port = (await inspectService(d, 'http')).Endpoint.Ports[0].PublishedPort;
    assert.equal(port, published);
    const seen = await eventually('answers from both tasks', async () => {
      const answers = new Set<string>();
      for (let i = 0; i < 6; i++) answers.add((await get(port)).trim());
      return answers.size === 2 ? answers : undefined;
    });
    assert.deepEqual([...seen].sort(), ['hello from 1', 'hello from 2']);

    // Host mode: the task container's own port binding, shown in the task's PortStatus.
    const hostPort = await freePort();
    const host = await d.docker(['service', 'create', '-d', '--name', 'direct', '--hostname', 'direct', '-p', `mode=host,target=8000,published=${hostPort}`, image, 'sh', '-c', serve]);
    assert.equal(host.code, 0, host.stderr);
    const [task] = await runningTasks(d, 'direct', 1);
    assert.deepEqual((task!.Status as { PortStatus?: unknown }).PortStatus, { Ports: [{ Protocol: 'tcp', TargetPort: 8000, PublishedPort: hostPort, PublishMode: 'host' }] });
    assert.equal((await eventually('an answer on the host port', () => get(hostPort).catch(() => undefined))).trim(), 'hello from direct');
  });
});
