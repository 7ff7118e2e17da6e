/**
 * Starts conmon without forking berthd. Node's spawn forks the whole daemon (~100 MB of page
 * tables) and holds the event loop until the child has exec'd: 2-10 ms per container, more under
 * load. A long-lived `sh` forks a small process instead; the daemon only writes a line to a pipe.
 *
 * The sync pipe becomes a named FIFO in the container's directory: berthd opens the read end
 * (non-blocking, so the open does not wait for a writer), the shell opens it as conmon's fd 3.
 * Each job runs conmon in the foreground: it returns when conmon's first process has written
 * conmon.pid and exited, its daemon child (setsid, reparented to init) holding the FIFO. Only then
 * does berthd start reading: a FIFO that never had a writer reports no hang-up to epoll, one that
 * had one reports EOF when the last writer is gone, which is conmon's end as with a pipe.
 *
 * One job at a time, each ending with a marker line carrying the exit status. The shell ends when
 * berthd does (its stdin closes); conmons started earlier live on, as with a detached spawn.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { log } from '../lib/log.js';
import { conmonEnv } from './conmon-sync.js';
import { loadLibc } from '../lib/libc.js';

export interface ConmonLaunch {
  conmonPath: string;
  args: readonly string[];
  /** conmon's working directory (it drops `oom` there). */
  cwd: string;
  /** conmon's stderr, appended. */
  stderrPath: string;
  /** The FIFO conmon gets as fd 3 (_OCI_SYNCPIPE=3); its read end must be open already. */
  syncFifo: string;
}

/** The launcher could not run the job (shell gone or stuck). */
export class LauncherError extends Error {
  /** True when no shell ever ran (sh could not be started): nothing was launched, spawn() may be used. */
  constructor(message: string, readonly notStarted = false) {
    super(message);
  }
}

const TIMEOUT_MS = 30_000;

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

let mkfifoFn: ((path: string, mode: number) => number) | null | undefined;

/** mkfifo(3) through libc (koffi): no mkfifo(1) process. False where libc is not callable. */
export function makeFifo(path: string): boolean {
  if (mkfifoFn === undefined) {
    const c = loadLibc();
    mkfifoFn = c ? (c.lib.func('int mkfifo(const char *path, unsigned int mode)') as (path: string, mode: number) => number) : null;
  }
  if (!mkfifoFn) return false;
  return mkfifoFn(path, 0o600) === 0;
}

export class ConmonLauncher {
  #sh: ChildProcessWithoutNullStreams | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  /** Runs conmon until its first process exits; resolves with that exit status. */
  launch(job: ConmonLaunch): Promise<number> {
    const run = this.#queue.then(() => this.#run(job));
    this.#queue = run.catch(() => {});
    return run;
  }

  /** Ends the shell; a later launch starts a new one. */
  close(): void {
    this.#closed = true;
    this.#sh?.stdin.end();
    this.#sh = undefined;
  }

  #run(job: ConmonLaunch): Promise<number> {
    const sh = this.#shell();
    const marker = `@@berth-conmon-${randomBytes(6).toString('hex')} `;
    // The redirections belong to the exec (dash drops a subshell's own fd 3 redirection inside a
    // redirected group). A failing one (FIFO gone) is reported on the job's output and status,
    // with no conmon started.
    const redirections = `3>${quote(job.syncFifo)} 2>>${quote(job.stderrPath)} </dev/null >/dev/null`;
    const cmd = `(cd ${quote(job.cwd)} && exec ${[job.conmonPath, ...job.args].map(quote).join(' ')} ${redirections}) 2>&1`;
    const script = `${cmd}; printf '\\n${marker}%d\\n' $?\n`;
    return new Promise((resolve, reject) => {
      let out = '';
      const done = (err: Error | null, status = 0) => {
        clearTimeout(timer);
        sh.stdout.off('data', onData);
        sh.off('exit', onExit);
        sh.off('error', onError);
        if (err) reject(err);
        else resolve(status);
      };
      const onData = (d: Buffer) => {
        out += d.toString();
        const at = out.indexOf(`\n${marker}`);
        if (at < 0) return;
        const end = out.indexOf('\n', at + 1 + marker.length);
        if (end < 0) return;
        const text = out.slice(0, at).trim();
        if (text) log.warn('conmon launcher', { output: text });
        done(null, Number(out.slice(at + 1 + marker.length, end)));
      };
      const onExit = () => done(new LauncherError(`the conmon launcher ended: ${out}`, sh.pid === undefined));
      const onError = (err: Error) => done(new LauncherError(`the conmon launcher could not start: ${err.message}`, sh.pid === undefined));
      const timer = setTimeout(() => {
        if (this.#sh === sh) this.#sh = undefined;
        sh.kill('SIGKILL');
        done(new LauncherError(`the conmon launcher timed out: ${out}`));
      }, TIMEOUT_MS);
      sh.stdout.on('data', onData);
      sh.once('exit', onExit);
      sh.once('error', onError);
      sh.stdin.write(script);
    });
  }

  #shell(): ChildProcessWithoutNullStreams {
    if (this.#sh && this.#sh.exitCode === null && this.#sh.signalCode === null) return this.#sh;
    if (this.#closed) throw new LauncherError('the conmon launcher is closed');
    // conmon's environment (PATH only, see conmonEnv) with the sync pipe's fd number.
    const sh = spawn('sh', [], { stdio: ['pipe', 'pipe', 'pipe'], env: conmonEnv({ _OCI_SYNCPIPE: '3' }) });
    sh.stdin.on('error', () => {}); // an ended shell: the job's 'exit' listener reports it
    sh.on('error', (err) => log.warn('conmon launcher failed', { err }));
    sh.stderr.resume();
    // The shell must not keep the daemon (or a test) alive.
    sh.unref();
    for (const pipe of [sh.stdin, sh.stdout, sh.stderr]) (pipe as unknown as { unref?: () => void }).unref?.();
    this.#sh = sh;
    sh.once('exit', () => {
      if (this.#sh === sh) this.#sh = undefined;
    });
    return sh;
  }
}
