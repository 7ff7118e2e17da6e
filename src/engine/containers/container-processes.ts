/**
 * Runs a container's process: writes its /etc files, builds the OCI spec from the record, launches
 * it through the runtime driver (conmon + crun/runc) and reports its exit back to the container
 * service. Network set-up plugs in through the `network` hooks.
 */
import { join } from 'node:path';
import { mkdir, writeFile } from 'node:fs/promises';
import type { ContainerRecord } from './container-model.js';
import type { RuntimeDriver } from '../../runtime/runtime-driver.js';
import type { ExitStatus } from '../../runtime/container-exits.js';
import { buildSpec } from '../../runtime/build-spec.js';
import { specInputFor, withNetworkNamespace } from './container-spec.js';
import { writeEtcFiles } from './container-rootfs.js';
import { log } from '../../lib/log.js';
import { conflict, notFound } from '../../lib/errors.js';
import { LogRotator, logLimits } from './log-rotation.js';
import type { ContainerLookup } from './container-namespaces.js';
import { mountShareableShm, unmountShareableShm } from './container-shm.js';
import { linkHostEntries, linksTo } from './container-links.js';

export interface ContainerProcesses {
  /** `rootfsReady`: the rootfs mount, still under way; network set-up runs alongside it. */
  start(c: ContainerRecord, rootfs: string, rootfsReady?: Promise<void>): Promise<{ pid: number }>;
  kill(c: ContainerRecord, signal: string): Promise<void>;
  pause(c: ContainerRecord): Promise<void>;
  resume(c: ContainerRecord): Promise<void>;
  /** Releases what start set up (runtime state, network); idempotent. */
  cleanup(c: ContainerRecord): Promise<void>;
}

export interface NetworkPreparation {
  /** The netns to join: a path, 'new' for a private one, undefined for the host's. */
  netnsPath: string | 'new' | undefined;
  hostNetwork: boolean;
  /** /etc/resolv.conf and /etc/hosts as the network service writes them. */
  resolvConf: string;
  hosts: string;
  /** Set-up still under way (the DNS servers' updates) that the process must not run before. */
  ready?: Promise<void>;
}

/** What networking needs to know of other containers, looked up here so that it never climbs back. */
export interface NetworkFacts {
  /** With NetworkMode `container:<id>`: that container's pid, whose namespace is joined. */
  joinPid?: number;
  /** /etc/hosts entries besides the container's own: ExtraHosts, then its links'. */
  extraHosts: string[];
}

/** Network plumbing for a container, provided by the network service. */
export interface ContainerNetworking {
  prepare(c: ContainerRecord, facts: NetworkFacts): Promise<NetworkPreparation>;
  /** Called once a container is created: what its start will need may be made ahead meanwhile. */
  created(c: ContainerRecord): void;
  /** Called once the process exists (its namespaces are live). */
  started(c: ContainerRecord, pid: number): Promise<void>;
  /** The /etc/hosts text of a container that is set up, with these extra entries. */
  hostsFile(c: ContainerRecord, extraHosts: string[]): Promise<string>;
  release(c: ContainerRecord): Promise<void>;
}

export type ExitHandler = (id: string, exit: { exitCode: number; exitedAt: Date; oomKilled: boolean }) => Promise<void>;

export class RuntimeProcesses implements ContainerProcesses {
  /** Hooks run after the runtime created the process and before it starts: attach clients connect here. */
  readonly beforeStart = new Map<string, Set<() => Promise<void>>>();
  readonly #watched = new Set<string>();

  constructor(
    readonly runtime: RuntimeDriver,
    readonly network: ContainerNetworking,
    private readonly containerDir: (id: string) => string,
    private readonly onExit: ExitHandler,
    private readonly logOpts: Record<string, string> = {},
    private readonly lookup: ContainerLookup = () => undefined,
    /** Every container: those linking to one that starts get their /etc/hosts rewritten. */
    private readonly all: () => ContainerRecord[] = () => [],
  ) {}

  async start(c: ContainerRecord, rootfs: string, rootfsReady: Promise<void> = Promise.resolve()): Promise<{ pid: number }> {
    const bundleDir = join(this.containerDir(c.id), 'bundle');
    // Independent of the network set-up, so run alongside it (and the rootfs mount): removing a
    // leftover runtime state of an earlier run (it would make create fail), the bundle dir, and
    // the spec input (its user lookup reads the image's passwd: after the mount). Everything
    // settles before a failure is reported, so the caller's cleanup never races a half-done step.
    const prepared = Promise.all([this.runtime.lifecycle.cleanup(c.id).catch(() => undefined), mkdir(bundleDir, { recursive: true })]);
    const shareable = c.hostConfig.IpcMode === 'shareable' ? mountShareableShm(this.containerDir(c.id), c.hostConfig.ShmSize ?? 0) : Promise.resolve();
    const input = Promise.all([rootfsReady, shareable]).then(() => specInputFor(c, { rootfs, cgroupVersion: this.runtime.host.cgroupVersion, lookup: this.lookup, containerDir: this.containerDir }));
    const results = await Promise.allSettled([Promise.resolve().then(() => this.network.prepare(c, this.#networkFacts(c))), rootfsReady, prepared, input]);
    for (const r of results) if (r.status === 'rejected') throw r.reason;
    const net = (results[0] as PromiseFulfilledResult<NetworkPreparation>).value;
    await writeEtcFiles({
      hostnamePath: c.hostnamePath,
      hostsPath: c.hostsPath,
      resolvConfPath: c.resolvConfPath,
      hostname: c.config.Hostname ?? c.id.slice(0, 12),
      resolvConf: net.resolvConf,
      hosts: net.hosts,
    });
    const spec = buildSpec(withNetworkNamespace(await input, net.netnsPath));
    const { pid } = await this.runtime.lifecycle.create({
      id: c.id,
      bundleDir,
      spec,
      runtime: c.runtime,
      logPath: c.logPath,
      noLog: c.hostConfig.LogConfig?.Type === 'none',
      stdin: !!c.config.OpenStdin,
      // As dockerd: only without a tty does the attach client's EOF close the container's stdin
      // (a tty client's detach keys must leave `docker run -it` shells running).
      stdinOnce: !!c.config.StdinOnce && !c.config.Tty,
      tty: !!c.config.Tty,
    });
    try {
      await net.ready;
      await this.network.started(c, pid);
      await this.#refreshLinkingContainers(c);
      for (const hook of this.beforeStart.get(c.id) ?? []) await hook().catch((err) => log.warn('attach before start failed', { id: c.id, err }));
      await this.runtime.lifecycle.start(c.id);
    } catch (err) {
      await this.runtime.lifecycle.cleanup(c.id).catch(() => undefined);
      await this.network.release(c).catch(() => undefined);
      throw err;
    }
    this.watch(c);
    return { pid };
  }

  #networkFacts(c: ContainerRecord): NetworkFacts {
    const mode = c.hostConfig.NetworkMode ?? '';
    let joinPid: number | undefined;
    if (mode.startsWith('container:')) {
      const target = mode.slice('container:'.length);
      const donor = this.lookup(target);
      if (!donor) throw notFound(`No such container: ${target}`);
      joinPid = donor.state.pid;
    }
    return { joinPid, extraHosts: [...(c.hostConfig.ExtraHosts ?? []), ...linkHostEntries(c, this.lookup)] };
  }

  /**
   * A linked container that starts again may have a new address: running containers linking to it get
   * their /etc/hosts rewritten in place (the file is bind-mounted), as dockerd updates them.
   */
  async #refreshLinkingContainers(child: ContainerRecord): Promise<void> {
    // Called as its process starts: the child counts as running already.
    const lookup: ContainerLookup = (x) => {
      const r = this.lookup(x);
      return r?.id === child.id ? { ...r, state: { ...r.state, status: 'running' } } : r;
    };
    for (const p of this.all()) {
      if (p.id === child.id || p.state.status !== 'running' || !linksTo(p, child.name)) continue;
      let extra: string[];
      try {
        extra = [...(p.hostConfig.ExtraHosts ?? []), ...linkHostEntries(p, lookup)];
      } catch {
        continue; // another of its links is down: leave its file as it is
      }
      await writeFile(p.hostsPath, await this.network.hostsFile(p, extra)).catch(() => undefined);
    }
  }

  /** Follows the process until it exits (also for processes re-adopted after a daemon restart). */
  watch(c: ContainerRecord): void {
    const id = c.id;
    if (this.#watched.has(id)) return;
    this.#watched.add(id);
    const limits = logLimits(c.hostConfig.LogConfig?.Config, this.logOpts);
    let rotator: LogRotator | undefined;
    if (limits) {
      rotator = new LogRotator(c.logPath, limits, () => this.runtime.lifecycle.reopenLog(id));
      rotator.start();
    }
    this.runtime
      .lifecycle.waitExit(id)
      .then((exit: ExitStatus) => {
        this.#watched.delete(id);
        rotator?.stop();
        return this.onExit(id, exit);
      })
      .catch((err) => {
        this.#watched.delete(id);
        rotator?.stop();
        log.error('waiting for container exit failed', { id, err });
      });
  }

  async kill(c: ContainerRecord, signal: string): Promise<void> {
    try {
      await this.runtime.lifecycle.kill(c.id, /^\d+$/.test(signal) ? Number(signal) : signal.toUpperCase().startsWith('SIG') ? signal.toUpperCase() : `SIG${signal.toUpperCase()}`);
    } catch (err) {
      throw conflict(`cannot kill container: ${c.name}: ${(err as Error).message}`);
    }
  }

  pause(c: ContainerRecord): Promise<void> {
    return this.runtime.lifecycle.pause(c.id);
  }

  resume(c: ContainerRecord): Promise<void> {
    return this.runtime.lifecycle.resume(c.id);
  }

  async cleanup(c: ContainerRecord): Promise<void> {
    // Independent: the runtime's state and the network's devices. Both are always attempted.
    const [rt, net] = await Promise.allSettled([
      this.runtime.lifecycle.cleanup(c.id).then(() => (c.hostConfig.IpcMode === 'shareable' ? unmountShareableShm(this.containerDir(c.id)) : undefined)),
      this.network.release(c),
    ]);
    if (rt.status === 'rejected') throw rt.reason;
    if (net.status === 'rejected') throw net.reason;
  }
}
