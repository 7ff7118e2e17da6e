/**
 * Helpers for the runtime tests: a busybox root file system, unique ids, a spec input with
 * sensible defaults, and a registry of what to tear down.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RuntimeSpecInput } from './build-spec.js';

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
