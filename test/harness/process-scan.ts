import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Finds processes a test daemon left behind (conmon, runtimes, container processes) by what they
 * reference, never by name: a process counts when its command line, cwd or root mentions the test's
 * unique temp dir, or when it descends from one that does or from the daemon itself.
 */

interface ProcInfo {
  pid: number;
  ppid: number;
  startTime: string;
}

/** A process identified by pid plus start time, so a recycled pid is never mistaken for it. */
export interface ProcRef {
  pid: number;
  startTime: string;
}

function listProcs(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // The command name is in parentheses and may contain spaces; fields resume after the last ')'.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(name), ppid: Number(rest[1]), startTime: rest[19] ?? '' });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

function mentions(pid: number, dir: string): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (cmdline.includes(dir)) return true;
  } catch {
    return false;
  }
  for (const link of ['cwd', 'root']) {
    try {
      const target = readlinkSync(`/proc/${pid}/${link}`);
      if (target === dir || target.startsWith(`${dir}/`)) return true;
    } catch {
      // kernel threads and exited processes have no readable links
    }
  }
  return false;
}

/** Pids that belong to a test daemon (see the module comment), excluding this process and its ancestors. */
export function leftoverProcesses(dir: string, rootPids: number[] = []): ProcRef[] {
  const procs = listProcs();
  const children = new Map<number, number[]>();
  for (const p of procs) {
    const list = children.get(p.ppid) ?? [];
    list.push(p.pid);
    children.set(p.ppid, list);
  }
  const protectedPids = new Set<number>([1]);
  for (let pid = process.pid, guard = 0; pid > 1 && guard < 64; guard++) {
    protectedPids.add(pid);
    pid = procs.find((p) => p.pid === pid)?.ppid ?? 1;
  }
  const found = new Set<number>();
  const queue = [...rootPids, ...procs.filter((p) => mentions(p.pid, dir)).map((p) => p.pid)];
  while (queue.length) {
    const pid = queue.pop()!;
    if (found.has(pid) || protectedPids.has(pid)) continue;
    if (!procs.some((p) => p.pid === pid)) continue;
    found.add(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return procs.filter((p) => found.has(p.pid)).map(({ pid, startTime }) => ({ pid, startTime }));
}

function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** Whether the process still exists and is not a zombie. */
export function stillRunning(ref: ProcRef): boolean {
  try {
    const stat = readFileSync(`/proc/${ref.pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[19] === ref.startTime && rest[0] !== 'Z';
  } catch {
    return false;
  }
}

/** SIGKILLs the given processes, skipping any that exited (or whose pid now names another process). */
export function killAll(refs: ProcRef[]): void {
  for (const { pid, startTime } of refs) {
    if (startTimeOf(pid) !== startTime) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
