/**
 * Cgroup layout detection, the hybrid-layout fix crun needs, container cgroup removal and stats.
 *
 * Layouts:
 * - v2: /sys/fs/cgroup is cgroup2 (most hosts with systemd today).
 * - v1: only v1 hierarchies, one per controller (or co-mounted group) under /sys/fs/cgroup.
 * - hybrid: v1 hierarchies plus a cgroup2 mount at /sys/fs/cgroup/unified. Any controller not
 *   mounted as v1 stays bound to that cgroup2 tree. crun (1.8) then refuses every container
 *   ("cgroups in hybrid mode not supported, drop all controllers from cgroupv2"); runc does not care.
 *   The fix: mount each such controller as its own v1 hierarchy. The kernel allows moving a
 *   controller off cgroup2 while no cgroup2 group has it enabled in cgroup.subtree_control.
 *
 * Containers get cgroupsPath `<parent>/<id>` (cgroupfs manager, no systemd); on v1 the runtime
 * creates that directory in every hierarchy, including named ones and the unified one.
 */
import { execFile } from 'node:child_process';
import { readFile, readdir, rmdir, mkdir } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);
const CGROUP_ROOT = '/sys/fs/cgroup';

export type CgroupLayoutKind = 'v2' | 'v1' | 'hybrid';

export interface CgroupLayout {
  kind: CgroupLayoutKind;
  /** v1 hierarchies: mount point → its controllers (or `name=...` for named hierarchies). */
  v1: Map<string, string[]>;
  /** The cgroup2 mount point: /sys/fs/cgroup on v2, /sys/fs/cgroup/unified (usually) on hybrid. */
  unified?: string;
}

/** Mount points in /proc/self/mountinfo escape spaces and a few others as octal. */
function unescapeMountPath(p: string): string {
  return p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** Reads the layout from mountinfo text (exported for tests). */
export function parseCgroupLayout(mountinfo: string): CgroupLayout {
  const v1 = new Map<string, string[]>();
  let unified: string | undefined;
  for (const line of mountinfo.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(' ');
    const [fstype, , superOpts = ''] = line.slice(sep + 3).split(' ');
    const mountPoint = unescapeMountPath(left[4] ?? '');
    if (!mountPoint.startsWith(CGROUP_ROOT)) continue;
    if (fstype === 'cgroup2') {
      unified = mountPoint;
    } else if (fstype === 'cgroup') {
      const controllers = superOpts.split(',').filter((o) => o !== 'rw' && o !== 'ro' && !o.startsWith('release_agent') && o !== 'clone_children' && o !== 'noprefix' && o !== 'xattr' && o !== 'cpuset_v2_mode');
      v1.set(mountPoint, controllers);
    }
  }
  const kind: CgroupLayoutKind = unified === CGROUP_ROOT ? 'v2' : unified ? (v1.size > 0 ? 'hybrid' : 'v2') : 'v1';
  return { kind, v1: kind === 'v2' ? new Map() : v1, unified };
}

export function detectCgroupLayout(): CgroupLayout {
  return parseCgroupLayout(readFileSync('/proc/self/mountinfo', 'utf8'));
}

/** Controllers still bound to the hybrid cgroup2 tree (what makes crun refuse to run). */
export async function controllersOnUnified(layout: CgroupLayout): Promise<string[]> {
  if (layout.kind !== 'hybrid' || !layout.unified) return [];
  const text = await readFile(join(layout.unified, 'cgroup.controllers'), 'utf8');
  return text.split(/\s+/).filter(Boolean);
}

/**
 * On a hybrid host, mounts every controller left on cgroup2 as its own v1 hierarchy at
 * /sys/fs/cgroup/<controller>, so crun sees a plain v1 layout. Returns the layout after the change
 * and the controllers it could not move (with the reason), which leaves crun unusable.
 */
export async function fixHybridLayout(
  layout: CgroupLayout,
  root = CGROUP_ROOT,
): Promise<{ layout: CgroupLayout; mounted: string[]; failed: { controller: string; error: string }[] }> {
  const failed: { controller: string; error: string }[] = [];
  const mounted: string[] = [];
  for (const controller of await controllersOnUnified(layout)) {
    const dir = join(root, controller);
    // Another berthd (or test) may have just moved it: mounting again would only stack a second mount.
    if (!(await controllersOnUnified(layout)).includes(controller)) continue;
    try {
      await mkdir(dir, { recursive: true });
      await execFileP('mount', ['-t', 'cgroup', '-o', controller, 'cgroup', dir]);
      mounted.push(dir);
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      failed.push({ controller, error: (e.stderr || e.message).trim() });
    }
  }
  return { layout: detectCgroupLayout(), mounted, failed };
}

/** Every directory the runtime may have created for a container's cgroupsPath. */
export function cgroupDirs(layout: CgroupLayout, cgroupsPath: string): string[] {
  const dirs = [...layout.v1.keys()].map((m) => join(m, cgroupsPath));
  if (layout.unified) dirs.push(join(layout.unified, cgroupsPath));
  return dirs;
}

/**
 * Removes a container's (empty) cgroup directories, children first; missing ones are fine.
 * Returns the directories that could not be removed (still busy).
 */
export async function removeCgroup(layout: CgroupLayout, cgroupsPath: string): Promise<string[]> {
  // One tree per hierarchy, independent of each other: removed side by side.
  const dirs = cgroupDirs(layout, cgroupsPath);
  const removed = await Promise.all(dirs.map((dir) => removeTree(dir)));
  return dirs.filter((_, i) => !removed[i]);
}

/** rmdir of a cgroup tree bottom-up (cgroup dirs contain only control files and child groups). */
async function removeTree(dir: string): Promise<boolean> {
  // A container's group rarely has children: one rmdir usually does it (or finds it gone).
  try {
    await rmdir(dir);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return true;
    if (code !== 'EBUSY' && code !== 'ENOTEMPTY') throw err;
  }
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw err;
  }
  let ok = true;
  for (const e of entries) if (e.isDirectory()) ok = (await removeTree(join(dir, e.name))) && ok;
  try {
    await rmdir(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return ok;
    if (code === 'EBUSY') return false;
    throw err;
  }
  return ok;
}

export interface CgroupStats {
  /** Total CPU time in nanoseconds. */
  cpuUsageNs: number;
  memoryUsage: number;
  /** undefined = unlimited. */
  memoryLimit?: number;
  /** Parsed memory.stat (v1 or v2 keys as the kernel names them). */
  memoryStat: Record<string, number>;
  pids: number;
  /** undefined = unlimited. */
  pidsLimit?: number;
}

/** Kernel "no limit" values for memory on v1 are huge page-aligned numbers. */
const UNLIMITED_THRESHOLD = 2 ** 60;

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function parseFlatKeyed(text: string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of (text ?? '').split('\n')) {
    const [k, v] = line.split(' ');
    if (k && v !== undefined) out[k] = Number(v);
  }
  return out;
}

function parseLimit(text: string | undefined): number | undefined {
  const t = text?.trim();
  if (!t || t === 'max') return undefined;
  const n = Number(t);
  return n >= UNLIMITED_THRESHOLD ? undefined : n;
}

function v1Dir(layout: CgroupLayout, controller: string, cgroupsPath: string): string | undefined {
  for (const [mount, controllers] of layout.v1) if (controllers.includes(controller)) return join(mount, cgroupsPath);
  return undefined;
}

/** Usage numbers from a container's cgroup files; undefined when the cgroup is gone. */
export async function readCgroupStats(layout: CgroupLayout, cgroupsPath: string): Promise<CgroupStats | undefined> {
  if (layout.kind === 'v2') {
    const dir = join(layout.unified ?? CGROUP_ROOT, cgroupsPath);
    const cpu = await readOptional(join(dir, 'cpu.stat'));
    if (cpu === undefined) return undefined;
    const [mem, memMax, memStat, pids, pidsMax] = await Promise.all(
      ['memory.current', 'memory.max', 'memory.stat', 'pids.current', 'pids.max'].map((f) => readOptional(join(dir, f))),
    );
    return {
      cpuUsageNs: (parseFlatKeyed(cpu).usage_usec ?? 0) * 1000,
      memoryUsage: Number(mem?.trim() ?? 0),
      memoryLimit: parseLimit(memMax),
      memoryStat: parseFlatKeyed(memStat),
      pids: Number(pids?.trim() ?? 0),
      pidsLimit: parseLimit(pidsMax),
    };
  }
  const cpuDir = v1Dir(layout, 'cpuacct', cgroupsPath);
  const memDir = v1Dir(layout, 'memory', cgroupsPath);
  const pidsDir = v1Dir(layout, 'pids', cgroupsPath);
  const cpu = cpuDir ? await readOptional(join(cpuDir, 'cpuacct.usage')) : undefined;
  const mem = memDir ? await readOptional(join(memDir, 'memory.usage_in_bytes')) : undefined;
  if (cpu === undefined && mem === undefined) return undefined;
  const [memLimit, memStat] = memDir
    ? await Promise.all([readOptional(join(memDir, 'memory.limit_in_bytes')), readOptional(join(memDir, 'memory.stat'))])
    : [undefined, undefined];
  const [pids, pidsMax] = pidsDir
    ? await Promise.all([readOptional(join(pidsDir, 'pids.current')), readOptional(join(pidsDir, 'pids.max'))])
    : [undefined, undefined];
  return {
    cpuUsageNs: Number(cpu?.trim() ?? 0),
    memoryUsage: Number(mem?.trim() ?? 0),
    memoryLimit: parseLimit(memLimit),
    memoryStat: parseFlatKeyed(memStat),
    pids: Number(pids?.trim() ?? 0),
    pidsLimit: parseLimit(pidsMax),
  };
}

/** The directory holding one v1 controller's files for a container (tests, diagnostics). */
export function controllerDir(layout: CgroupLayout, controller: string, cgroupsPath: string): string | undefined {
  if (layout.kind === 'v2') return join(layout.unified ?? CGROUP_ROOT, cgroupsPath);
  return v1Dir(layout, controller, cgroupsPath);
}
