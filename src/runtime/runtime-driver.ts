/**
 * The runtime driver: OCI bundle → conmon → crun/runc. One facade over the parts, each with one
 * job, sharing what init() found on the host (runtime-host.ts):
 *   lifecycle  create, start, signals, pause, update, exits, cleanup (container-lifecycle.ts)
 *   execs      exec sessions: start, resize, abandon (exec-driver.ts)
 *   stats      usage read from the container's cgroup (stats-reader.ts)
 * See README.md in this folder for conmon's files, log format and attach socket framing.
 */
import { ConmonLauncher } from './conmon-launcher.js';
import { ContainerExits } from './container-exits.js';
import { ContainerLifecycle } from './container-lifecycle.js';
import { ExecShell } from './exec-by-shell.js';
import { ExecDriver } from './exec-driver.js';
import { RuntimeShell } from './runtime-cli.js';
import { RuntimeHost, type RuntimeDriverOptions } from './runtime-host.js';
import { StatsReader } from './stats-reader.js';

export type { RuntimeDriverOptions } from './runtime-host.js';

export class RuntimeDriver {
  readonly host: RuntimeHost;
  readonly lifecycle: ContainerLifecycle;
  readonly execs: ExecDriver;
  readonly stats: StatsReader;
  readonly #exits: ContainerExits;
  readonly #launcher: ConmonLauncher;
  readonly #shell: RuntimeShell;
  readonly #execShell: ExecShell | undefined;

  constructor(opts: RuntimeDriverOptions) {
    this.host = new RuntimeHost(opts);
    this.#exits = new ContainerExits(this.host.exitsDir, (id) => this.host.containerDir(id));
    this.#launcher = new ConmonLauncher(opts.launcher !== false);
    this.#shell = new RuntimeShell(opts.launcher !== false);
    this.lifecycle = new ContainerLifecycle(this.host, this.#exits, this.#launcher, this.#shell);
    this.#execShell = opts.launcher !== false ? new ExecShell() : undefined;
    this.execs = new ExecDriver(this.host, this.#execShell);
    this.stats = new StatsReader(this.host);
  }

  /** Finds the binaries, fixes the cgroup layout for crun if needed, starts watching exits. */
  async init(): Promise<void> {
    await this.host.init();
    this.#exits.start();
  }

  /** Stops watching; containers keep running. */
  async close(): Promise<void> {
    this.#exits.close();
    this.#launcher.close();
    this.#shell.close();
    this.#execShell?.close();
    this.host.close();
  }
}
