/**
 * The routing mesh: every TCP port a service publishes in ingress mode is a listener in berthd on
 * every node, and each connection goes to one of the service's running tasks (round robin), at the
 * task container's address on the port the service targets. A task on another node is reached
 * through that node's own listener (its address, the published port), which, seeing a connection
 * from a peer node, hands it only to its local tasks: one hop at most, no overlay needed. Host-mode
 * ports need none of this: they are the task containers' own port bindings.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { log } from '../../lib/log.js';
import { errorMessage } from '../../lib/errors.js';
import type { PortPublisher } from './swarm.js';
import type { ServiceRecord, TaskRecord } from './swarm-model.js';
import { UdpIngress } from './udp-ingress.js';
import { meshTargets, type MeshPeers } from './mesh-peers.js';

/** The addresses of a service's running tasks on this node (empty while none can be reached). */
export type TaskAddresses = (serviceId: string) => string[];

export interface Route {
  serviceId: string;
  targetPort: number;
}

export class IngressProxy implements PortPublisher {
  readonly #servers = new Map<number, Server>();
  readonly #routes = new Map<number, Route>();
  readonly #sockets = new Set<Socket>();
  readonly #udp: UdpIngress;
  #next = 0;

  constructor(
    private readonly addresses: TaskAddresses,
    /** Where the listeners bind; dockerd's routing mesh takes every address. */
    private readonly host = '0.0.0.0',
    private readonly peers?: MeshPeers,
  ) {
    this.#udp = new UdpIngress(addresses, host, peers);
  }

  /** Opens listeners for new published ports, retargets changed ones, closes those no service publishes. */
  sync(services: ServiceRecord[], _tasks: TaskRecord[]): void {
    const wanted = new Map<number, Route>();
    const udp = new Map<number, Route>();
    for (const s of services) {
      for (const p of s.ports) {
        if (p.PublishMode !== 'ingress' || !p.PublishedPort || !p.TargetPort) continue;
        const proto = p.Protocol ?? 'tcp';
        if (proto === 'tcp') wanted.set(p.PublishedPort, { serviceId: s.id, targetPort: p.TargetPort });
        else if (proto === 'udp') udp.set(p.PublishedPort, { serviceId: s.id, targetPort: p.TargetPort });
      }
    }
    this.#udp.sync(udp);
    for (const [port, server] of this.#servers) {
      if (wanted.has(port)) continue;
      server.close();
      this.#servers.delete(port);
      this.#routes.delete(port);
    }
    for (const [port, route] of wanted) {
      this.#routes.set(port, route);
      if (!this.#servers.has(port)) this.#listen(port);
    }
  }

  close(): void {
    this.#udp.close();
    for (const server of this.#servers.values()) server.close();
    for (const socket of this.#sockets) socket.destroy();
    this.#servers.clear();
    this.#routes.clear();
  }

  #listen(port: number): void {
    const server = createServer({ allowHalfOpen: true }, (client) => this.#forward(port, client));
    server.on('error', (err) => {
      log.warn('ingress port not published', { port, err: errorMessage(err) });
      if (this.#servers.get(port) === server) this.#servers.delete(port);
    });
    server.listen({ port, host: this.host });
    this.#servers.set(port, server);
  }

  #forward(port: number, client: Socket): void {
    const route = this.#routes.get(port);
    const targets = route ? meshTargets(this.addresses, this.peers, route, port, client.remoteAddress ?? '') : [];
    if (!route || targets.length === 0) {
      client.destroy();
      return;
    }
    const target = targets[this.#next++ % targets.length]!;
    const upstream = connect({ ...target, allowHalfOpen: true });
    for (const s of [client, upstream]) {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    }
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
