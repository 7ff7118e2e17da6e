/**
 * Helpers for the runtime tests: a busybox root file system, unique ids, a spec input with
 * sensible defaults, and a driver with a registry of what to tear down.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSpec, type RuntimeSpecInput } from './build-spec.js';
import type { CreateOptions } from './container-lifecycle.js';
import { readLogRecords } from './log-file.js';
import { RuntimeDriver } from './runtime-driver.js';

export const BUSYBOX = '/bin/busybox';

/** A root file system made of a static busybox and one symlink per applet. */
export async function makeBusyboxRootfs(dir: string): Promise<void> {
  for (const d of ['bin', 'proc', 'sys', 'dev', 'etc', 'tmp', 'root']) await mkdir(join(dir, d), { recursive: true });
  await copyFile(BUSYBOX, join(dir, 'bin', 'busybox'));
  const applets = execFileSync(BUSYBOX, ['--list'], { encoding: 'utf8' }).split('\n').filter((a) => a && a !== 'busybox');
  await Promise.all(applets.map((a) => symlink('busybox', join(dir, 'bin', a))));
}

export function uniqueId(prefix = 'bt'): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

export async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** A minimal container description around `args`. */
export function specInput(id: string, rootfs: string, args: string[], over: Partial<RuntimeSpecInput> = {}): RuntimeSpecInput {
  return {
    id,
    rootfs,
    readonlyRootfs: false,
    hostname: id.slice(0, 12),
    process: { args, env: [], cwd: '/', user: { uid: 0, gid: 0 }, terminal: false },
    mounts: [],
    privileged: false,
    shmSize: 0,
    namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }, { type: 'network' }],
    resources: {},
    seccomp: 'default',
    ...over,
  };
}

export interface Started {
  id: string;
  logPath: string;
  opts: CreateOptions;
}

/** A driver on a temp state dir and a busybox rootfs; stop() cleans up every container it made. */
export class DriverFixture {
  readonly created = new Set<string>();
  private constructor(
    readonly base: string,
    readonly rootfs: string,
    readonly driver: RuntimeDriver,
  ) {}

  static async start(prefix = 'berth-rt-'): Promise<DriverFixture> {
    const base = await tempDir(prefix);
    const rootfs = join(base, 'rootfs');
    await makeBusyboxRootfs(rootfs);
    const driver = new RuntimeDriver({ stateDir: join(base, 'state'), defaultRuntime: 'crun' });
    const f = new DriverFixture(base, rootfs, driver);
    await driver.init();
    return f;
  }

  async stop(): Promise<void> {
    for (const id of this.created) await this.driver.lifecycle.cleanup(id).catch((err) => console.error('cleanup', id, err));
    await this.driver.close();
    await removeDir(this.base);
  }

  /** Creates (not starts) a container running `args`, by `d` (default: the fixture's driver). */
  async create(args: string[], over: Partial<RuntimeSpecInput> = {}, opts: Partial<CreateOptions> = {}, d: RuntimeDriver = this.driver): Promise<Started> {
    const id = uniqueId();
    this.created.add(id);
    const bundleDir = join(this.base, 'bundles', id);
    await mkdir(bundleDir, { recursive: true });
    const input = specInput(id, this.rootfs, args, { cgroupVersion: d.host.cgroupVersion, ...over });
    if (opts.tty) input.process.terminal = true;
    const c: CreateOptions = { id, bundleDir, spec: buildSpec(input), logPath: join(this.base, `${id}.log`), stdin: false, tty: false, ...opts };
    await d.lifecycle.create(c);
    return { id, logPath: c.logPath, opts: c };
  }

  /** Creates and starts a container; resolves with its exit. */
  async run(args: string[], over: Partial<RuntimeSpecInput> = {}, opts: Partial<CreateOptions> = {}) {
    const c = await this.create(args, over, opts);
    const exited = this.driver.lifecycle.waitExit(c.id);
    await this.driver.lifecycle.start(c.id);
    return { ...c, exit: await exited };
  }
}

/** A k8s-file log's text, one line per full record. */
export async function logText(path: string): Promise<string> {
  let out = '';
  for await (const r of readLogRecords(path)) out += r.text + (r.partial ? '' : '\n');
  return out;
}

export async function streamText(s: NodeJS.ReadableStream | undefined): Promise<string> {
  if (!s) return '';
  let out = '';
  for await (const chunk of s) out += chunk.toString();
  return out;
}
