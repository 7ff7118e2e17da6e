import { readFileSync, readlinkSync } from 'node:fs';
import { leftoverProcesses } from '../../test/harness/process-scan.js';

/**
 * Memory of an engine as the proportional set size (PSS) of the daemon and of every helper it keeps per
 * container (conmon, containerd and its shims), so shared pages are split fairly between them. The
 * containers' own processes are left out: they live in their own pid namespaces.
 */

function pidNamespace(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** Pss of one process in bytes (0 when it exited meanwhile). */
export function pssBytes(pid: number): number {
  try {
    const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const m = /^Pss:\s+(\d+) kB/m.exec(text);
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** The engine's own processes: found through its temp dir or as descendants of `rootPids`, in the host pid namespace. */
export function engineProcesses(dir: string, rootPids: number[]): number[] {
  const hostNs = pidNamespace(process.pid);
  return leftoverProcesses(dir, rootPids)
    .map((r) => r.pid)
    .filter((pid) => pidNamespace(pid) === hostNs);
}

export function processName(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** Total PSS in bytes and the per-command breakdown (command name → bytes, count). */
export function engineMemory(dir: string, rootPids: number[]): { bytes: number; byName: Record<string, { bytes: number; count: number }> } {
  const byName: Record<string, { bytes: number; count: number }> = {};
  let bytes = 0;
  for (const pid of engineProcesses(dir, rootPids)) {
    const b = pssBytes(pid);
    const name = processName(pid);
    const entry = (byName[name] ??= { bytes: 0, count: 0 });
    entry.bytes += b;
    entry.count++;
    bytes += b;
  }
  return { bytes, byName };
}
