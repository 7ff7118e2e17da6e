/**
 * The routing mesh across three berthd nodes (test/cluster's harness): a port a service publishes,
 * TCP and UDP, answers on every node's address (from the test bridge) and on each node's loopback,
 * reaching the tasks on every node; it keeps answering on a node while that node's berthd is killed
 * -9 and restarted (the kernel carries it, not berthd); it follows the tasks, leaves a node that
 * leaves the swarm (which gives its address on ingress back), and goes with the service on every node.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { randomInt } from 'node:crypto';
import { useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { runTool } from '../../src/network/run-tool.js';
import { useCluster } from './harness.js';
import { runningTasks } from '../swarm/support.js';
import { eventually, formSwarm, httpGet as get, nodesOf } from './support.js';

/**
 * Each task serves its hostname over HTTP (busybox httpd, TCP 8000) and over UDP 9000: busybox has
 * no UDP server, so the task runs the host's node (the host's root mounted read-only, chrooted into).
 */
const UDP_SERVER = "const s = require('dgram').createSocket('udp4'); s.on('message', (m, r) => s.send('udp from ' + require('os').hostname(), r.port, r.address)); s.bind(9000);";
const SERVE = `mkdir -p /www && echo "hello from $HOSTNAME" > /www/index.html && httpd -p 8000 -h /www && exec chroot /host ${process.execPath} -e "$UDP_SERVER"`;

const GET_SCRIPT = "const r = require('http').get(process.argv[1], { timeout: 5000 }, (res) => { let b = ''; res.on('data', (d) => (b += d)); res.on('end', () => console.log(b.trim())); }); r.on('timeout', () => r.destroy(new Error('timeout'))); r.on('error', (e) => { console.error(e.message); process.exit(1); });";

/** One datagram from a new socket (so a new conntrack entry, balanced anew) and its answer, or an error after 3 s. */
function ask(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = createSocket('udp4');
    const timer = setTimeout(() => {
      s.close();
      reject(new Error(`no UDP answer from ${host}:${port}`));
    }, 3000);
    s.on('message', (m) => {
      clearTimeout(timer);
      s.close();
      resolve(m.toString().trim());
    });
    s.send('hi', port, host);
  });
}

async function ok(d: TestDaemon, args: string[]): Promise<string> {
  const r = await d.docker(args, { timeoutMs: 60_000 });
  assert.equal(r.code, 0, `docker ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

/** The distinct answers of n tries, once they are `want` (bounded wait). */
async function reaches(what: string, once: () => Promise<string>, want: string[], timeoutMs = 60_000): Promise<void> {
  let last: string[] = [];
  await eventually(what, async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 3 * want.length; i++) seen.add(await once().catch((err: Error) => `error: ${err.message}`));
    last = [...seen].sort();
    return last.join() === want.join();
  }, timeoutMs).catch((err: Error) => {
    throw new Error(`${err.message}; seen: ${last.join(' | ')}`);
  });
}

describe('the routing mesh across nodes', () => {
  const reg = useSeededRegistry('open');
  const cluster = useCluster(3, reg);
  after(async () => {
    await cluster().node(1).daemon.docker(['service', 'rm', 'mesh']).catch(() => undefined);
  });

  it('TCP and UDP on every node and its loopback, through a kill -9 and restart of a node\'s berthd, gone with the service', async () => {
    const c = cluster();
    const m = c.node(1).daemon;
    const { workerToken } = await formSwarm(c, 1);
    await eventually('three ready nodes', async () => (await nodesOf(m)).filter((n) => n.Status.State === 'ready').length === 3, 90_000);
    const port = randomInt(20_000, 30_000);
    await ok(m, ['service', 'create', '-d', '--name', 'mesh', '--replicas', '3', '--hostname', 'mesh-{{.Task.Slot}}',
      '--mount', 'type=bind,source=/,target=/host,readonly', '--env', `UDP_SERVER=${UDP_SERVER}`,
      '-p', `${port}:8000`, '-p', `published=${port},target=9000,protocol=udp`, c.image, 'sh', '-c', SERVE]);
    const tasks = await runningTasks(m, 'mesh', 3, 120_000);
    assert.equal(new Set(tasks.map((t) => t.NodeID)).size, 3, 'one task per node');
    const http = ['hello from mesh-1', 'hello from mesh-2', 'hello from mesh-3'];
    const udp = ['udp from mesh-1', 'udp from mesh-2', 'udp from mesh-3'];
    /** A GET from inside node i's namespace (its loopback), by the host's node, bounded to 5 s. */
    const inNode = (i: number, url: string) =>
      runTool('ip', ['netns', 'exec', c.net.netns(i), process.execPath, '-e', GET_SCRIPT, url], { timeoutMs: 15_000 }).then((s) => s.trim());

    for (const n of c.nodes) {
      await reaches(`TCP ${port} on node ${n.index}`, () => get(n.addr, port), http);
      await reaches(`UDP ${port} on node ${n.index}`, () => ask(n.addr, port), udp);
      await reaches(`127.0.0.1:${port} inside node ${n.index}`, () => inNode(n.index, `http://127.0.0.1:${port}/`), http);
    }

    // Node 3's berthd dies: its containers live on, and so does the mesh on node 3.
    const n3 = c.node(3);
    await n3.daemon.kill9();
    await reaches(`TCP ${port} on node 3 while its berthd is down`, () => get(n3.addr, port), http, 20_000);
    await reaches(`UDP ${port} on node 3 while its berthd is down`, () => ask(n3.addr, port), udp, 20_000);
    // And while it starts again, every request in a row is answered (no moment without the rules).
    let probing = true;
    const failures: string[] = [];
    const prober = (async () => {
      for (let i = 0; probing && i < 2000; i++) {
        await get(n3.addr, port).catch((err: Error) => failures.push(err.message));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    await n3.daemon.restart().finally(() => (probing = false));
    await prober;
    assert.deepEqual(failures, [], 'requests to node 3 failed while its berthd restarted');
    await reaches(`TCP ${port} on node 3 after its restart`, () => get(n3.addr, port), http);
    await reaches(`loopback on node 3 after its restart`, () => inNode(3, `http://127.0.0.1:${port}/`), http);

    // The rules follow the tasks: scaled down to one, every node reaches only that one.
    await ok(m, ['service', 'scale', '-d', 'mesh=1']);
    for (const n of c.nodes) {
      await reaches(`TCP ${port} on node ${n.index} after scaling to 1`, () => get(n.addr, port), ['hello from mesh-1']).catch(async (err: Error) => {
        const rules = await runTool('ip', ['netns', 'exec', c.net.netns(n.index), 'nft', 'list', 'ruleset']).catch((e) => String(e));
        throw new Error(`${err.message}\n${rules}\n${n.daemon.logTail(400).split('\n').filter((l) => /warn|error|overlay|mesh|claim/i.test(l)).slice(-40).join('\n')}`);
      });
    }

    // Node 3 leaves: the mesh's rules and the overlay networks leave it, and its address on ingress
    // goes back to the cluster, so joining again it claims that same address (the lowest free) anew.
    const ingress = (await m.request('GET', '/networks/ingress')).json().IPAM.Config[0] as { Subnet: string; Gateway: string };
    const ingressAddrOf = async (i: number) => {
      const links = JSON.parse(await runTool('ip', ['-n', c.net.netns(i), '-j', '-4', 'addr', 'show'])) as { addr_info: { local: string; prefixlen: number }[] }[];
      const net = ingress.Subnet.split('.').slice(0, 3).join('.') + '.';
      return links.flatMap((l) => l.addr_info).map((a) => a.local).find((a) => a.startsWith(net) && a !== ingress.Gateway);
    };
    const before = await ingressAddrOf(3);
    assert.ok(before, 'node 3 has an address of its own on ingress');
    await ok(n3.daemon, ['swarm', 'leave']);
    assert.ok(!(await runTool('ip', ['netns', 'exec', c.net.netns(3), 'nft', 'list', 'tables'])).includes('table ip '), 'no mesh rules on node 3');
    assert.equal(await ok(n3.daemon, ['network', 'ls', '--filter', 'driver=overlay', '-q']), '');
    await ok(n3.daemon, ['swarm', 'join', '--token', workerToken, `${c.node(1).addr}:2377`]);
    await reaches(`TCP ${port} on node 3 after it joined again`, () => get(n3.addr, port), ['hello from mesh-1']).catch((err: Error) => {
      throw new Error(`${err.message}\n${n3.daemon.logTail(300).split('\n').filter((l) => !/"debug"/.test(l)).slice(-30).join('\n')}`);
    });
    assert.equal(await ingressAddrOf(3), before);

    // Gone with the service: no rules left on any node, the port refused everywhere.
    await ok(m, ['service', 'rm', 'mesh']);
    for (const n of c.nodes) {
      await eventually(`no mesh rules on node ${n.index}`, async () => !(await runTool('ip', ['netns', 'exec', c.net.netns(n.index), 'nft', 'list', 'tables'])).includes('table ip '), 30_000);
      await assert.rejects(get(n.addr, port));
    }
  });
});
