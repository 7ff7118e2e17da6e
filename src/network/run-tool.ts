/**
 * Runs one of the kernel's command-line tools (ip, nft, nsenter, unshare, umount, mount) with optional
 * stdin, and fails with the tool's own stderr. Every network change goes through here, so the number
 * of calls per operation is what sets the setup latency: batch work into as few calls as possible.
 */
import { spawn } from 'node:child_process';
import { BerthError } from '../lib/errors.js';

export class ToolError extends BerthError {
  readonly exitCode: number | null;
  readonly stderr: string;
  constructor(command: string, exitCode: number | null, stderr: string) {
    super('internal', `${command} failed (exit ${exitCode ?? 'signal'}): ${stderr.trim() || 'no output'}`);
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

export interface ToolOptions {
  /**
   * Written to the tool's stdin, then stdin is closed. A promise lets the tool start (and pay its
   * start-up) while its input is still being worked out; if it rejects, stdin is closed empty.
   */
  input?: string | Promise<string>;
  env?: Record<string, string>;
  timeoutMs?: number;
}

/** Runs `cmd args...` and resolves with its stdout; rejects with ToolError on a non-zero exit. */
export function runTool(cmd: string, args: readonly string[], opts: ToolOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      env: opts.env ? { ...process.env, ...opts.env } : process.env,
      timeout: opts.timeoutMs ?? 30_000,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout!.on('data', (d: Buffer) => out.push(d));
    child.stderr!.on('data', (d: Buffer) => err.push(d));
    child.on('error', (e) => reject(new ToolError(cmd, null, e.message)));
    child.on('close', (code) => {
      const stderr = Buffer.concat(err).toString();
      if (code === 0) resolve(Buffer.concat(out).toString());
      else reject(new ToolError(`${cmd} ${args.slice(0, 3).join(' ')}`, code, stderr));
    });
    if (opts.input !== undefined) {
      child.stdin!.on('error', () => {}); // the tool may exit before reading everything; 'close' reports it
      if (typeof opts.input === 'string') child.stdin!.end(opts.input);
      else opts.input.then((text) => child.stdin!.end(text), () => child.stdin!.end());
    }
  });
}
