/**
 * Network namespaces kept alive by bind mounts at `<execRoot>/netns/<container id>` (the path handed to
 * the runtime as the container's network namespace). Like `ip netns`, the directory is made a shared
 * mount point of its own, so unmounting a namespace file also unmounts the copies that mount namespaces
 * created meanwhile picked up, and the namespace really goes away.
 *
 * A namespace made ahead of time under another name (see ready-pool.ts) is handed to a container as a
 * symlink `<container id>` -> `<name>`: a mount point cannot be renamed.
 */
import { access, lstat, mkdir, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { conflict, errorMessage, invalidArgument } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { createNamespace } from './ns-calls.js';
import { runTool, ToolError } from './run-tool.js';
import type { ShellStep, ToolShell } from './tool-shell.js';

export interface NetnsTools {
  unshare: string;
  umount: string;
  mount: string;
}

export class NetnsDir {
  readonly dir: string;
  readonly #tools: NetnsTools;
  /** Unmounts of namespaces made ahead, running after their container's link went. */
  readonly #pending = new Set<Promise<void>>();

  /** Runs namespace work (made ahead, with a container's plumbing, their removal) without forking the daemon. */
  readonly #shell: ToolShell | undefined;

  constructor(dir: string, tools: NetnsTools, shell?: ToolShell) {
    this.dir = dir;
    this.#tools = tools;
    this.#shell = shell;
  }

  pathOf(containerId: string): string {
    if (!/^[a-zA-Z0-9_.-]+$/.test(containerId)) throw invalidArgument(`invalid container id for a netns path: ${containerId}`);
    return join(this.dir, containerId);
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o711 });
    const mounts = await mountPoints();
    if (!mounts.has(this.dir)) {
      await runTool(this.#tools.mount, ['--bind', this.dir, this.dir]);
    }
    await runTool(this.#tools.mount, ['--make-shared', this.dir]);
  }

  /**
   * Creates the namespace file and the namespace with its loopback up. With `command`, runs that argv
   * (with its stdin) inside the new namespace instead, in the same call (one process chain instead of
   * two); it must bring the loopback up itself. `after` runs in the daemon's namespace once that
   * succeeded; with `command`, both go through the tool shell when there is one.
   */
  async create(containerId: string, command?: { argv: string[]; input?: string }, after: ShellStep[] = []): Promise<string> {
    const path = await this.#newFile(containerId);
    try {
      if (command && this.#shell) await this.#shell.run([{ argv: [this.#tools.unshare, `--net=${path}`, ...command.argv], input: command.input }, ...after]);
      else {
        if (command) await runTool(this.#tools.unshare, [`--net=${path}`, ...command.argv], { input: command.input });
        else await runTool(this.#tools.unshare, [`--net=${path}`, 'ip', 'link', 'set', 'lo', 'up']);
        for (const step of after) await runTool(step.argv[0]!, step.argv.slice(1), { input: step.input });
      }
    } catch (err) {
      await this.remove(containerId).catch(() => {});
      throw err;
    }
    return path;
  }

  /**
   * Creates the namespace file and the namespace from berthd itself (ns-calls.ts: no process), its
   * loopback still down; for callers that put everything in over rtnetlink.
   */
  async createInProcess(name: string): Promise<string> {
    const path = await this.#newFile(name);
    try {
      createNamespace(path, () => undefined);
    } catch (err) {
      await rm(path, { force: true });
      throw err;
    }
    return path;
  }

  /** The empty file a namespace gets bound to; a leftover from a crash is reused if nothing is mounted on it. */
  async #newFile(name: string): Promise<string> {
    const path = this.pathOf(name);
    await writeFile(path, '', { flag: 'wx', mode: 0o444 }).catch(async (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
      if ((await mountPoints()).has(path)) throw conflict(`network namespace for ${name} already exists`);
    });
    return path;
  }

  /**
   * Creates a namespace ahead of time (through the tool shell when there is one): `command` runs
   * inside it as it is created, then `after` in the daemon's namespace. Removed again on failure.
   */
  async createAhead(name: string, command: ShellStep, after: ShellStep[]): Promise<void> {
    if (!this.#shell) {
      await this.create(name, { argv: [...command.argv], input: command.input }, after);
      return;
    }
    const path = this.pathOf(name);
    await writeFile(path, '', { flag: 'wx', mode: 0o444 });
    try {
      await this.#shell.run([{ argv: [this.#tools.unshare, `--net=${path}`, ...command.argv], input: command.input }, ...after]);
    } catch (err) {
      await this.remove(name).catch(() => {});
      throw err;
    }
  }

  /** Makes the namespace file `name` the container's (a symlink at the container's path). */
  async adopt(containerId: string, name: string): Promise<string> {
    const path = this.pathOf(containerId);
    this.pathOf(name);
    await symlink(name, path).catch(async (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
      // A leftover from a crash: replace it only if nothing is mounted on it.
      if ((await mountPoints()).has(path)) throw conflict(`network namespace for ${containerId} already exists`);
      await this.remove(containerId);
      await symlink(name, path);
    });
    return path;
  }

  /** The file a namespace path really is (through a container's symlink). */
  async target(path: string): Promise<string> {
    const link = await readlink(path).catch(() => null);
    return link === null ? path : join(this.dir, basename(link));
  }

  /** Names of the files in the directory that no container's symlink points to, and are not links. */
  async unadopted(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const links = new Map<string, string>();
    for (const n of names) {
      const link = await readlink(join(this.dir, n)).catch(() => null);
      if (link !== null) links.set(n, basename(link));
    }
    const targets = new Set(links.values());
    return names.filter((n) => !links.has(n) && !targets.has(n));
  }

  /**
   * Unmounts and deletes the namespace file; missing or unmounted files are fine. For a container's
   * symlink, the link goes at once and its target (a name never used again) in the background:
   * settled() waits for that.
   */
  async remove(containerId: string): Promise<void> {
    const link = this.pathOf(containerId);
    const isLink = await lstat(link).then((st) => st.isSymbolicLink(), () => false);
    if (!isLink) return this.#removeFile(link);
    const target = await this.target(link);
    await rm(link, { force: true });
    const p: Promise<void> = this.#removeFile(target)
      .catch((err) => log.warn('removing a network namespace failed', { path: target, error: errorMessage(err) }))
      .finally(() => this.#pending.delete(p));
    this.#pending.add(p);
  }

  /** Resolves when no namespace is being removed in the background. */
  async settled(): Promise<void> {
    while (this.#pending.size) await Promise.all(this.#pending);
  }

  async #removeFile(path: string): Promise<void> {
    // No file, nothing mounted on it: skip the umount spawn (the common case on a second release).
    if (!(await access(path).then(() => true, () => false))) return;
    try {
      // Through the tool shell when there is one: a fork of berthd per namespace held its event loop
      // for milliseconds each, ten times on a `compose down`.
      if (this.#shell) await this.#shell.run([{ argv: [this.#tools.umount, path] }]);
      else await runTool(this.#tools.umount, [path]);
    } catch (err) {
      if (!(err instanceof ToolError) || !/not mounted|no mount point|No such file/i.test(err.stderr)) throw err;
    }
    await rm(path, { force: true });
  }

  /** Unmounts the directory itself (only when nothing is left in it). */
  async unmountDir(): Promise<void> {
    await this.settled();
    if ((await mountPoints()).has(this.dir)) await runTool(this.#tools.umount, [this.dir]);
  }
}

/** Mount points of this process's mount namespace. */
export async function mountPoints(): Promise<Set<string>> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    if (f[4]) out.add(f[4].replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
  }
  return out;
}
