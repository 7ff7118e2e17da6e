/**
 * Calls to the OCI runtime binary (crun or runc) for the short lifecycle commands. Each runtime
 * keeps its state under Berth's own --root, so Berth never sees or touches containers that other
 * tools created with the same runtime.
 */
import { execFile } from 'node:child_process';
import { BerthError, conflict, internal, notFound } from '../lib/errors.js';
import { ShellError, ShellPool, shQuote } from '../lib/long-lived-shell.js';

export type RuntimeName = 'crun' | 'runc';
export const RUNTIME_NAMES: readonly RuntimeName[] = ['crun', 'runc'];

export interface RuntimeBinary {
  name: RuntimeName;
  /** Absolute path of the binary. */
  path: string;
  /** The --root directory holding this runtime's state for Berth's containers. */
  root: string;
}

export type RuntimeStatus = 'creating' | 'created' | 'running' | 'paused' | 'stopped';

export interface RuntimeState {
  id: string;
  status: RuntimeStatus;
  pid: number;
  bundle: string;
}

/** crun says "No such file or directory" about its status file; runc says "container does not exist". */
const NOT_FOUND = /does not exist|No such file or directory|not found/i;

/** Runs `<runtime> --root <root> <args...>`; failures carry the runtime's own message. */
export function runRuntime(rt: RuntimeBinary, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(rt.path, ['--root', rt.root, ...args], { maxBuffer: 4 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      reject(runtimeError(rt, args, stderr || err.message, err));
    });
  });
}

/** Shells running runtime commands side by side at most (a `down` signals ten containers at once). */
const RUNTIME_SHELLS = 4;

/**
 * Runtime commands whose only output is an error (kill) run from long-lived shells
 * (lib/long-lived-shell.ts) instead of forking berthd: a `compose down` signals every container twice
 * (TERM, then KILL), and each fork of the daemon held its event loop for milliseconds. Without a
 * shell (`useShell` false, or none could start) they are spawned as by runRuntime.
 */
export class RuntimeShell {
  #pool: ShellPool | undefined;

  constructor(useShell = true) {
    if (useShell) this.#pool = new ShellPool('runtime shell', RUNTIME_SHELLS);
  }

  /** `<runtime> --root <root> <args...>`; failures carry the runtime's message, as with runRuntime. */
  async run(rt: RuntimeBinary, args: string[]): Promise<void> {
    const pool = this.#pool;
    if (!pool) return void (await runRuntime(rt, args));
    let result;
    try {
      result = await pool.run(`${[rt.path, '--root', rt.root, ...args].map(shQuote).join(' ')} </dev/null`);
    } catch (err) {
      if (!(err instanceof ShellError)) throw err;
      if (!err.notStarted) throw internal(`${rt.name} ${args[0] ?? ''}: ${err.message}`, err);
      if (this.#pool === pool) this.#pool = undefined;
      return void (await runRuntime(rt, args));
    }
    if (result.status !== 0) throw runtimeError(rt, args, result.output || `exit status ${result.status}`, undefined);
  }

  close(): void {
    this.#pool?.close();
  }
}

/** The container exists but is in the wrong state (kill/pause of a stopped one, start of an exited one). */
const WRONG_STATE = /not running|No such process|has stopped|is paused|not paused|already/i;

function runtimeError(rt: RuntimeBinary, args: string[], stderr: string, cause: unknown): BerthError {
  const message = cleanMessage(stderr);
  const text = `${rt.name} ${args[0] ?? ''}: ${message}`;
  if (WRONG_STATE.test(message)) return conflict(text);
  return NOT_FOUND.test(message) ? notFound(text) : internal(text, cause);
}

/** runc logs logrus lines (`time=... level=error msg="..."`): keep just the messages. */
export function cleanMessage(stderr: string): string {
  const lines = stderr.trim().split('\n').filter(Boolean);
  const msgs = lines.map((l) => {
    const m = /msg="((?:[^"\\]|\\.)*)"/.exec(l);
    return m?.[1] ? m[1].replace(/\\"/g, '"') : l;
  });
  return msgs.join('; ');
}

export async function runtimeState(rt: RuntimeBinary, id: string): Promise<RuntimeState | undefined> {
  try {
    const out = await runRuntime(rt, ['state', id]);
    const s = JSON.parse(out) as { id: string; status: RuntimeStatus; pid?: number; bundle: string };
    return { id: s.id, status: s.status, pid: s.pid ?? 0, bundle: s.bundle };
  } catch (err) {
    if (err instanceof BerthError && err.kind === 'not-found') return undefined;
    throw err;
  }
}
