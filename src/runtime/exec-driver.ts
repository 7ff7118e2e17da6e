/**
 * Exec sessions of the driver's containers: starting one (exec-session.ts speaks conmon's exec
 * protocol), resizing its tty, and ending one a dead daemon left behind.
 */
import { readlink, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { checkId } from './container-meta.js';
import { resizeTty } from './conmon-control.js';
import type { ExecShell } from './exec-by-shell.js';
import { startExec, type ExecOptions, type ExecSession } from './exec-session.js';
import { isProcessAlive, readPidFile } from './pid-file.js';
import type { RuntimeHost } from './runtime-host.js';

export class ExecDriver {
  constructor(
    private readonly host: RuntimeHost,
    /** Starts healthcheck probes (`combinedOutput`) without forking berthd; none: spawned. */
    private readonly shell?: ExecShell,
  ) {}

  /** Runs a process in a running container; see exec-session.ts. */
  async exec(id: string, opts: ExecOptions): Promise<ExecSession> {
    const host = this.host;
    const meta = await host.metas.must(id);
    checkId(opts.execId, 'exec id');
    return startExec(
      {
        conmonPath: host.conmonPath,
        runtime: host.binary(meta.runtime),
        containerId: id,
        bundleDir: meta.bundleDir,
        execDir: host.execDir(id, opts.execId),
        socketsDir: host.socketsDir,
        hardLimits: host.hardLimits,
        capabilities: host.capabilities,
        shell: this.shell,
      },
      opts,
    );
  }

  /** Resizes a tty exec's terminal (the ctl FIFO in the exec's directory). */
  async resize(id: string, execId: string, height: number, width: number): Promise<void> {
    checkId(id);
    checkId(execId, 'exec id');
    await resizeTty(this.host.execDir(id, execId), height, width);
  }

  /**
   * Ends an exec left by a daemon that died while it ran (nobody reads its output any more): its
   * process is killed when it still runs in the container's pid namespace (a reused pid elsewhere is
   * left alone), and its directory goes.
   */
  async abandon(id: string, execId: string, containerPid: number): Promise<void> {
    checkId(id);
    checkId(execId, 'exec id');
    const dir = this.host.execDir(id, execId);
    const pid = await readPidFile(join(dir, 'pid')).catch(() => undefined);
    if (pid && containerPid > 0 && (await isProcessAlive(pid))) {
      const ns = (p: number) => readlink(`/proc/${p}/ns/pid`).catch(() => '');
      const [mine, theirs] = await Promise.all([ns(pid), ns(containerPid)]);
      if (mine && mine === theirs) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    await rm(dir, { recursive: true, force: true });
    await rm(join(this.host.socketsDir, execId), { force: true });
  }
}
