/**
 * TEST ONLY. Starts bin/berthd (or $BERTH_TEST_BERTHD) on temporary roots with extra arguments
 * and waits for its "berthd started" log line. Stopped by pid; its directory is removed.
 * (A minimal stand-in until the shared test/harness daemon helper exists.)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newNetworkPrefix, removeNetworkLeftovers } from '../harness/network-cleanup.js';
import { routeLogEnv } from '../harness/route-coverage.js';
import { purgeHostState } from '../../src/network/purge-host-state.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BERTHD = process.env.BERTH_TEST_BERTHD ?? join(REPO, 'bin', 'berthd');
const START_TIMEOUT_MS = 30_000;

export interface TestDaemon {
  dir: string;
  /** The unix socket path. */
  socket: string;
  pid: number;
  logs(): string;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const p of running) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
});

/**
 * `args` come after the roots and the unix socket (`-H` values given there are added to it);
 * `config` becomes the daemon.json (empty by default, so /etc/berth/daemon.json is never read).
 */
export async function startDaemon(opts: { args?: string[]; env?: NodeJS.ProcessEnv; config?: Record<string, unknown> } = {}): Promise<TestDaemon> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-tls-daemon-'));
  writeFileSync(join(dir, 'daemon.json'), JSON.stringify(opts.config ?? {}));
  const socket = join(dir, 'berth.sock');
  const networkPrefix = newNetworkPrefix();
  const logFile = join(dir, 'berthd.log');
  const fd = openSync(logFile, 'a');
  const args = [
    '-H', `unix://${socket}`, '--data-root', join(dir, 'data'), '--exec-root', join(dir, 'exec'),
    '--pidfile', join(dir, 'berthd.pid'), '--config-file', join(dir, 'daemon.json'), '--network-prefix', networkPrefix, ...(opts.args ?? []),
  ];
  let proc: ChildProcess;
  try {
    proc = spawn(BERTHD, args, { stdio: ['ignore', fd, fd], env: { ...process.env, ...routeLogEnv(basename(dir)), ...opts.env } });
  } finally {
    closeSync(fd);
  }
  running.add(proc);
  const logs = () => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    running.delete(proc);
    await purgeHostState({ prefix: networkPrefix, execRoot: join(dir, 'exec') }).catch(() => undefined);
    removeNetworkLeftovers(networkPrefix);
    rmSync(dir, { recursive: true, force: true });
  };
  const started = Date.now();
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      const text = logs();
      await stop();
      throw new DaemonExitError(`berthd exited (${proc.exitCode ?? proc.signalCode}) during start-up:\n${text}`, text, proc.exitCode);
    }
    if (logs().includes('"msg":"berthd started"')) break;
    if (Date.now() - started > START_TIMEOUT_MS) {
      const text = logs();
      await stop();
      throw new Error(`berthd did not start within ${START_TIMEOUT_MS} ms:\n${text}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { dir, socket, pid: proc.pid!, logs, stop };
}

/** berthd refused to start; `log` is everything it wrote. */
export class DaemonExitError extends Error {
  constructor(message: string, readonly log: string, readonly code: number | null) {
    super(message);
  }
}
