/**
 * Starts a container's conmon, preferably without forking berthd. Node's spawn forks the whole
 * daemon (~100 MB of page tables) and holds the event loop until the child has exec'd: 2-10 ms per
 * container, more under load. A long-lived `sh` of lib/long-lived-shell.ts (one of a small pool)
 * forks a small process instead; the daemon only writes a line to a pipe.
 *
 * The sync pipe becomes a named FIFO in the container's directory: berthd opens the read end
 * (non-blocking, so the open does not wait for a writer), the shell opens it as conmon's fd 3.
 * Each job runs conmon in the foreground: it returns when conmon's first process has written
 * conmon.pid and exited, its daemon child (setsid, reparented to init) holding the FIFO. Only then
 * does berthd start reading: a FIFO that never had a writer reports no hang-up to epoll, one that
 * had one reports EOF when the last writer is gone, which is conmon's end as with a pipe.
 *
 * Where that is not possible (no libc for mkfifo, no shell, or the option `launcher: false`),
 * spawn() with `detached`. The shell ends when berthd does (its stdin closes); conmons started
 * earlier live on, as with a detached spawn.
 */
import { spawn } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { internal } from '../lib/errors.js';
import { loadLibc } from '../lib/libc.js';
import { log } from '../lib/log.js';
import { ShellError, ShellPool, shQuote } from '../lib/long-lived-shell.js';
import { conmonEnv } from './conmon-sync.js';

/** A started conmon: its sync pipe, and when its first process (which writes conmon.pid) is gone. */
export interface Launched {
  pipe: Readable;
  firstExited: Promise<void>;
}

/** Shells launching conmons side by side at most (more only queue for the same two cores here). */
const LAUNCHER_SHELLS = 4;

type Mkfifo = { async: (path: string, mode: number, cb: (err: unknown, res: number) => void) => void };
let mkfifoFn: Mkfifo | null | undefined;

/**
 * mkfifo(3) through libc (koffi): no mkfifo(1) process. On libuv's thread pool: making an inode can
 * take the filesystem a millisecond (ext4 looking for a free one), too long for the event loop when
 * containers start together. False where libc is not callable (or it failed).
 */
export async function makeFifo(path: string): Promise<boolean> {
  if (mkfifoFn === undefined) {
    const c = loadLibc();
    mkfifoFn = c ? (c.lib.func('int mkfifo(const char *path, unsigned int mode)') as Mkfifo) : null;
  }
  const fn = mkfifoFn;
  if (!fn) return false;
  return new Promise((resolve) => fn.async(path, 0o600, (err, res) => resolve(!err && res === 0)));
}

export class ConmonLauncher {
  /** undefined: spawn() (option `launcher: false`, or no shell could be started here). */
  #shell: ShellPool | undefined;
  #closed = false;

  constructor(useShell = true) {
    // conmon's environment (PATH only, see conmonEnv) with the sync pipe's fd number.
    // Several shells: containers started together (compose up) would otherwise queue behind each
    // other's conmon start-up, a few ms each.
    if (useShell) this.#shell = new ShellPool('conmon launcher', LAUNCHER_SHELLS, conmonEnv({ _OCI_SYNCPIPE: '3' }));
  }

  /**
   * Starts `conmon args...` with cwd `dir` (conmon also drops an `oom` file in its working
   * directory) and its stderr appended to `dir`/conmon.log. `syncFifo` is where the launcher shell
   * makes the sync pipe's FIFO; the caller removes it.
   */
  async launch(id: string, conmonPath: string, args: readonly string[], dir: string, syncFifo: string): Promise<Launched> {
    return (await this.#byShell(id, conmonPath, args, dir, syncFifo)) ?? bySpawn(id, conmonPath, args, dir);
  }

  /** Ends the shell; later launches fail. */
  close(): void {
    this.#closed = true;
    this.#shell?.close();
  }

  /** Undefined when the shell cannot be used here: spawn() then. */
  async #byShell(id: string, conmonPath: string, args: readonly string[], dir: string, syncFifo: string): Promise<Launched | undefined> {
    const shell = this.#shell;
    if (!shell || !(await makeFifo(syncFifo))) return undefined;
    // Non-blocking: opening a FIFO's read end does not wait for a writer then (libuv adds O_CLOEXEC).
    const fd = openSync(syncFifo, constants.O_RDONLY | constants.O_NONBLOCK);
    // The redirections belong to the exec (dash drops a subshell's own fd 3 redirection inside a
    // redirected group). A failing one (FIFO gone) is reported on the job's output and status,
    // with no conmon started.
    const redirections = `3>${shQuote(syncFifo)} 2>>${shQuote(join(dir, 'conmon.log'))} </dev/null >/dev/null`;
    const script = `(cd ${shQuote(dir)} && exec ${[conmonPath, ...args].map(shQuote).join(' ')} ${redirections})`;
    let status: number;
    try {
      if (this.#closed) throw new ShellError('the conmon launcher is closed', '');
      const result = await shell.run(script);
      status = result.status;
      if (result.output.trim()) log.warn('conmon launcher', { output: result.output.trim() });
    } catch (err) {
      closeSync(fd);
      if (!(err instanceof ShellError)) throw err;
      if (err.notStarted) {
        log.warn('conmon launcher unavailable, using spawn()', { err });
        if (this.#shell === shell) this.#shell = undefined;
        return undefined;
      }
      // The job's fate is unknown (a conmon may be running): fail this create, not guess.
      log.warn('conmon launcher failed', { id, err });
      throw internal(`OCI runtime create failed: ${err.message}`);
    }
    if (status !== 0) {
      // No conmon holds the FIFO (or none ever did, and epoll would never report the end).
      closeSync(fd);
      const empty = new PassThrough();
      empty.end();
      return { pipe: empty, firstExited: Promise.resolve() };
    }
    return { pipe: new Socket({ fd, readable: true, writable: false }), firstExited: Promise.resolve() };
  }
}

/** conmon by spawn(): a fork of berthd. Its stderr goes to a file: a pipe would tie the daemonized conmon to berthd. */
function bySpawn(id: string, conmonPath: string, args: readonly string[], dir: string): Launched {
  const errFd = openSync(join(dir, 'conmon.log'), 'a');
  try {
    const child = spawn(conmonPath, args, {
      stdio: ['ignore', 'ignore', errFd, 'pipe'],
      env: conmonEnv({ _OCI_SYNCPIPE: '3' }),
      detached: true,
      cwd: dir,
    });
    child.unref();
    const firstExited = new Promise<void>((resolve) => {
      // A spawn failure (ENOENT...) also closes the pipe: reported as "no pid".
      child.once('error', (err) => {
        log.error('conmon spawn failed', { id, err });
        resolve();
      });
      child.once('exit', () => resolve());
    });
    return { pipe: child.stdio[3] as Readable, firstExited };
  } finally {
    closeSync(errFd);
  }
}
