/**
 * The etcd member berthd runs for the cluster on a manager: Debian's etcd, its data under the data
 * root, client and peer URLs on the advertised address, TLS with client certificates on both. The
 * member outlives berthd (like a container does): a restarted berthd finds it by its pidfile and
 * keeps it; a member that is not running, then or later while berthd runs, is started again on its
 * data dir, unless etcd removed it from the cluster (see #supervise). Its output goes to
 * `etcd.log`, rotated by size while berthd runs (etcd never reopens it: copied and truncated).
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';
import { LogRotator, parseSize, type LogLimits } from '../../containers/log-rotation.js';

export interface MemberConfig {
  name: string;
  dataDir: string;
  addr: string;
  clientPort: number;
  peerPort: number;
  /** `name=https://addr:peer,...`: the members when this one first starts. */
  initialCluster: string;
  initialState: 'new' | 'existing';
  clusterToken: string;
  caFile: string;
  certFile: string;
  keyFile: string;
}

export const ETCD_BINARY = process.env.BERTH_ETCD_BIN ?? 'etcd';

/** etcd.log's size limit and how many files are kept (the live one included): 10 MiB × 3 unless the environment says. */
export function etcdLogLimits(env: NodeJS.ProcessEnv = process.env): LogLimits {
  return {
    maxSize: parseSize(env.BERTH_ETCD_LOG_MAX_SIZE) ?? 10 * 1024 * 1024,
    maxFiles: Math.max(1, Number.parseInt(env.BERTH_ETCD_LOG_MAX_FILE ?? '', 10) || 3),
  };
}

/** An address as the host part of a URL or host:port (an IPv6 one in brackets). */
export const hostPart = (addr: string): string => (addr.includes(':') ? `[${addr}]` : addr);
export const clientUrl = (addr: string, port: number) => `https://${hostPart(addr)}:${port}`;
export const peerUrl = clientUrl;

/** A TCP port free on `addr` a moment ago. */
export function freePortOn(addr: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, addr, () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

function cmdlineOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** How often berthd looks whether its etcd member still runs. */
const SUPERVISE_MS = 1000;
/** How much of etcd.log's end is read to tell why the member exited. */
const EXIT_LOG_BYTES = 64 * 1024;
/** What etcd says when it finds itself removed from the cluster (then at every start on that data dir). */
const REMOVED = 'the member has been permanently removed from the cluster';

/** Why the member exited: `removed` when etcd took it out of the cluster; etcd's last error. */
export interface MemberExit {
  removed: boolean;
  last?: string;
}

/** Why etcd exited, from what it wrote to its log (zap's JSON lines) since it was started. */
export function exitReason(text: string): MemberExit {
  if (text.includes(REMOVED)) return { removed: true, last: REMOVED };
  let last: string | undefined;
  for (const line of text.split('\n')) {
    if (!/"level":"(error|fatal|panic)"/.test(line)) continue;
    try {
      const e = JSON.parse(line) as { msg?: string; error?: string };
      last = e.error ? `${e.msg}: ${e.error}` : e.msg;
    } catch {
      continue;
    }
  }
  return { removed: false, last };
}

export class EtcdMember {
  #pid = 0;
  #rotator: LogRotator | undefined;
  #watchdog: NodeJS.Timeout | undefined;
  /** Where etcd.log ended when the running process was spawned: what it wrote since tells why it exited. */
  #logFrom = 0;
  /** Why the member last exited (undefined while it never did); `removed`: it is supervised no more. */
  #exit: MemberExit | undefined;

  constructor(readonly config: MemberConfig) {}

  get pidFile(): string {
    return join(this.config.dataDir, '..', 'etcd.pid');
  }

  get logFile(): string {
    return join(this.config.dataDir, '..', 'etcd.log');
  }

  get clientUrl(): string {
    return clientUrl(this.config.addr, this.config.clientPort);
  }

  /** Why the member last exited while berthd watched it (undefined: it never did). */
  get lastExit(): MemberExit | undefined {
    return this.#exit;
  }

  /** Keeps the member already running for this data dir, or starts it; then keeps it running. */
  async start(): Promise<void> {
    const c = this.config;
    await mkdir(c.dataDir, { recursive: true, mode: 0o700 });
    let old = this.#runningPid();
    // One an older berthd started with other flags (the node key read from the data root, which
    // auto-lock seals) starts again as it is started now (its data stays).
    if (old && cmdlineOf(old).slice(1, -1).join('\0') !== this.#args().join('\0')) {
      log.info('etcd member restarted on its new flags', { pid: old });
      await this.stop(false);
      old = undefined;
    }
    if (old) {
      this.#pid = old;
      this.#logFrom = this.#logSize();
      log.info('etcd member already running', { pid: old });
    } else {
      this.#spawn();
      log.info('etcd member started', { pid: this.#pid, client: this.clientUrl });
    }
    this.#watchLog();
    this.#supervise();
  }

  #args(): string[] {
    const c = this.config;
    return [
      '--name', c.name, '--data-dir', c.dataDir,
      '--listen-client-urls', clientUrl(c.addr, c.clientPort), '--advertise-client-urls', clientUrl(c.addr, c.clientPort),
      '--listen-peer-urls', peerUrl(c.addr, c.peerPort), '--initial-advertise-peer-urls', peerUrl(c.addr, c.peerPort),
      '--initial-cluster', c.initialCluster, '--initial-cluster-state', c.initialState, '--initial-cluster-token', c.clusterToken,
      '--cert-file', c.certFile, '--key-file', c.keyFile, '--client-cert-auth', '--trusted-ca-file', c.caFile,
      '--peer-cert-file', c.certFile, '--peer-key-file', c.keyFile, '--peer-client-cert-auth', '--peer-trusted-ca-file', c.caFile,
      // Fast elections on a LAN; members are added just before they start, so no strict reconfig check.
      // Pre-vote: a member back from a cut link (its term raised by the elections it ran alone) asks
      // first, and does not depose the leader the others have (a raft election costs every lease's
      // keep-alives a few seconds, and the swarm its leader).
      '--heartbeat-interval', '100', '--election-timeout', '1000', '--strict-reconfig-check=false', '--pre-vote',
      '--logger', 'zap', '--log-outputs', 'stderr',
    ];
  }

  /** Starts etcd, detached (it outlives berthd), its output appended to etcd.log. */
  #spawn(): void {
    // O_APPEND: after a rotation's truncation etcd's next write lands at the (new) end.
    const logFd = openSync(this.logFile, 'a');
    try {
      this.#logFrom = fstatSync(logFd).size;
      const child = spawn(ETCD_BINARY, this.#args(), { stdio: ['ignore', logFd, logFd], detached: true });
      child.unref();
      if (!child.pid) throw new Error('etcd did not start');
      this.#pid = child.pid;
      writeFileSync(this.pidFile, String(child.pid));
    } finally {
      closeSync(logFd);
    }
  }

  /**
   * While berthd runs, a member that exits (killed, crashed) is started again on its data dir (the
   * flags naming the first cluster no longer count then): at once, then, when it keeps dying, after
   * a delay doubled per exit (1 s up to 30 s; back to nothing once it ran a minute). One that etcd
   * removed from the cluster is not: it would exit again at every start (its owner decides, see
   * lastExit). Each exit is logged with etcd's last error.
   */
  #supervise(): void {
    clearInterval(this.#watchdog);
    let exits = 0;
    let since = Date.now();
    let notBefore = 0;
    this.#watchdog = setInterval(() => {
      if (alive(this.#pid)) {
        if (exits && Date.now() - since > 60_000) exits = 0;
        return;
      }
      if (Date.now() < notBefore) return;
      const dead = this.#pid;
      this.#exit = exitReason(this.#logSince(this.#logFrom));
      if (this.#exit.removed) {
        log.error('the etcd member was removed from the etcd cluster; not started again', { pid: dead });
        clearInterval(this.#watchdog);
        this.#watchdog = undefined;
        return;
      }
      try {
        this.#spawn();
      } catch (err) {
        log.error('starting the etcd member again failed', { err: errorMessage(err) });
        notBefore = Date.now() + 5000;
        return;
      }
      log.warn('the etcd member exited; started again', { pid: dead, now: this.#pid, exits: exits + 1, why: this.#exit.last });
      notBefore = Date.now() + (exits ? Math.min(30_000, 1000 * 2 ** (exits - 1)) : 0);
      exits++;
      since = Date.now();
    }, SUPERVISE_MS);
    this.#watchdog.unref();
  }

  #logSize(): number {
    try {
      return statSync(this.logFile).size;
    } catch {
      return 0;
    }
  }

  /** What etcd.log holds from `from` on (its last EXIT_LOG_BYTES at most; all of it after a rotation). */
  #logSince(from: number): string {
    let fd: number;
    try {
      fd = openSync(this.logFile, 'r');
    } catch {
      return '';
    }
    try {
      const size = fstatSync(fd).size;
      const start = Math.max(size < from ? 0 : from, size - EXIT_LOG_BYTES);
      const buf = Buffer.alloc(size - start);
      const n = readSync(fd, buf, 0, buf.length, start);
      return buf.subarray(0, n).toString('utf8');
    } finally {
      closeSync(fd);
    }
  }

  /** Rotates etcd.log by size while berthd runs. */
  #watchLog(): void {
    this.#rotator?.stop();
    this.#rotator = new LogRotator(this.logFile, etcdLogLimits(), undefined);
    this.#rotator.start();
  }

  /** berthd goes, the member stays: nothing of berthd's watches it or its log any more. */
  detach(): void {
    clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    this.#rotator?.stop();
    this.#rotator = undefined;
  }

  #runningPid(): number | undefined {
    if (!existsSync(this.pidFile)) return undefined;
    const pid = Number(readFileSync(this.pidFile, 'utf8'));
    if (!pid || !alive(pid)) return undefined;
    // Only ours: its command line names our data dir.
    return cmdlineOf(pid).includes(this.config.dataDir) ? pid : undefined;
  }

  /** Stops the member (SIGTERM, SIGKILL after 5 s) and, when asked, removes its data. */
  async stop(removeData: boolean): Promise<void> {
    this.detach();
    const pid = this.#pid || this.#runningPid();
    if (pid && alive(pid)) {
      process.kill(pid, 'SIGTERM');
      for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
    this.#pid = 0;
    if (removeData) {
      await rm(this.config.dataDir, { recursive: true, force: true });
      await rm(this.pidFile, { force: true });
    }
  }
}
