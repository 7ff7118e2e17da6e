/**
 * Host port checks for publishing. Published ports are DNAT rules, not listening sockets, so nothing on
 * the host would notice a clash: before a port is published, bind it once to prove no host process holds
 * it (and to let the kernel pick a free one for "random port"), then let it go.
 */
import { createServer } from 'node:net';
import { createSocket } from 'node:dgram';

export type Protocol = 'tcp' | 'udp' | 'sctp';

/**
 * Binds `hostIp:port` (port 0: any free port) for `protocol`, releases it, and resolves with the port.
 * Rejects with the bind error (EADDRINUSE, EADDRNOTAVAIL, ...).
 */
export function probePort(protocol: Protocol, hostIp: string, port: number): Promise<number> {
  if (protocol === 'udp') {
    return new Promise((resolve, reject) => {
      const s = createSocket({ type: 'udp4' });
      s.once('error', (err) => { s.close(); reject(err); });
      s.bind({ address: hostIp, port, exclusive: true }, () => {
        const p = s.address().port;
        s.close(() => resolve(p));
      });
    });
  }
  // SCTP has no Node API: check it as TCP, which at least keeps the port number consistent.
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen({ host: hostIp, port, exclusive: true }, () => {
      const addr = srv.address();
      const p = typeof addr === 'object' && addr ? addr.port : port;
      srv.close(() => resolve(p));
    });
  });
}
