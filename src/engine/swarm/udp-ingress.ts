/**
 * UDP ports of the routing mesh: one socket per published port; each client (address and port) is
 * a session with its own upstream socket to one task (or another node's listener, chosen as for TCP
 * in meshTargets), whose replies go back to the client from the published port. A session idle for
 * 30 s ends.
 */
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { errorMessage } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { Route, TaskAddresses } from './ingress-proxy.js';
import { meshTargets, type MeshPeers } from './mesh-peers.js';

const IDLE_MS = 30_000;

interface Session {
  upstream: Socket;
  timer: NodeJS.Timeout;
}

export class UdpIngress {
  readonly #listeners = new Map<number, Socket>();
  readonly #routes = new Map<number, Route>();
  readonly #sessions = new Map<string, Session>();
  #next = 0;

  constructor(
    private readonly addresses: TaskAddresses,
    private readonly host: string,
    private readonly peers?: MeshPeers,
  ) {}

  sync(wanted: Map<number, Route>): void {
    for (const [port, socket] of this.#listeners) {
      if (wanted.has(port)) continue;
      socket.close();
      this.#listeners.delete(port);
      this.#routes.delete(port);
      for (const [key, s] of this.#sessions) if (key.startsWith(`${port} `)) this.#end(key, s);
    }
    for (const [port, route] of wanted) {
      this.#routes.set(port, route);
      if (!this.#listeners.has(port)) this.#listen(port);
    }
  }

  close(): void {
    for (const socket of this.#listeners.values()) socket.close();
    for (const [key, s] of this.#sessions) this.#end(key, s);
    this.#listeners.clear();
    this.#routes.clear();
  }

  #listen(port: number): void {
    const socket = createSocket('udp4');
    socket.on('error', (err) => {
      log.warn('ingress UDP port not published', { port, err: errorMessage(err) });
      if (this.#listeners.get(port) === socket) this.#listeners.delete(port);
      socket.close();
    });
    socket.on('message', (msg, from) => this.#forward(port, socket, msg, from));
    socket.bind(port, this.host);
    socket.unref();
    this.#listeners.set(port, socket);
  }

  #forward(port: number, listener: Socket, msg: Buffer, from: RemoteInfo): void {
    const key = `${port} ${from.address} ${from.port}`;
    let session = this.#sessions.get(key);
    if (!session) {
      const route = this.#routes.get(port);
      const targets = route ? meshTargets(this.addresses, this.peers, route, port, from.address) : [];
      if (targets.length === 0) return;
      const target = targets[this.#next++ % targets.length]!;
      const upstream = createSocket('udp4');
      upstream.unref();
      upstream.on('error', () => this.#end(key, this.#sessions.get(key)));
      upstream.on('message', (reply) => {
        this.#touch(key);
        listener.send(reply, from.port, from.address);
      });
      upstream.bind({ port: 0, ...(target.localAddress ? { address: target.localAddress } : {}) });
      upstream.connect(target.port, target.host);
      session = { upstream, timer: setTimeout(() => this.#end(key, this.#sessions.get(key)), IDLE_MS).unref() };
      this.#sessions.set(key, session);
    }
    this.#touch(key);
    const up = session.upstream;
    // Datagrams sent before the socket is connected wait for it.
    const send = () => up.send(msg, (err) => err && this.#end(key, this.#sessions.get(key)));
    try {
      up.remoteAddress();
      send();
    } catch {
      up.once('connect', send);
    }
  }

  #touch(key: string): void {
    this.#sessions.get(key)?.timer.refresh();
  }

  #end(key: string, s: Session | undefined): void {
    if (!s || this.#sessions.get(key) !== s) return;
    this.#sessions.delete(key);
    clearTimeout(s.timer);
    try {
      s.upstream.close();
    } catch {
      /* already closed */
    }
  }
}
