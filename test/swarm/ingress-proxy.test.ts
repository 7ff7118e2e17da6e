/**
 * The ingress listener on its own: real TCP servers on 127.0.0.1 stand where task containers'
 * addresses will be, since tasks get routable addresses only once container networking is wired.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Server } from 'node:net';
import { IngressProxy } from '../../src/engine/swarm/ingress-proxy.js';
import type { ServiceRecord } from '../../src/engine/swarm/swarm-model.js';
import { freePort } from '../harness/index.js';

/** A server that answers each connection with its name and then echoes what it reads until EOF. */
async function namedServer(name: string, port: number, host: string): Promise<Server> {
  const s = createServer({ allowHalfOpen: true }, (sock) => {
    sock.write(`${name}:`);
    sock.on('data', (b) => sock.write(b));
    sock.on('end', () => sock.end());
  });
  await new Promise<void>((r) => s.listen(port, host, r));
  return s;
}

function exchange(port: number, payload: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let out = '';
    sock.on('data', (b) => (out += b));
    sock.on('end', () => resolve(out));
    sock.on('close', () => resolve(out));
    sock.on('error', reject);
    sock.end(payload); // half-close: the answer must still come back
  });
}

function service(id: string, published: number, target: number, mode: 'ingress' | 'host' = 'ingress'): ServiceRecord {
  return {
    id,
    version: 1,
    createdAt: '',
    updatedAt: '',
    spec: { Name: id },
    templateVersion: 1,
    ports: [{ Protocol: 'tcp', TargetPort: target, PublishedPort: published, PublishMode: mode }],
  };
}

describe('ingress proxy', () => {
  const closers: (() => void)[] = [];
  after(() => closers.forEach((c) => c()));

  it('spreads connections over the running tasks, keeps half-closed streams, and follows port changes', async () => {
    const target = await freePort();
    const a = await namedServer('a', target, '127.0.0.2');
    closers.push(() => a.close());
    let addresses = ['127.0.0.2'];
    const proxy = new IngressProxy(() => addresses, '127.0.0.1');
    closers.push(() => proxy.close());
    const published = await freePort();
    proxy.sync([service('svc', published, target)], []);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(await exchange(published, 'hello'), 'a:hello');

    // Two tasks: round robin. (Both stand-ins listen on different addresses, same port.)
    const b = await namedServer('b', target, '127.0.0.3');
    closers.push(() => b.close());
    addresses = ['127.0.0.2', '127.0.0.3'];
    const answers = new Set<string>();
    for (let i = 0; i < 4; i++) answers.add((await exchange(published, 'x')).slice(0, 2));
    assert.deepEqual([...answers].sort(), ['a:', 'b:']);

    // No running task: the connection is closed at once.
    addresses = [];
    assert.equal(await exchange(published, 'nobody'), '');

    // The service drops the port: the listener goes; host-mode ports never get one.
    proxy.sync([service('svc', published, target, 'host')], []);
    await new Promise((r) => setTimeout(r, 100));
    await assert.rejects(exchange(published, 'gone'), /ECONNREFUSED/);
  });
});
