import { createServer } from 'node:net';

/**
 * A TCP port on `address` (127.0.0.1 unless given) that was free a moment ago. Another process can still take it before the
 * caller binds it, so callers that spawn a server retry on "address already in use".
 */
export function freePort(address = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, address, () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') {
        srv.close();
        reject(new Error('could not read the bound port'));
        return;
      }
      srv.close(() => resolve(addr.port));
    });
  });
}
