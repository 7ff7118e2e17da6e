/**
 * A host-wide lock shared by every berthd on the machine (parallel test daemons included): choosing a
 * free subnet and putting it on a bridge must not interleave, or two daemons would pick the same one.
 * The lock file holds the owner's pid; a file whose owner is gone is taken over.
 */
import { openSync, writeSync, closeSync, readFileSync, unlinkSync, existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { unavailable } from '../lib/errors.js';

export const SUBNET_LOCK_PATH = existsSync('/run/lock') ? '/run/lock/berth-subnets.lock' : '/tmp/berth-subnets.lock';

function ownerAlive(path: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(path, 'utf8').trim());
  } catch {
    return true; // being written or just removed: retry
  }
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs `fn` holding the lock at `path`. */
export async function withHostLock<T>(path: string, fn: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(path, 'wx', 0o644);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (!ownerAlive(path)) {
        try { unlinkSync(path); } catch { /* someone else took it over first */ }
        continue;
      }
      if (Date.now() > deadline) throw unavailable(`timed out waiting for the host network lock ${path}`);
      await sleep(5 + Math.random() * 10);
    }
  }
  try {
    return await fn();
  } finally {
    try { unlinkSync(path); } catch { /* already gone */ }
  }
}
