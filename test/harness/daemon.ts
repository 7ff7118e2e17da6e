import { newNetworkPrefix, removeNetworkLeftovers } from './network-cleanup.js';
import { purgeHostState } from '../../src/network/purge-host-state.js';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { killProcess, run, signal, spawnLogged, stopProcess, tailFile, type LoggedProcess } from './child-process.js';
import { onExitCleanup } from './exit-cleanup.js';
import { httpRequest, httpStream, httpUpgrade, type UpgradeResult } from './http-client.js';
import { unmountUnder, unmountUnderSync } from './mounts.js';
import { killAll, leftoverProcesses, stillRunning, type ProcRef } from './process-scan.js';
import { makeTempDir, removeDir, removeDirSync } from './temp-dir.js';

/**
 * Runs the real berthd for a test file: its own temp dir holding socket, data root, exec root, pidfile
 * and log. Teardown stops it, kills whatever it left running (found by pid through the temp dir),
 * unmounts what it left mounted and removes the dir, also at process exit if a test forgot to.
 */

export interface DaemonRequestOptions {
  /** Objects are sent as JSON; strings and Buffers as they are. */
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

export interface DaemonResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text(): string;
  json<T = any>(): T;
}

export interface DockerResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface TestDaemon {
  readonly socket: string;
  /** "unix:///…/berth.sock" */
  readonly dockerHost: string;
  readonly dataRoot: string;
  readonly execRoot: string;
  /** The temp dir holding everything above. */
  readonly dir: string;
  readonly logFile: string;
  /** DOCKER_CONFIG for docker(); `docker login` writes here. */
  readonly dockerConfig: string;
  /** Pid of the current berthd process (changes on restart). */
  readonly pid: number;
  readonly running: boolean;
  request(method: string, path: string, opts?: DaemonRequestOptions): Promise<DaemonResponse>;
  /** The raw response, for streaming endpoints (pull progress, logs, events). */
  stream(method: string, path: string, opts?: DaemonRequestOptions): Promise<IncomingMessage>;
  /** A request with `Upgrade: tcp` (attach, exec start); resolves with the socket on 101. */
  upgrade(method: string, path: string, opts?: DaemonRequestOptions): Promise<UpgradeResult>;
  /** Runs the real docker CLI against this daemon. */
  docker(args: string[], opts?: { input?: string | Buffer; env?: Record<string, string>; timeoutMs?: number }): Promise<DockerResult>;
  /** SIGTERM and wait (SIGKILL after 10 s); keeps the dirs so restart() can bring it back. */
  stop(): Promise<void>;
  /** SIGKILL, as in a crash; containers and mounts are left as they are. */
  kill9(): Promise<void>;
  /** Stops the daemon if it runs, then starts it again on the same dirs. */
  restart(opts?: DaemonOptions): Promise<void>;
  /** Stops everything and removes the temp dir. Safe to call twice. */
  teardown(): Promise<void>;
  logs(): string;
  logTail(lines?: number): string;
}

export interface DaemonOptions {
  args?: string[];
  env?: Record<string, string>;
  /** How long to wait for /_ping (default 15 s). */
  readyTimeoutMs?: number;
  /** A command that execs berthd after it, e.g. `['nsenter', '--net=/run/netns/x', '--']` (test/cluster). */
  wrap?: string[];
}

/** The checkout this file belongs to (works from test/harness/ and from dist/test/harness/). */
export function repoRoot(): string {
  if (process.env.BERTH_REPO) return process.env.BERTH_REPO;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'berth') return dir;
      } catch {
        // not ours; keep climbing
      }
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the berth checkout above the test harness');
    dir = parent;
  }
}

/** Environment the docker CLI must not inherit: it would point the CLI somewhere else. */
const DOCKER_ENV_TO_DROP = ['DOCKER_CONTEXT', 'DOCKER_TLS_VERIFY', 'DOCKER_CERT_PATH', 'DOCKER_TLS', 'DOCKER_API_VERSION'];

export async function startDaemon(opts: DaemonOptions = {}): Promise<TestDaemon> {
  const dir = makeTempDir('daemon');
  const socket = join(dir, 'berth.sock');
  const dataRoot = join(dir, 'root');
  const execRoot = join(dir, 'run');
  const logFile = join(dir, 'berthd.log');
  const dockerConfig = join(dir, 'docker-config');
  mkdirSync(dockerConfig);
  writeFileSync(join(dockerConfig, 'config.json'), '{}\n');
  const berthd = process.env.BERTHD_BIN ?? join(repoRoot(), 'bin', 'berthd');
  const networkPrefix = newNetworkPrefix();

  let proc: LoggedProcess | undefined;
  let current: DaemonOptions = opts;
  let tornDown = false;

  const unregister = onExitCleanup(() => {
    const pids = proc && !proc.hasExited() ? [proc.pid] : [];
    if (proc && !proc.hasExited()) signal(proc.pid, 'SIGKILL');
    killAll(leftoverProcesses(dir, pids));
    unmountUnderSync(dir);
    removeNetworkLeftovers(networkPrefix);
    removeDirSync(dir);
  });

  const target = (path: string) => ({ socketPath: socket, path });

  async function launch(o: DaemonOptions): Promise<void> {
    const args = [
      '-H', `unix://${socket}`,
      '--data-root', dataRoot,
      '--exec-root', execRoot,
      '--pidfile', join(dir, 'berthd.pid'),
      '--log-level', 'debug',
      '--network-prefix', networkPrefix,
      ...(o.args ?? []),
    ];
    writeFileSync(logFile, `--- harness: starting ${berthd} ${args.join(' ')}\n`, { flag: 'a' });
    // Run as an executable, so the node flags in its first line apply.
    const wrap = o.wrap ?? [];
    const p = spawnLogged(wrap[0] ?? berthd, [...wrap.slice(1), ...(wrap.length ? [berthd] : []), ...args], { logFile, env: { ...process.env, ...(o.env ?? {}) } });
    writeFileSync(logFile, `--- harness: berthd pid ${p.pid}\n`, { flag: 'a' });
    proc = p;
    const timeout = o.readyTimeoutMs ?? 15_000;
    const deadline = Date.now() + timeout;
    let lastError = '';
    while (Date.now() < deadline) {
      if (p.hasExited()) {
        throw new Error(`berthd exited during startup with ${await p.exited}\n--- berthd log (${logFile}) ---\n${tailFile(logFile, 60)}`);
      }
      try {
        const res = await httpRequest(target('/_ping'), { timeoutMs: 2000 });
        if (res.status === 200 && res.text() === 'OK') return;
        lastError = `/_ping answered ${res.status} ${res.text().slice(0, 200)}`;
      } catch (err) {
        lastError = (err as Error).message;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    await killProcess(p);
    throw new Error(`berthd not ready within ${timeout} ms (${lastError})\n--- berthd log (${logFile}) ---\n${tailFile(logFile, 60)}`);
  }

  async function stop(): Promise<void> {
    if (proc && !proc.hasExited()) await stopProcess(proc, 10_000);
  }

  async function kill9(): Promise<void> {
    if (proc) await killProcess(proc);
  }

  async function teardown(): Promise<void> {
    if (tornDown) return;
    tornDown = true;
    const daemonPid = proc && !proc.hasExited() ? [proc.pid] : [];
    // Note the daemon's children before it exits: afterwards they are reparented and harder to attribute.
    const before = leftoverProcesses(dir, daemonPid);
    await stop();
    const left = [...before, ...leftoverProcesses(dir)].filter((r) => r.pid !== proc?.pid);
    killAll(left);
    await waitGone(left, 5000);
    await purgeHostState({ prefix: networkPrefix, execRoot }).catch(() => undefined);
    const stuck = await unmountUnder(dir);
    removeNetworkLeftovers(networkPrefix);
    await removeDir(dir).catch((err: Error) => {
      throw new Error(`could not remove ${dir}: ${err.message}${stuck.length ? `; still mounted: ${stuck.join(', ')}` : ''}`);
    });
    unregister();
  }

  try {
    await launch(opts);
  } catch (err) {
    await teardown().catch(() => undefined);
    throw err;
  }

  const daemon: TestDaemon = {
    socket,
    dockerHost: `unix://${socket}`,
    dataRoot,
    execRoot,
    dir,
    logFile,
    dockerConfig,
    get pid() {
      return proc?.pid ?? -1;
    },
    get running() {
      return !!proc && !proc.hasExited();
    },
    async request(method, path, o = {}) {
      try {
        return await httpRequest(target(path), { method, headers: o.headers as OutgoingHttpHeaders, body: o.body, timeoutMs: o.timeoutMs });
      } catch (err) {
        throw withLogTail(err, daemon);
      }
    },
    async stream(method, path, o = {}) {
      try {
        return await httpStream(target(path), { method, headers: o.headers as OutgoingHttpHeaders, body: o.body, timeoutMs: o.timeoutMs });
      } catch (err) {
        throw withLogTail(err, daemon);
      }
    },
    async upgrade(method, path, o = {}) {
      try {
        return await httpUpgrade(target(path), { method, headers: o.headers as OutgoingHttpHeaders, body: o.body });
      } catch (err) {
        throw withLogTail(err, daemon);
      }
    },
    docker(args, o = {}) {
      const env: NodeJS.ProcessEnv = { ...process.env };
      for (const k of DOCKER_ENV_TO_DROP) delete env[k];
      Object.assign(env, { DOCKER_HOST: `unix://${socket}`, DOCKER_CONFIG: dockerConfig, DOCKER_CLI_HINTS: 'false' }, o.env ?? {});
      return run('docker', args, { input: o.input, env, timeoutMs: o.timeoutMs ?? 120_000 });
    },
    stop,
    kill9,
    async restart(o) {
      if (tornDown) throw new Error('restart() after teardown()');
      await stop();
      if (o) current = o;
      await launch(current);
    },
    teardown,
    logs: () => {
      try {
        return readFileSync(logFile, 'utf8');
      } catch {
        return '';
      }
    },
    logTail: (lines = 40) => tailFile(logFile, lines),
  };
  return daemon;
}

async function waitGone(refs: ProcRef[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let alive = refs;
  while (alive.length && Date.now() < deadline) {
    alive = alive.filter(stillRunning);
    if (alive.length) await new Promise((r) => setTimeout(r, 50));
  }
}

/** Adds the end of the daemon log to an error, so a failing test shows what berthd was doing. */
export function withLogTail(err: unknown, daemon: Pick<TestDaemon, 'logTail' | 'logFile'>, lines = 40): Error {
  const e = err instanceof Error ? err : new Error(String(err));
  if (!e.message.includes('--- berthd log')) {
    const tail = `\n--- berthd log (${daemon.logFile}, last ${lines} lines) ---\n${daemon.logTail(lines)}`;
    e.message += tail;
    // Some reporters print the stack, which was rendered with the old message.
    if (e.stack) e.stack += tail;
  }
  return e;
}

/**
 * Runs a test body and, if it throws (an assertion included), appends the daemon's log tail to the
 * error message: `await withDaemonLogs(d, async () => { ... })`.
 */
export async function withDaemonLogs<T>(daemon: Pick<TestDaemon, 'logTail' | 'logFile'>, fn: () => Promise<T> | T, lines = 40): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw withLogTail(err, daemon, lines);
  }
}
