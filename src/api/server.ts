/**
 * Listeners: unix sockets (mode 0660, root:docker when that group exists). TCP is refused until
 * mutual TLS is configured. Idle keep-alive connections are never closed by us: docker-java and
 * others reuse pooled connections and break when a server drops them.
 */
import { createServer, type Server, ServerResponse } from 'node:http';
import { mkdirSync, chmodSync, chownSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Router } from './router.js';
import { sendError } from './http-errors.js';
import { log } from '../lib/log.js';

export interface Listener {
  address: string;
  server: Server;
}

export async function listen(router: Router, hosts: string[], group: string): Promise<Listener[]> {
  const listeners: Listener[] = [];
  for (const host of hosts) {
    if (host.startsWith('tcp://')) {
      throw new Error(`refusing to listen on ${host}: TCP needs mutual TLS (--tlsverify), which this build does not offer yet`);
    }
    const path = host.startsWith('unix://') ? host.slice('unix://'.length) : host;
    listeners.push({ address: host, server: await listenUnix(router, path, group) });
  }
  return listeners;
}

function makeServer(router: Router): Server {
  const server = createServer({ keepAliveTimeout: 0, requestTimeout: 0, headersTimeout: 0 } as never, (req, res) => {
    router.handle(req, res).catch((err) => sendError(res, err));
  });
  server.keepAliveTimeout = 0;
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  server.timeout = 0;
  server.on('upgrade', (req, socket, head) => {
    const res = new ServerResponse(req);
    res.assignSocket(socket as never);
    router.handleUpgrade(req, socket, head, res).catch((err) => {
      log.error('upgrade failed', { err });
      socket.destroy();
    });
  });
  server.on('clientError', (err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    log.debug('client error', { err });
  });
  return server;
}

async function listenUnix(router: Router, path: string, group: string): Promise<Server> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  if (existsSync(path)) rmSync(path, { force: true });
  const server = makeServer(router);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(path, 0o660);
  const gid = groupId(group);
  if (gid !== undefined) chownSync(path, 0, gid);
  log.info('API listening', { address: `unix://${path}` });
  return server;
}

function groupId(name: string): number | undefined {
  try {
    for (const line of readFileSync('/etc/group', 'utf8').split('\n')) {
      const [g, , id] = line.split(':');
      if (g === name && id) return Number(id);
    }
  } catch {
    /* no /etc/group: leave root's group */
  }
  return undefined;
}

export async function closeListeners(listeners: Listener[]): Promise<void> {
  await Promise.all(
    listeners.map(
      (l) =>
        new Promise<void>((resolve) => {
          l.server.close(() => resolve());
          l.server.closeIdleConnections();
          // Long streams (logs -f, events) would hold shutdown forever.
          setTimeout(() => l.server.closeAllConnections(), 2000).unref();
        }),
    ),
  );
}
