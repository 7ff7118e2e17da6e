/**
 * Name resolution on user-defined networks through aardvark-dns (one process per daemon, serving every
 * DNS-enabled network on its gateway addresses, port 53 by default). Its config directory holds one file per
 * network with at least one container:
 *
 *     <gateway ip>[,<gateway ipv6>]
 *     <container id> <ipv4> <ipv6> <name>,<alias>,...[ <upstream dns>,...]
 *
 * aardvark answers a query with the records of the networks the asking address belongs to, and
 * forwards everything else to the host's resolvers. SIGHUP makes it re-read the directory; with no file
 * left it exits. Files are written in place: the server reads them only as it starts and on SIGHUP, and
 * both come from this module's queue, after the write.
 *
 * A change's file calls are synchronous: its /proc reads (the kernel makes those files in memory), the
 * pid file, a network's file (a small rewrite in place, ~0.2 ms) and the server's log. Through libuv's
 * pool each step of the chain waited behind the file work of containers starting together, tens of ms
 * per step during a `compose up` (aardvark-dns ready after 100-150 ms, the starts waiting for it).
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, readdir, rm, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { internal } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { WorkGate } from '../lib/work-gate.js';
import { aardvarkProcesses, awaitListeners, otherHolders, udpListeners } from './aardvark-listeners.js';

export interface DnsRecord {
  containerId: string;
  ipv4?: string;
  ipv6?: string;
  names: string[];
  /** Upstream servers for this container's other queries (--dns); default: the host's. */
  dnsServers?: string[];
}

export interface DnsNetwork {
  id: string;
  listen: string[];
  records: DnsRecord[];
}

const PID_FILE = 'aardvark.pid';

export class Aardvark {
  readonly #dir: string;
  readonly #tmpDir: string;
  readonly #binary: string;
  readonly #port: number;
  /** Serializes every change: writes, reloads, starts and stops never interleave. */
  readonly #queue = new WorkGate(1);
  /**
   * The queued update that has not started yet. Updates arriving meanwhile join it (the newest
   * content per network wins), so that containers starting together on a network cost one reload,
   * not one each in turn behind the server's start.
   */
  #batch?: { networks: Map<string, { network: DnsNetwork; keepEmpty: boolean }>; done: Promise<void> };
  /** The config and temp dirs exist (made by the first change after start or destroy). */
  #dirsMade = false;

  constructor(stateDir: string, binary: string, port = 53) {
    this.#dir = join(stateDir, 'config');
    this.#tmpDir = join(stateDir, 'tmp');
    this.#binary = binary;
    this.#port = port;
  }

  get configDir(): string {
    return this.#dir;
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    this.#batch = undefined; // updates after this change must not run before it
    // Started a microtask later even when the queue is free: updates made in the same turn (one per
    // network of a container) join the batch #change opens, for one reload.
    return this.#queue.run(() => Promise.resolve().then(fn));
  }

  /**
   * Replaces the whole configuration with `networks` (networks without records are dropped) and makes
   * the server match it: started, reloaded or stopped. Used at daemon start.
   */
  sync(networks: readonly DnsNetwork[]): Promise<void> {
    return this.#serial(async () => {
      await mkdir(this.#dir, { recursive: true });
      await mkdir(this.#tmpDir, { recursive: true });
      const keep = new Set<string>();
      const listen: string[] = [];
      for (const n of networks) {
        if (n.records.length === 0) continue;
        keep.add(n.id);
        listen.push(...n.listen.filter(isIPv4));
        this.#write(n);
      }
      for (const f of await readdir(this.#dir)) {
        if (f !== PID_FILE && !keep.has(f)) await rm(join(this.#dir, f), { force: true });
      }
      await this.#stopStrays();
      await this.#converge(keep.size > 0, listen);
    });
  }

  /** Writes (or, with no records, removes) one network's file and reloads. */
  update(network: DnsNetwork): Promise<void> {
    return this.#change(network, false);
  }

  /**
   * A new network's file, written even with no records, and the server started or reloaded for it:
   * done as the network is created, so that its first containers, starting together, do not wait
   * for the server to start and then for a second reload with the rest of them. The file goes again
   * with the network, or when its last container leaves (update with no records).
   */
  prepare(network: DnsNetwork): Promise<void> {
    return this.#change(network, true);
  }

  #change(network: DnsNetwork, keepEmpty: boolean): Promise<void> {
    if (this.#batch) {
      this.#batch.networks.set(network.id, { network, keepEmpty });
      return this.#batch.done;
    }
    const networks = new Map([[network.id, { network, keepEmpty }]]);
    const batch = {
      networks,
      done: this.#serial(async () => {
        if (this.#batch === batch) this.#batch = undefined;
        try {
          if (!this.#dirsMade) {
            mkdirSync(this.#dir, { recursive: true });
            mkdirSync(this.#tmpDir, { recursive: true });
            this.#dirsMade = true;
          }
          let wrote = false;
          const listen: string[] = [];
          for (const { network: n, keepEmpty: keep } of networks.values()) {
            if (n.records.length > 0 || keep) {
              this.#write(n);
              listen.push(...n.listen.filter(isIPv4));
              wrote = true;
            } else await rm(join(this.#dir, n.id), { force: true });
          }
          await this.#converge(wrote || this.#hasNetworks(), listen);
        } catch (err) {
          this.#dirsMade = false; // made again by the next change, in case they went
          throw err;
        }
      }),
    };
    this.#batch = batch;
    return batch.done;
  }

  /** Stops the server and removes its files. */
  destroy(): Promise<void> {
    return this.#serial(async () => {
      await this.#stop();
      this.#dirsMade = false;
      await rm(this.#dir, { recursive: true, force: true });
      await rm(this.#tmpDir, { recursive: true, force: true });
    });
  }

  /** The server's pid when it runs (for tests and diagnostics). */
  async pid(): Promise<number | null> {
    return this.#runningPid();
  }

  #write(n: DnsNetwork): void {
    const lines = [n.listen.join(',')];
    for (const r of n.records) {
      const names = [...new Set(r.names.map((x) => x.toLowerCase()))].filter((x) => /^[a-z0-9_.-]+$/.test(x));
      if (names.length === 0) continue;
      const upstream = r.dnsServers?.length ? ` ${r.dnsServers.join(',')}` : '';
      lines.push(`${r.containerId} ${r.ipv4 ?? ''} ${r.ipv6 ?? ''} ${names.join(',')}${upstream}`);
    }
    writeFileSync(join(this.#dir, n.id), lines.join('\n') + '\n');
  }

  #hasNetworks(): boolean {
    return readdirSync(this.#dir).some((f) => f !== PID_FILE);
  }

  /**
   * Started, reloaded or stopped to match the directory; a start or reload has finished when its
   * listeners are bound anew (aardvark-listeners.ts), so the names just written are answered and the
   * next reload is not lost. `listen`: the IPv4 addresses that must be served afterwards.
   */
  async #converge(wanted: boolean, listen: string[] = []): Promise<void> {
    const pid = await this.#runningPid();
    if (!wanted) {
      if (pid) await this.#stop();
      return;
    }
    if (pid) {
      const before = new Set((await udpListeners(pid, this.#port)).keys());
      process.kill(pid, 'SIGHUP');
      if (await awaitListeners(pid, this.#port, listen, before)) return;
      if (!(await this.#freeAddresses(pid, listen))) log.warn('aardvark-dns did not rebind its listeners after a reload', { dir: this.#dir });
      return;
    }
    await this.#start(listen);
  }

  /**
   * Our gateway addresses are ours: another aardvark-dns bound to one is a dead daemon's, left when
   * its bridge went as a stray device. It is stopped and ours reloaded. Answers whether ours then listens.
   */
  async #freeAddresses(pid: number, listen: string[]): Promise<boolean> {
    const holders = await otherHolders(listen, this.#port, pid);
    if (holders.length === 0) return false;
    for (const h of holders) {
      log.warn('stopping an aardvark-dns of another daemon that holds this daemon\'s gateway address', { pid: h });
      await terminate(h);
    }
    const before = new Set((await udpListeners(pid, this.#port)).keys());
    process.kill(pid, 'SIGHUP');
    return awaitListeners(pid, this.#port, listen, before);
  }

  /** The pid from the pid file, if that process is alive and is our aardvark (not a recycled pid). */
  async #runningPid(): Promise<number | null> {
    let pid: number;
    try {
      pid = Number(readFileSync(join(this.#dir, PID_FILE), 'utf8').trim());
    } catch {
      return null;
    }
    if (!Number.isInteger(pid) || pid <= 0) return null;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return cmdline.includes(this.#dir) && cmdline.some((a) => a.endsWith('aardvark-dns')) ? pid : null;
    } catch {
      return null;
    }
  }

  async #start(listen: string[]): Promise<void> {
    // aardvark-dns forks into the background once it listens, and the foreground process exits.
    const logPath = join(this.#tmpDir, 'aardvark.log');
    const logFd = openSync(logPath, 'w');
    try {
      const code = await new Promise<number | null>((resolve, reject) => {
        const child = spawn(this.#binary, ['--config', this.#dir, '-p', String(this.#port), 'run'], {
          stdio: ['ignore', logFd, logFd],
          detached: true,
        });
        child.on('error', reject);
        child.on('exit', (c) => resolve(c));
      });
      if (code !== 0) {
        const output = await readFile(logPath, 'utf8').catch(() => '');
        throw internal(`aardvark-dns failed to start (exit ${code}): ${output.trim()}`);
      }
    } finally {
      closeSync(logFd);
    }
    const pid = await this.#runningPid();
    if (!pid) throw internal('aardvark-dns started but wrote no pid file');
    // It says it is ready before it listens or handles SIGHUP (which would kill it until then).
    if (!(await awaitListeners(pid, this.#port, listen)) && !(await this.#freeAddresses(pid, listen))) log.warn('aardvark-dns started but is not listening yet', { dir: this.#dir });
    log.debug('aardvark-dns started', { dir: this.#dir });
  }

  /**
   * At start-up: servers of this directory other than the one its pid file names (left by a daemon
   * killed while it started one, or whose pid file was lost) are stopped. One would hold its
   * addresses, and a new server could not bind them (it stays up, answering nothing).
   */
  async #stopStrays(): Promise<void> {
    for (const { pid, configDir } of await aardvarkProcesses(await this.#runningPid())) {
      if (configDir !== this.#dir) continue;
      log.warn('stopping an aardvark-dns of this daemon that its pid file does not name', { pid });
      await terminate(pid);
    }
  }

  async #stop(): Promise<void> {
    const pid = await this.#runningPid();
    if (!pid) return;
    await terminate(pid);
    await rm(join(this.#dir, PID_FILE), { force: true });
  }
}

/** SIGTERM, then a bounded wait (2 s) for the process to be gone; one already gone is fine. */
async function terminate(pid: number): Promise<void> {
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  for (let i = 0; i < 400 && (await isAlive(pid)); i++) await sleep(5);
}

/** Alive and not a zombie (a daemonized process is reaped by init, possibly late). */
async function isAlive(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

const isIPv4 = (ip: string): boolean => /^\d+\.\d+\.\d+\.\d+$/.test(ip);
