import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup } from './cleanup.js';

/**
 * An HTTP server on a unix socket that reads each request's body to its end through 'data' events,
 * drops it and answers one JSON line: the least any server can do with an uploaded body. Run in a
 * process of its own (as an engine is), it gives the client's and the kernel's share of an upload:
 * a floor no engine can beat (workload 11 times the build context against it).
 */

/** Forks the server; resolves once it listens on `socket`. */
export async function startDrainServer(dir: string): Promise<{ socket: string; stop(): Promise<void> }> {
  const socket = join(dir, 'drain.sock');
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['--serve', socket], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    await Promise.race([gone, new Promise<void>((r) => setTimeout(r, 5_000).unref())]);
  };
  const undo = onCleanup('drain server', stop);
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the drain server did not start within 10 s')), 10_000);
      child.once('message', () => (clearTimeout(timer), resolve()));
      child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`the drain server exited with ${code}`))));
    });
  } catch (err) {
    await stop();
    undo();
    throw err;
  }
  return { socket, stop: async () => (await stop(), undo()) };
}

function serve(socket: string): void {
  const server = createServer((req, res) => {
    let bytes = 0;
    req.on('data', (c: Buffer) => void (bytes += c.length));
    req.on('end', () => res.end(JSON.stringify({ stream: `${bytes} bytes\n` }) + '\n'));
  });
  server.listen(socket, () => process.send?.('ready'));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

if (process.argv[2] === '--serve' && process.argv[3]) serve(process.argv[3]);
