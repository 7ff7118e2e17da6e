/** Everything a test needs: registries, the daemon, fixtures and the helpers around them. */
export * from './registry.js';
export * from './token-server.js';
export * from './corrupting-proxy.js';
export * from './registry-client.js';
export * from './daemon.js';
export * from './docker-ok.js';
export * from './hooks.js';
export * from './http-client.js';
export * from './free-port.js';
export * from './temp-dir.js';
export * from './mounts.js';
export * from './process-scan.js';
export { onExitCleanup } from './exit-cleanup.js';
export { isAlive, isRunning, run, tailFile } from './child-process.js';
export * from '../fixtures/index.js';
export { seededRandom } from './seeded-random.js';
