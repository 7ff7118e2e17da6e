/**
 * A non-tty exec without stdin whose stdout and stderr may arrive as one stream (a healthcheck
 * probe), started from a long-lived shell (lib/long-lived-shell.ts) instead of a fork of berthd: a
 * probe every interval forked the whole daemon each time, holding its event loop for milliseconds.
 *
 * As with the conmon launcher (conmon-launcher.ts), the pipes become named FIFOs in the exec's
 * directory: berthd opens their read ends (non-blocking), then the job's subshell opens the write
 * ends itself and starts conmon in the background with them as its sync pipe (fd 3) and its stdout
 * and stderr. The subshell exits at once, so each FIFO has had a writer before berthd reads it (a
 * FIFO that never had one would read as ended), and conmon, orphaned, is nobody's zombie. The exit
 * code comes as conmon's second sync message; conmon's own exit status is not seen (255 when it
 * ended without that message).
 */
import { closeSync, constants, openSync } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { ShellError, ShellPool, shQuote } from '../lib/long-lived-shell.js';
import { makeFifo } from './conmon-launcher.js';
import { conmonEnv, SyncPipeReader } from './conmon-sync.js';
import { failedExecExitCode, type ExecResult, type ExecSession } from './exec-session.js';
import { cleanMessage } from './runtime-cli.js';

/** Shells starting probes side by side at most. */
const PROBE_SHELLS = 2;

export class ExecShell {
  #pool: ShellPool | undefined = new ShellPool('exec launcher', PROBE_SHELLS, conmonEnv({ _OCI_SYNCPIPE: '3' }));

  /**
   * Starts `conmon args...` (an exec with `-l passthrough --sync`) in `dir`; undefined when no shell
   * can be used here (the caller spawns then). `dispose` removes the exec's directory.
   */
  async start(execId: string, conmonPath: string, args: readonly string[], dir: string, dispose: () => Promise<void>): Promise<ExecSession | undefined> {
    const pool = this.#pool;
    const syncPath = join(dir, 'sync');
    const outPath = join(dir, 'out');
    if (!pool || !(await makeFifo(syncPath)) || !(await makeFifo(outPath))) return undefined;
    const syncFd = openSync(syncPath, constants.O_RDONLY | constants.O_NONBLOCK);
    let outFd: number;
    try {
      outFd = openSync(outPath, constants.O_RDONLY | constants.O_NONBLOCK);
    } catch (err) {
      closeSync(syncFd);
      throw err;
    }
    const command = [conmonPath, ...args, '-l', 'passthrough'].map(shQuote).join(' ');
    const script = `(exec 3>${shQuote(syncPath)} 4>${shQuote(outPath)} && cd ${shQuote(dir)} && ${command} </dev/null >&4 2>&4 4>&- &)`;
    let status: number;
    let output: string;
    try {
      ({ status, output } = await pool.run(script));
    } catch (err) {
      closeSync(syncFd);
      closeSync(outFd);
      if (!(err instanceof ShellError)) throw err;
      if (err.notStarted && this.#pool === pool) this.#pool = undefined;
      if (err.notStarted) return undefined;
      return failed(execId, err.message, dispose);
    }
    if (status !== 0) {
      closeSync(syncFd);
      closeSync(outFd);
      return failed(execId, output.trim() || `the exec launcher failed (status ${status})`, dispose);
    }
    const syncPipe = new Socket({ fd: syncFd, readable: true, writable: false });
    const out = new Socket({ fd: outFd, readable: true, writable: false });
    const sync = new SyncPipeReader(syncPipe);
    const stdout = out.pipe(new PassThrough());
    // A reader that gives up (a probe's child still holds the output) lets go of the FIFO too.
    stdout.once('close', () => out.destroy());
    const closed = Promise.all([new Promise((r) => syncPipe.once('close', r)), new Promise((r) => out.once('close', r))]);
    const first = await sync.next();
    if (!first || first.data < 0) {
      let text = '';
      stdout.on('data', (d: Buffer) => (text += d.toString('utf8')));
      await closed;
      return failed(execId, cleanMessage(first?.message || text || 'conmon exited without starting the process'), dispose);
    }
    const exit = sync.next().then((m): ExecResult => (m && m.data >= 0 ? { exitCode: m.data } : { exitCode: 255, ...(m?.message ? { error: m.message } : {}) }));
    void Promise.all([exit, closed]).then(dispose, () => undefined);
    return { execId, pid: first.data, stdout, exit, dispose };
  }

  close(): void {
    this.#pool?.close();
  }
}

function ended(): Readable {
  const s = new PassThrough();
  s.end();
  return s;
}

/** An exec that never ran: its error as the exit, its directory removed. */
function failed(execId: string, message: string, dispose: () => Promise<void>): ExecSession {
  void dispose();
  return { execId, pid: 0, stdout: ended(), exit: Promise.resolve({ exitCode: failedExecExitCode(message), error: message }), dispose };
}
