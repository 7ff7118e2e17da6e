/**
 * Host device nodes → ContainerDevice entries for buildSpec (Docker's --device and the device
 * list of --privileged). The only impure part of spec building, kept apart so buildSpec stays pure.
 */
import { lstat, readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { invalidArgument } from '../lib/errors.js';
import type { ContainerDevice } from './build-spec.js';

const S_IFMT = 0o170000;
const S_IFCHR = 0o020000;
const S_IFBLK = 0o060000;

/** Linux dev_t → major/minor (glibc's encoding). */
export function splitDev(rdev: number): { major: number; minor: number } {
  const dev = BigInt(rdev);
  const major = Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn));
  const minor = Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn));
  return { major, minor };
}

async function deviceAt(pathOnHost: string, pathInContainer: string, cgroupPermissions: string): Promise<ContainerDevice | undefined> {
  const st = await stat(pathOnHost);
  const kind = st.mode & S_IFMT;
  if (kind !== S_IFCHR && kind !== S_IFBLK) return undefined;
  const { major, minor } = splitDev(st.rdev);
  return {
    pathInContainer,
    type: kind === S_IFCHR ? 'c' : 'b',
    major,
    minor,
    fileMode: st.mode & 0o7777,
    uid: st.uid,
    gid: st.gid,
    cgroupPermissions,
  };
}

/**
 * One requested device (`--device /dev/x[:/dev/y][:rwm]`): a device node, or a directory whose
 * device nodes are all added under the container path, as dockerd does.
 */
export async function resolveDevice(pathOnHost: string, pathInContainer = pathOnHost, cgroupPermissions = 'rwm'): Promise<ContainerDevice[]> {
  if (!/^[rwm]{1,3}$/.test(cgroupPermissions)) throw invalidArgument(`invalid device permissions: ${cgroupPermissions}`);
  let st;
  try {
    st = await stat(pathOnHost);
  } catch {
    throw invalidArgument(`error gathering device information while adding custom device "${pathOnHost}": no such file or directory`);
  }
  if (st.isDirectory()) {
    const out: ContainerDevice[] = [];
    for (const file of await walk(pathOnHost)) {
      const d = await deviceAt(file, join(pathInContainer, relative(pathOnHost, file)), cgroupPermissions).catch(() => undefined);
      if (d) out.push(d);
    }
    return out;
  }
  const d = await deviceAt(pathOnHost, pathInContainer, cgroupPermissions);
  if (!d) throw invalidArgument(`${pathOnHost} is not a device node`);
  return [d];
}

/** Every device node under /dev for a privileged container, minus what the runtime provides itself. */
export async function hostDevices(): Promise<ContainerDevice[]> {
  const skip = new Set(['/dev/pts', '/dev/shm', '/dev/mqueue', '/dev/console', '/dev/ptmx', '/dev/tty']);
  const out: ContainerDevice[] = [];
  for (const file of await walk('/dev', skip)) {
    const d = await deviceAt(file, file, 'rwm').catch(() => undefined);
    if (d) out.push(d);
  }
  return out;
}

/** Files below `dir` (not following symlinks), skipping the given paths. */
async function walk(dir: string, skip: Set<string> = new Set()): Promise<string[]> {
  const out: string[] = [];
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = join(dir, e.name);
    if (skip.has(p)) continue;
    if (e.isDirectory()) out.push(...(await walk(p, skip)));
    else if (e.isCharacterDevice() || e.isBlockDevice()) out.push(p);
    else if (!e.isSymbolicLink()) {
      const st = await lstat(p).catch(() => undefined);
      if (st && (st.isCharacterDevice() || st.isBlockDevice())) out.push(p);
    }
  }
  return out;
}
