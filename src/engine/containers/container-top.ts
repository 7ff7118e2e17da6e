/**
 * `docker top`: the host's `ps` output (with the caller's options, `-ef` by default) cut down to
 * the container's processes, which are the members of its cgroup and of any cgroup below it.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { conflict, internal, invalidArgument } from '../../lib/errors.js';
import { controllerDir } from '../../runtime/cgroups.js';
import type { RuntimeDriver } from '../../runtime/runtime-driver.js';
import type { ContainerService } from './container-service.js';
import type { TopResult } from '../../lib/docker-api-types.js';

const run = promisify(execFile);

export type { TopResult } from '../../lib/docker-api-types.js';

export async function containerTop(containers: ContainerService, runtime: RuntimeDriver, idOrName: string, psArgs = '-ef'): Promise<TopResult> {
  const c = containers.get(idOrName);
  if (c.state.status !== 'running' && c.state.status !== 'paused') throw conflict(`container ${c.id} is not running`);
  const args = psArgs.split(/\s+/).filter(Boolean);
  const pids = await containerPids(runtime, c.id);
  let stdout: string;
  try {
    ({ stdout } = await run('ps', args, { maxBuffer: 64 * 1024 * 1024 }));
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw internal(`Error running ps: ${(e.stderr || e.message).trim()}`);
  }
  return parsePs(stdout, pids);
}

/** Host pids of every process in the container's cgroup tree. */
export async function containerPids(runtime: RuntimeDriver, id: string): Promise<Set<number>> {
  const path = await runtime.stats.cgroupsPath(id);
  const layout = runtime.stats.cgroupLayout;
  const candidates = layout.kind === 'v2' ? [controllerDir(layout, 'pids', path)] : ['pids', 'memory', 'cpu', 'cpuacct', 'freezer'].map((ctl) => controllerDir(layout, ctl, path));
  const pids = new Set<number>();
  for (const dir of candidates) {
    if (!dir) continue;
    if (await collectProcs(dir, pids)) return pids;
  }
  return pids;
}

/** Adds the pids of a cgroup and its descendants; false when the cgroup does not exist. */
async function collectProcs(dir: string, into: Set<number>): Promise<boolean> {
  let text: string;
  try {
    text = await fs.readFile(join(dir, 'cgroup.procs'), 'utf8');
  } catch {
    return false;
  }
  for (const line of text.split('\n')) if (line) into.add(Number(line));
  for (const ent of await fs.readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (ent.isDirectory()) await collectProcs(join(dir, ent.name), into);
  }
  return true;
}

/**
 * The header gives the titles; the last column (the command) takes the rest of each line. With
 * thread listings (`-L`, `m`) a row whose PID is "-" belongs to the process row above it.
 */
export function parsePs(output: string, pids: Set<number>): TopResult {
  const lines = output.split('\n');
  const titles = (lines[0] ?? '').trim().split(/\s+/).filter(Boolean);
  const pidIndex = titles.indexOf('PID');
  if (pidIndex < 0) throw invalidArgument(`Couldn't find PID field in ps output`);
  const processes: string[][] = [];
  let lastIncluded = false;
  for (const line of lines.slice(1)) {
    const fields = line.trim().split(/\s+/).filter(Boolean);
    if (fields.length === 0) continue;
    const pidField = fields[pidIndex];
    if (pidField === '-') {
      if (lastIncluded) processes.push(row(fields, titles.length));
      continue;
    }
    const pid = Number(pidField);
    if (!Number.isInteger(pid)) throw internal(`Unexpected pid '${pidField}'`);
    lastIncluded = pids.has(pid);
    if (lastIncluded) processes.push(row(fields, titles.length));
  }
  return { Titles: titles, Processes: processes };
}

function row(fields: string[], columns: number): string[] {
  if (fields.length <= columns) return [...fields, ...Array<string>(columns - fields.length).fill('')];
  return [...fields.slice(0, columns - 1), fields.slice(columns - 1).join(' ')];
}
