/**
 * Calls to the OCI runtime binary (crun or runc) for the short lifecycle commands. Each runtime
 * keeps its state under Berth's own --root, so Berth never sees or touches containers that other
 * tools created with the same runtime.
 */
import { execFile } from 'node:child_process';
import { BerthError, conflict, internal, notFound } from '../lib/errors.js';

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
