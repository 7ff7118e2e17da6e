/**
 * Picks and checks host ports for a container's published ports, dockerd's way: an explicit port must
 * not be published by another container on an overlapping host address (0.0.0.0 overlaps everything)
 * nor be held by a host process; port 0 means a free port chosen by the kernel. Nothing is committed
 * here: the caller stores the result in the same transaction as the container's addresses.
 */
import { conflict, invalidArgument } from '../../lib/errors.js';
import type { StoredPort } from '../../state/network-records.js';
import { parseAddress } from '../../network/cidr.js';
import { probePort } from '../../network/host-ports.js';
import type { PortBinding } from './network-types.js';

export interface PortContext {
  containerId: string;
  /** Where the ports forward to: the container's address on its first non-internal network. */
  containerIp: string;
  /** Used when a binding's hostIp is '' (the network's host_binding_ipv4, normally 0.0.0.0). */
  defaultHostIp: string;
  /** Ports already published by any container. */
  taken: readonly StoredPort[];
}

/** Whether `p` collides with a taken port: same protocol and port on the same or a wildcard address. */
export function portClash(taken: readonly StoredPort[], p: Pick<StoredPort, 'protocol' | 'hostIp' | 'hostPort'>): boolean {
  return taken.some((t) => t.protocol === p.protocol && t.hostPort === p.hostPort && (t.hostIp === p.hostIp || t.hostIp === '0.0.0.0' || p.hostIp === '0.0.0.0'));
}

export async function reservePorts(bindings: readonly PortBinding[], ctx: PortContext): Promise<StoredPort[]> {
  const out: StoredPort[] = [];
  const clashes = (protocol: string, hostIp: string, hostPort: number) => portClash([...ctx.taken, ...out], { protocol, hostIp, hostPort });
  for (const b of bindings) {
    if (!['tcp', 'udp', 'sctp'].includes(b.protocol)) throw invalidArgument(`invalid protocol ${b.protocol}`);
    if (!Number.isInteger(b.containerPort) || b.containerPort < 1 || b.containerPort > 65535) throw invalidArgument(`invalid container port ${b.containerPort}`);
    if (!Number.isInteger(b.hostPort) || b.hostPort < 0 || b.hostPort > 65535) throw invalidArgument(`invalid host port ${b.hostPort}`);
    const hostIp = b.hostIp || ctx.defaultHostIp;
    if (parseAddress(hostIp)?.family !== 4) throw invalidArgument(`invalid host IP ${hostIp}: only IPv4 host addresses can be published`);
    let hostPort = b.hostPort;
    if (hostPort !== 0) {
      if (clashes(b.protocol, hostIp, hostPort)) throw conflict(`Bind for ${hostIp}:${hostPort} failed: port is already allocated`);
      await probePort(b.protocol, hostIp, hostPort).catch((err: NodeJS.ErrnoException) => {
        throw conflict(`failed to bind host port ${hostIp}:${hostPort}/${b.protocol}: ${bindError(err)}`);
      });
    } else {
      for (let attempt = 0; ; attempt++) {
        hostPort = await probePort(b.protocol, hostIp, 0).catch((err: NodeJS.ErrnoException) => {
          throw conflict(`failed to bind a host port on ${hostIp}/${b.protocol}: ${bindError(err)}`);
        });
        if (!clashes(b.protocol, hostIp, hostPort)) break;
        if (attempt > 20) throw conflict(`no free host port on ${hostIp}/${b.protocol}`);
      }
    }
    out.push({ protocol: b.protocol, hostIp, hostPort, containerId: ctx.containerId, containerIp: ctx.containerIp, containerPort: b.containerPort });
  }
  return out;
}

function bindError(err: NodeJS.ErrnoException): string {
  if (err.code === 'EADDRINUSE') return 'address already in use';
  if (err.code === 'EADDRNOTAVAIL') return 'cannot assign requested address (not an address of this host)';
  if (err.code === 'EACCES') return 'permission denied';
  return err.message;
}
