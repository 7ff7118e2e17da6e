/**
 * The `local` volume driver: mechanism only. A volume is the directory `<root>/<name>/_data`; with
 * the options dockerd's local driver reads (`type`, `device`, `o`) that directory is the target of a
 * mount(8) made when the first container uses the volume and undone after the last one. The volume
 * service owns records and reference counts and tells the driver when.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, rmSync } from 'node:fs';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { invalidArgument } from '../../lib/errors.js';

const run = promisify(execFile);

const VALID_OPTS = new Set(['type', 'o', 'device', 'size']);
/** An option that needs others beside it, as dockerd's local driver checks. */
const REQUIRED_WITH: Record<string, string[]> = { device: ['type'], type: ['device'], o: ['device', 'type'] };

export class LocalDriver {
  constructor(readonly root: string) {
    mkdirSync(root, { recursive: true, mode: 0o701 });
  }

  /** The host directory a container sees (also the mount target for volumes with options). */
  dataPath(name: string): string {
    return join(this.root, name, '_data');
  }

  /** dockerd's checks of the driver options; 400 with its texts. */
  validateOptions(opts: Record<string, string>): void {
    for (const k of Object.keys(opts)) if (!VALID_OPTS.has(k)) throw invalidArgument(`invalid option: ${JSON.stringify(k)}`);
    if (opts.size !== undefined) throw invalidArgument('quota size requested but no quota support');
    for (const [k, needs] of Object.entries(REQUIRED_WITH)) {
      if (opts[k] === undefined) continue;
      for (const n of needs) if (opts[n] === undefined) throw invalidArgument(`missing required option: ${JSON.stringify(n)}`);
    }
  }

  needsMount(opts: Record<string, string>): boolean {
    return !!(opts.type || opts.device);
  }

  create(name: string): void {
    mkdirSync(join(this.root, name), { mode: 0o701, recursive: true });
    mkdirSync(this.dataPath(name), { mode: 0o755, recursive: true });
  }

  /** Mounts `device` on the data dir with `type` and `o` (e.g. tmpfs with size=, or o=bind). */
  async mount(name: string, opts: Record<string, string>): Promise<void> {
    if (!this.needsMount(opts)) return;
    if (await this.isMounted(name)) return;
    const args = ['-t', opts.type || 'none'];
    if (opts.o) args.push('-o', opts.o);
    args.push('--', opts.device ?? '', this.dataPath(name));
    try {
      await run('mount', args);
    } catch (err) {
      throw invalidArgument(`failed to mount local volume: ${String((err as { stderr?: string }).stderr ?? (err as Error).message).trim()}`);
    }
  }

  async unmount(name: string, opts: Record<string, string>): Promise<void> {
    if (!this.needsMount(opts) || !(await this.isMounted(name))) return;
    await run('umount', [this.dataPath(name)]).catch(() => run('umount', ['-l', this.dataPath(name)]));
  }

  async isMounted(name: string): Promise<boolean> {
    const target = this.dataPath(name);
    const table = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
    return table.split('\n').some((l) => unescapeMountPath(l.split(' ')[4] ?? '') === target);
  }

  /** Removes the volume's directory (after unmounting what its options mounted). */
  async remove(name: string, opts: Record<string, string>): Promise<void> {
    await this.unmount(name, opts);
    // A bind of a host dir must never be emptied: refuse while anything is still mounted there.
    if (this.needsMount(opts) && (await this.isMounted(name))) throw new Error(`volume ${name} is still mounted`);
    rmSync(join(this.root, name), { recursive: true, force: true });
  }

  /** Bytes used under the data dir (lstat walk: links are not followed, mounts below are counted). */
  async size(name: string): Promise<number> {
    return dirSize(this.dataPath(name), 0);
  }
}

const MAX_DEPTH = 256;

async function dirSize(dir: string, depth: number): Promise<number> {
  if (depth > MAX_DEPTH) return 0;
  let total = 0;
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) total += await dirSize(p, depth + 1);
    else total += await lstat(p).then((s) => (s.isFile() ? s.size : 0), () => 0);
  }
  return total;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeMountPath(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}
