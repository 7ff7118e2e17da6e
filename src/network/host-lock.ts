/**
 * A host-wide lock shared by every berthd on the machine (parallel test daemons included): choosing a
 * free subnet and putting it on a bridge must not interleave, or two daemons would pick the same one.
 * The lock file holds the owner's pid; a file whose owner is gone is taken over.
 *
 * Also a claim on a name prefix for as long as a daemon runs: two daemons with the same prefix would
 * share (and tear down) each other's bridges and nftables tables.
 */
import { openSync, writeSync, closeSync, readFileSync, unlinkSync, existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { conflict, unavailable } from '../lib/errors.js';

const LOCK_DIR = existsSync('/run/lock') ? '/run/lock' : '/tmp';
export const SUBNET_LOCK_PATH = `${LOCK_DIR}/berth-subnets.lock`;

function ownerAlive(path: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(path, 'utf8').trim());
  } catch {
    return true; // being written or just removed: retry
  }
  return pidAlive(pid);
}

function pidAlive(pid: number): boolean {
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

export function prefixClaimPath(prefix: string): string {
  return `${LOCK_DIR}/berth-net-${prefix}.pid`;
}

/**
 * Claims a name prefix for this process. Fails with a conflict while another live process holds it;
 * a claim left by a dead process, or by this one, is taken over.
 */
export function claimPrefix(prefix: string): void {
  const path = prefixClaimPath(prefix);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o644);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let owner = 0;
      try {
        owner = Number(readFileSync(path, 'utf8').trim());
      } catch {
        continue;
      }
      if (owner === process.pid) return;
      if (pidAlive(owner)) throw conflict(`network prefix "${prefix}" is in use by another daemon (pid ${owner}); give each daemon its own prefix`);
      try { unlinkSync(path); } catch { /* raced with another taker */ }
    }
  }
  throw unavailable(`could not claim network prefix "${prefix}" (${path})`);
}

export function releasePrefix(prefix: string): void {
  const path = prefixClaimPath(prefix);
  try {
    if (Number(readFileSync(path, 'utf8').trim()) === process.pid) unlinkSync(path);
  } catch {
    // not ours or already gone
  }
}
