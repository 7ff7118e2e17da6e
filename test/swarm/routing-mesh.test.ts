/**
 * The routing mesh across nodes, with two ingress listeners standing for two nodes on loopback
 * addresses of their own (same published port) and real TCP servers for their tasks: a client of
 * either node reaches the tasks of both, the hop between nodes goes through the other node's
 * listener, and a connection from a peer node is only ever served locally (no ping-pong).
 * The same through real berthd nodes is test/cluster's business.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Server } from 'node:net';
import { createSocket } from 'node:dgram';
import { IngressProxy } from '../../src/engine/swarm/ingress-proxy.js';
import type { MeshPeers } from '../../src/engine/swarm/mesh-peers.js';
import type { ServiceRecord } from '../../src/engine/swarm/swarm-model.js';
import { freePort } from '../harness/index.js';

async function namedServer(name: string, port: number, host: string): Promise<Server> {
  const s = createServer((sock) => sock.end(`${name}`));
  await new Promise<void>((r) => s.listen(port, host, r));
  return s;
}

function fetchFrom(host: string, port: number, localAddress = '127.0.0.1'): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect({ port, host, localAddress });
    let out = '';
    sock.on('data', (b) => (out += b));
    sock.on('close', () => resolve(out));
    sock.on('error', reject);
  });
}

const service = (published: number, target: number): ServiceRecord => ({
  id: 'svc', version: 1, createdAt: '', updatedAt: '', spec: { Name: 'svc' }, templateVersion: 1,
  ports: [
    { Protocol: 'tcp', TargetPort: target, PublishedPort: published, PublishMode: 'ingress' },
    { Protocol: 'udp', TargetPort: target, PublishedPort: published, PublishMode: 'ingress' },
  ],
});

/** A UDP "task": answers each datagram with its name. */
async function udpServer(name: string, port: number, host: string): Promise<() => void> {
  const s = createSocket('udp4');
  s.on('message', (_m, from) => s.send(name, from.port, from.address));
  await new Promise<void>((r) => s.bind(port, host, r));
  return () => s.close();
}

/** One datagram from a new socket (a new session), and the answer (bounded wait). */
function ask(host: string, port: number, localAddress = '127.0.0.1'): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = createSocket('udp4');
    const timer = setTimeout(() => {
      s.close();
      reject(new Error(`no UDP answer from ${host}:${port}`));
    }, 3000);
    s.on('message', (m) => {
      clearTimeout(timer);
      s.close();
      resolve(m.toString());
    });
    s.bind(0, localAddress, () => s.send('hi', port, host));
  });
}

describe('routing mesh across nodes', () => {
  const closers: (() => void)[] = [];
  after(() => closers.forEach((c) => c()));

  it('either node reaches the tasks of both; a peer connection is served locally', async () => {
    const target = await freePort();
    const published = await freePort();
    const nodes = { n1: '127.0.9.1', n2: '127.0.9.2' };
    // Node 1 runs task a, node 2 runs task b (each at its own "container" address).
    for (const [name, host] of [['a', '127.0.8.1'], ['b', '127.0.8.2']] as const) {
      const s = await namedServer(name, target, host);
      closers.push(() => s.close());
      closers.push(await udpServer(name, target, host));
    }
    const peersOf = (self: string, other: string): MeshPeers => ({
      isPeer: (addr) => addr === other,
      nodesOf: () => [other],
      localAddress: () => self,
    });
    const p1 = new IngressProxy(() => ['127.0.8.1'], nodes.n1, peersOf(nodes.n1, nodes.n2));
    const p2 = new IngressProxy(() => ['127.0.8.2'], nodes.n2, peersOf(nodes.n2, nodes.n1));
    for (const p of [p1, p2]) {
      closers.push(() => p.close());
      p.sync([service(published, target)], []);
    }
    await new Promise((r) => setTimeout(r, 100));
    for (const node of Object.values(nodes)) {
      const seen = new Set<string>();
      for (let i = 0; i < 4; i++) seen.add(await fetchFrom(node, published));
      assert.deepEqual([...seen].sort(), ['a', 'b'], `through ${node}`);
    }
    // Coming from node 1's address, node 2 only ever hands the connection to its own task.
    const fromPeer = new Set<string>();
    for (let i = 0; i < 4; i++) fromPeer.add(await fetchFrom(nodes.n2, published, nodes.n1));
    assert.deepEqual([...fromPeer], ['b']);

    // UDP the same way: each new client is a session with one task, on this node or the other.
    for (const node of Object.values(nodes)) {
      const seen = new Set<string>();
      for (let i = 0; i < 4; i++) seen.add(await ask(node, published));
      assert.deepEqual([...seen].sort(), ['a', 'b'], `UDP through ${node}`);
    }
    const udpFromPeer = new Set<string>();
    for (let i = 0; i < 4; i++) udpFromPeer.add(await ask(nodes.n2, published, nodes.n1));
    assert.deepEqual([...udpFromPeer], ['b']);
  });
});
