/** Pid files and liveness checks for processes that are not berthd's children (conmon). */
import { readFile } from 'node:fs/promises';

export async function readPidFile(path: string): Promise<number | undefined> {
  try {
    const n = Number((await readFile(path, 'utf8')).trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * True when `pid` runs and is not a zombie. With `comm`, the process name must match too, which
 * guards against a reused pid after a reboot or a long downtime.
 */
export async function isProcessAlive(pid: number, comm?: string): Promise<boolean> {
  let stat: string;
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  // Format: "pid (comm) state ..."; comm may contain spaces and parentheses.
  const open = stat.indexOf('(');
  const close = stat.lastIndexOf(')');
  const name = stat.slice(open + 1, close);
  const state = stat.slice(close + 2, close + 3);
  if (state === 'Z' || state === 'X') return false;
  return comm === undefined || name === comm;
}
