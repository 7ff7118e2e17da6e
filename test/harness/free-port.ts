import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that was free a moment ago. Another process can still take it before the
 * caller binds it, so callers that spawn a server retry on "address already in use".
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
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
