import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';

/**
 * Runs one command to completion and times it from spawn to exit. Stdout is counted, and only its
 * first `keepStdout` bytes are kept, so a command printing hundreds of megabytes costs no memory.
 */

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  ms: number;
}

export interface CommandOptions {
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  keepStdout?: number;
  cwd?: string;
}

export function runCommand(command: string, args: string[], opts: CommandOptions = {}): Promise<CommandResult> {
  const keep = opts.keepStdout ?? 64 * 1024;
  const timeoutMs = opts.timeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(command, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let kept = 0;
    let stdoutBytes = 0;
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => {
      stdoutBytes += b.length;
      if (kept < keep) {
        out.push(b.subarray(0, keep - kept));
        kept += Math.min(b.length, keep - kept);
      }
    });
    child.stderr.on('data', (b: Buffer) => err.push(b));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid) {
        try {
          process.kill(child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }, timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const ms = performance.now() - t0;
      const stderr = Buffer.concat(err).toString('utf8');
      resolve({
        code: code ?? 128,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: timedOut ? `${stderr}\n${command} killed after ${timeoutMs} ms (${signal})` : stderr,
        stdoutBytes,
        ms,
      });
    });
  });
}

/** Runs a command that must succeed; returns its result or throws with its stderr. */
export async function mustRun(command: string, args: string[], opts: CommandOptions = {}): Promise<CommandResult> {
  const r = await runCommand(command, args, opts);
  if (r.code !== 0) throw new Error(`${command} ${args.join(' ')}: exit ${r.code}: ${(r.stderr || r.stdout).trim().slice(0, 500)}`);
  return r;
}
