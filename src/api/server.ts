/**
 * Listeners: unix sockets (mode 0660, root:docker when that group exists) and tcp:// hosts,
 * over mutual TLS (--tlsverify) or, when the operator explicitly allowed it, open. Idle
 * keep-alive connections are never closed by us: docker-java and others reuse pooled
 * connections and break when a server drops them.
 */
import { createServer, type IncomingMessage, type Server, ServerResponse } from 'node:http';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:https';
import { mkdirSync, chmodSync, chownSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Router } from './router.js';
import { sendError } from './http-errors.js';
import { log } from '../lib/log.js';
import { formatTcpAddress, parseTcpAddress } from '../lib/tcp-address.js';

export interface Listener {
  address: string;
  server: Server | TlsServer;
}

/** How tcp:// hosts are served; the daemon configuration's fields of the same names. */
export interface TcpSecurity {
  tls: boolean;
  tlsVerify: boolean;
  tlsCaCert: string;
  tlsCert: string;
  tlsKey: string;
  allowOpenTcp: boolean;
}

/** The group dockerd and Berth use by default; it is fine for it to be missing. */
const DEFAULT_GROUP = 'docker';

/**
 * Opens every host, or none: if one fails, those already open are closed again. Without
 * `tcp`, tcp:// hosts are refused (the caller has not said how to secure them).
 */
export async function listen(router: Router, hosts: string[], group: string, tcp?: TcpSecurity): Promise<Listener[]> {
  const listeners: Listener[] = [];
  try {
    for (const host of hosts) {
      if (host.startsWith('tcp://')) {
        if (!tcp) throw new Error(`refusing to listen on ${host}: no TLS settings were given for TCP hosts`);
        listeners.push(await listenTcp(router, host, tcp));
      } else {
        const path = host.startsWith('unix://') ? host.slice('unix://'.length) : host;
        listeners.push({ address: host, server: await listenUnix(router, path, group) });
      }
    }
  } catch (err) {
    await closeListeners(listeners);
    throw err;
  }
  return listeners;
}

function handle(router: Router) {
  return (req: IncomingMessage, res: ServerResponse) => {
    try {
      router.handle(req, res);
    } catch (err) {
      sendError(res, err);
    }
  };
}

/** Timeouts off, upgrades (attach, exec) handed to the router, malformed requests answered 400. */
function configure<S extends Server | TlsServer>(server: S, router: Router): S {
  server.keepAliveTimeout = 0;
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  server.timeout = 0;
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const res = new ServerResponse(req);
    res.assignSocket(socket as never);
    try {
      router.handleUpgrade(req, socket, head, res);
    } catch (err) {
      log.error('upgrade failed', { err });
      socket.destroy();
    }
  });
  server.on('clientError', (err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    log.debug('client error', { err });
  });
  return server;
}

const NO_TIMEOUTS = { keepAliveTimeout: 0, requestTimeout: 0, headersTimeout: 0 };

async function listenUnix(router: Router, path: string, group: string): Promise<Server> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  if (existsSync(path)) rmSync(path, { force: true });
  const gid = groupId(group);
  const server = configure(createServer(NO_TIMEOUTS, handle(router)), router);
  await bind(server, (cb) => server.listen(path, cb));
  chmodSync(path, 0o660);
  if (gid !== undefined) {
    try {
      chownSync(path, 0, gid);
    } catch (err) {
      log.warn('could not give the API socket to its group', { path, group, err });
    }
  }
  log.info('API listening', { address: `unix://${path}`, group: gid !== undefined ? group : undefined });
  return server;
}

async function listenTcp(router: Router, host: string, sec: TcpSecurity): Promise<Listener> {
  const verify = sec.tlsVerify;
  const useTls = sec.tls || verify;
  const addr = parseTcpAddress(host, useTls);
  const address = formatTcpAddress(addr);
  if (!verify && !sec.allowOpenTcp) {
    throw new Error(`refusing to listen on ${address} without --tlsverify (pass --allow-open-tcp to accept an open socket)`);
  }
  let server: Server | TlsServer;
  if (useTls) {
    const files = readTlsFiles(sec, verify);
    try {
      server = createTlsServer({
        ...NO_TIMEOUTS,
        ...files,
        minVersion: 'TLSv1.2',
        // As http.Server does: a client that half-closes (stdin EOF on attach, close_notify
        // over TLS) must still receive the rest of the output.
        allowHalfOpen: true,
        // Only clients whose certificate chains to tlscacert complete the handshake.
        requestCert: verify,
        rejectUnauthorized: verify,
      }, handle(router));
    } catch (err) {
      throw new Error(`unable to use the TLS files (--tlscert ${sec.tlsCert}, --tlskey ${sec.tlsKey}): ${(err as Error).message}`, { cause: err });
    }
    server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
      log.warn('TLS handshake failed', { remote: `${socket.remoteAddress}:${socket.remotePort}`, err });
    });
  } else {
    server = createServer(NO_TIMEOUTS, handle(router));
  }
  configure(server, router);
  await bind(server, (cb) => server.listen(addr.port, addr.host, cb));
  const scheme = useTls ? 'https' : 'http';
  if (verify) {
    log.info('API listening', { address, tls: true, clientCertificates: 'required' });
  } else {
    log.warn(`API listening on ${address} without client certificate verification: anyone who can connect controls this host as root`, {
      address, scheme,
    });
  }
  return { address, server };
}

function readTlsFiles(sec: TcpSecurity, verify: boolean): { cert: Buffer; key: Buffer; ca?: Buffer } {
  const read = (flag: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`unable to read ${flag} ${path}: ${(err as Error).message}`, { cause: err });
    }
  };
  return {
    cert: read('--tlscert', sec.tlsCert),
    key: read('--tlskey', sec.tlsKey),
    ...(verify ? { ca: read('--tlscacert', sec.tlsCaCert) } : {}),
  };
}

function bind(server: Server | TlsServer, start: (cb: () => void) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    start(() => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * The socket's group: a name from /etc/group or a numeric GID. The default group may be
 * missing (the socket stays root's); a group the operator named must exist.
 */
function groupId(name: string): number | undefined {
  if (name === '') return undefined;
  if (/^\d+$/.test(name)) return Number(name);
  try {
    for (const line of readFileSync('/etc/group', 'utf8').split('\n')) {
      const [g, , id] = line.split(':');
      if (g === name && id) return Number(id);
    }
  } catch {
    /* no /etc/group */
  }
  if (name === DEFAULT_GROUP) return undefined;
  throw new Error(`group ${JSON.stringify(name)} for the API socket does not exist`);
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
