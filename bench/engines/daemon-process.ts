import { spawnLogged, stopProcess, tailFile, type LoggedProcess } from '../../test/harness/child-process.js';
import { unmountUnder } from '../../test/harness/mounts.js';
import { killAll, leftoverProcesses, stillRunning } from '../../test/harness/process-scan.js';
import { removeDir } from '../../test/harness/temp-dir.js';
import { sleep } from '../lib/timing.js';

/**
 * A daemon the suite runs in its own temp dir, and the teardown every engine shares: SIGTERM the
 * daemon by pid, then SIGKILL whatever still references the dir (shims, conmons, containers),
 * unmount what is left under it and remove it.
 */

export function spawnDaemon(command: string, args: string[], logFile: string, env?: NodeJS.ProcessEnv): LoggedProcess {
  const p = spawnLogged(command, args, { logFile, env });
  if (p.pid <= 0) throw new Error(`could not start ${command}`);
  return p;
}

export async function teardownDaemon(proc: LoggedProcess | undefined, dir: string, graceMs = 20_000): Promise<void> {
  const before = leftoverProcesses(dir, proc && !proc.hasExited() ? [proc.pid] : []);
  if (proc) await stopProcess(proc, graceMs);
  const left = [...before, ...leftoverProcesses(dir)].filter((r) => r.pid !== proc?.pid && stillRunning(r));
  killAll(left);
  const deadline = Date.now() + 10_000;
  while (left.some(stillRunning) && Date.now() < deadline) await sleep(50);
  const stuck = await unmountUnder(dir);
  try {
    await removeDir(dir);
  } catch (err) {
    throw new Error(`could not remove ${dir}: ${(err as Error).message}${stuck.length ? `; still mounted: ${stuck.join(', ')}` : ''}`);
  }
}

export function describeLog(logFile: string, lines = 30): () => string {
  return () => `--- ${logFile} ---\n${tailFile(logFile, lines)}`;
}
