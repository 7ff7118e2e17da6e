/**
 * Overlay plumbing against the real kernel, two "nodes" on one machine: each node is a network
 * namespace this test creates (joined by a veth pair, the underlay), with the overlay's bridge, its
 * vxlan device and the ARP guard; each "container" is a namespace on one node's bridge. Containers
 * on both nodes reach each other over VXLAN, the gateway stays each node's own, and a service VIP
 * balanced in the client's namespace reaches tasks on both nodes. Everything carries a per-run
 * prefix and goes in after(): processes by pid, namespaces by name.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { runTool } from '../../src/network/run-tool.js';
import { ensureVxlan, setVxlanPeers, syncArpGuard, vxlanName, vxlanPeers, type VxlanTools } from '../../src/network/vxlan-link.js';
import { applyVipRules } from '../../src/network/service-vip.js';

const run = `cn${randomBytes(3).toString('hex')}`;
const ns = (x: string) => `${run}-${x}`;
const created: string[] = [];
const processes: ChildProcess[] = [];
let dir = '';

const nodes = [
  { name: ns('n1'), underlay: '10.213.0.1', other: '10.213.0.2' },
  { name: ns('n2'), underlay: '10.213.0.2', other: '10.213.0.1' },
];
const GATEWAY = '10.77.0.1';
const VNI = 4100;
const MTU = 1450;
const tools = (node: string): VxlanTools => ({ ip: ['ip', '-n', node], bridge: ['bridge', '-n', node], nft: ['ip', 'netns', 'exec', node, 'nft'] });
const exec = (n: string, args: string[]) => runTool('ip', ['netns', 'exec', n, ...args]);

async function addNs(name: string): Promise<void> {
  await runTool('ip', ['netns', 'add', name]);
  created.push(name);
  await runTool('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
}

/** A container namespace on a node's bridge, with an address and the gateway as default route. */
async function addContainer(node: string, name: string, address: string): Promise<void> {
  await addNs(name);
  const host = `${name.slice(-2)}h${run.slice(2)}`;
  await runTool('ip', ['-n', node, 'link', 'add', host, 'mtu', String(MTU), 'type', 'veth', 'peer', 'name', 'eth0', 'mtu', String(MTU), 'netns', name]);
  await runTool('ip', ['-n', node, 'link', 'set', host, 'master', 'br0', 'up']);
  await runTool('ip', ['-n', name, '-batch', '-'], { input: `addr add ${address}/24 dev eth0\nlink set eth0 up\nroute add default via ${GATEWAY}\n` });
}

/** busybox httpd in a container namespace serving one page that names it. */
async function serve(name: string, page: string): Promise<void> {
  const root = join(dir, name);
  await mkdir(root, { recursive: true });
  await writeFile(join(root, 'index.html'), page);
  const p = spawn('ip', ['netns', 'exec', name, 'busybox', 'httpd', '-f', '-p', '8080', '-h', root], { stdio: 'ignore' });
  processes.push(p);
}

async function fetchPage(from: string, address: string): Promise<string> {
  // curl: the host's static busybox wget crashes resolving on some hosts.
  return exec(from, ['curl', '-sS', '-m', '3', `http://${address}:8080/`]);
}

/** Bounded: the kernel needs a moment (ARP across the tunnel, httpd binding). */
async function eventually<T>(what: string, fn: () => Promise<T>): Promise<T> {
  let last: unknown;
  for (let i = 0; i < 40; i++) {
    try {
      return await fn();
    } catch (err) {
      last = err;
      await sleep(250);
    }
  }
  throw new Error(`${what}: ${String(last)}`);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-vxlan-'));
  for (const n of nodes) await addNs(n.name);
  await runTool('ip', ['-n', nodes[0]!.name, 'link', 'add', 'u0', 'type', 'veth', 'peer', 'name', 'u0', 'netns', nodes[1]!.name]);
  for (const n of nodes) {
    await runTool('ip', ['-n', n.name, '-batch', '-'], {
      input: `addr add ${n.underlay}/24 dev u0\nlink set u0 up\nlink add br0 mtu ${MTU} type bridge\naddr add ${GATEWAY}/24 dev br0\nlink set br0 up\n`,
    });
    const t = tools(n.name);
    await ensureVxlan(t, { name: vxlanName('bt', VNI), vni: VNI, port: 4789, local: n.underlay, bridge: 'br0', mtu: MTU });
    // Twice: the second finds the device and leaves it.
    await ensureVxlan(t, { name: vxlanName('bt', VNI), vni: VNI, port: 4789, local: n.underlay, bridge: 'br0', mtu: MTU });
    await setVxlanPeers(t, vxlanName('bt', VNI), [n.other]);
    await syncArpGuard(t, 'bt', [{ device: vxlanName('bt', VNI), gateway: GATEWAY }]);
  }
  await addContainer(nodes[0]!.name, ns('c1'), '10.77.0.2');
  await addContainer(nodes[1]!.name, ns('c2'), '10.77.0.3');
  await addContainer(nodes[1]!.name, ns('c3'), '10.77.0.4');
  await addContainer(nodes[0]!.name, ns('c4'), '10.77.0.5');
});

after(async () => {
  for (const p of processes) if (p.pid && p.exitCode === null) p.kill('SIGKILL');
  await sleep(50);
  for (const n of created.reverse()) await runTool('ip', ['netns', 'del', n]).catch(() => {});
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('the vxlan device floods to exactly the peers it is given', async () => {
  const t = tools(nodes[0]!.name);
  const name = vxlanName('bt', VNI);
  assert.deepEqual(await vxlanPeers(t, name), [nodes[0]!.other]);
  const details = JSON.parse(await runTool('ip', ['-n', nodes[0]!.name, '-j', '-d', 'link', 'show', name]));
  assert.equal(details[0].linkinfo.info_data.id, VNI);
  assert.equal(details[0].master, 'br0');
  await setVxlanPeers(t, name, [nodes[0]!.other, '10.213.0.9']);
  assert.deepEqual((await vxlanPeers(t, name)).sort(), [nodes[0]!.other, '10.213.0.9']);
  await setVxlanPeers(t, name, [nodes[0]!.other]);
  assert.deepEqual(await vxlanPeers(t, name), [nodes[0]!.other]);
});

test('containers on two nodes reach each other over VXLAN; each keeps its own node as gateway', async () => {
  const out = await eventually('ping across nodes', () => exec(ns('c1'), ['busybox', 'ping', '-c', '1', '-W', '2', '10.77.0.3']));
  assert.match(out, /1 packets received/);
  // The gateway address is on both nodes' bridges; c1 must have learnt its own node's.
  await exec(ns('c1'), ['busybox', 'ping', '-c', '1', '-W', '2', GATEWAY]);
  const neigh = JSON.parse(await runTool('ip', ['-n', ns('c1'), '-j', 'neigh', 'show', GATEWAY]));
  const br = JSON.parse(await runTool('ip', ['-n', nodes[0]!.name, '-j', 'link', 'show', 'br0']));
  assert.equal(neigh[0]?.lladdr, br[0].address);
});

test('a VIP balanced in the client namespace reaches tasks on both nodes; without tasks it is refused', async () => {
  await serve(ns('c2'), 'task-on-n2-a');
  await serve(ns('c4'), 'task-on-n1');
  await eventually('httpd up', () => fetchPage(ns('c1'), '10.77.0.3'));
  await eventually('httpd up', () => fetchPage(ns('c1'), '10.77.0.5'));
  await applyVipRules(['ip', 'netns', 'exec', ns('c1'), 'nft'], [
    { vip: '10.77.0.200', backends: ['10.77.0.3', '10.77.0.5'] },
    { vip: '10.77.0.201', backends: [] },
  ]);
  const seen = new Set<string>();
  for (let i = 0; i < 4; i++) seen.add((await fetchPage(ns('c1'), '10.77.0.200')).trim());
  assert.deepEqual([...seen].sort(), ['task-on-n1', 'task-on-n2-a']);
  await assert.rejects(fetchPage(ns('c1'), '10.77.0.201'), /refused|failed|error/i);
  // Retargeted: one task gone, another on n2 in its place.
  await serve(ns('c3'), 'task-on-n2-b');
  await eventually('httpd up', () => fetchPage(ns('c1'), '10.77.0.4'));
  await applyVipRules(['ip', 'netns', 'exec', ns('c1'), 'nft'], [{ vip: '10.77.0.200', backends: ['10.77.0.3', '10.77.0.4'] }]);
  seen.clear();
  for (let i = 0; i < 4; i++) seen.add((await fetchPage(ns('c1'), '10.77.0.200')).trim());
  assert.deepEqual([...seen].sort(), ['task-on-n2-a', 'task-on-n2-b']);
  // Emptied: the table goes.
  await applyVipRules(['ip', 'netns', 'exec', ns('c1'), 'nft'], []);
  assert.doesNotMatch(await exec(ns('c1'), ['nft', 'list', 'tables']), /berth_vip/);
});
