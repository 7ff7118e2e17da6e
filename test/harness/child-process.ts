import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

/** A long-running child whose stdout and stderr go to a log file. */
export interface LoggedProcess {
  readonly pid: number;
  readonly child: ChildProcess;
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  readonly exited: Promise<number | string>;
  hasExited(): boolean;
}

export function spawnLogged(
  command: string,
  args: string[],
  opts: { logFile: string; env?: NodeJS.ProcessEnv; cwd?: string },
): LoggedProcess {
  const fd = openSync(opts.logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(command, args, { stdio: ['ignore', fd, fd], env: opts.env ?? process.env, cwd: opts.cwd });
  } finally {
    // The child has its own copy of the descriptor.
    closeSync(fd);
  }
  let done = false;
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      done = true;
      resolve(code ?? signal ?? -1);
    });
    child.once('error', (err) => {
      done = true;
      resolve(`spawn error: ${err.message}`);
    });
  });
  if (child.pid === undefined) {
    // spawn failed synchronously enough that no pid was assigned; `exited` carries the reason.
    return { pid: -1, child, exited, hasExited: () => true };
  }
  return { pid: child.pid, child, exited, hasExited: () => done };
}

/** Sends SIGTERM, waits up to graceMs, then SIGKILL; resolves once the process is gone. */
export async function stopProcess(proc: LoggedProcess, graceMs = 5000): Promise<void> {
  if (proc.pid <= 0 || proc.hasExited()) return;
  signal(proc.pid, 'SIGTERM');
  const timedOut = await Promise.race([
    proc.exited.then(() => false),
    new Promise<boolean>((r) => setTimeout(() => r(true), graceMs).unref()),
  ]);
  if (timedOut) {
    signal(proc.pid, 'SIGKILL');
    await proc.exited;
  }
}

/** SIGKILL and wait for the exit. */
export async function killProcess(proc: LoggedProcess): Promise<void> {
  if (proc.pid <= 0 || proc.hasExited()) return;
  signal(proc.pid, 'SIGKILL');
  await proc.exited;
}

/** Sends a signal, ignoring "no such process". */
export function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/** Whether the pid exists (zombies included; see isRunning). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether the pid exists and has not exited (a zombie waiting to be reaped does not count). */
export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** The last `lines` lines of a log file ('' when it does not exist). */
export function tailFile(path: string, lines = 40): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return '';
  }
  const all = text.split('\n');
  if (all.length && all[all.length - 1] === '') all.pop();
  return all.slice(-lines).join('\n');
}

/** Runs a short command to completion and collects its output. */
export function run(
  command: string,
  args: string[],
  opts: { input?: string | Buffer; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    if (opts.timeoutMs) {
      timer = setTimeout(() => {
        timedOut = true;
        if (child.pid) signal(child.pid, 'SIGKILL');
      }, opts.timeoutMs);
    }
    child.once('error', (e) => {
      if (timer) clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, sig) => {
      if (timer) clearTimeout(timer);
      const stderr = Buffer.concat(err).toString('utf8');
      resolve({
        code: code ?? 128,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: timedOut ? `${stderr}\n[harness] ${command} killed after ${opts.timeoutMs} ms (${sig})` : stderr,
      });
    });
    child.stdin.on('error', () => {
      // The command may exit without reading its input; that is its answer, not ours to report.
    });
    child.stdin.end(opts.input ?? '');
  });
}
