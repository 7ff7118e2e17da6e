/**
 * A container's root filesystem: an overlay of the image's layer directories (read-only) under a
 * per-container upper directory. Also the small files dockerd bind-mounts into every container.
 */
import { mkdir, readFile, writeFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { mount, unmount } from '../runtime/mount-syscall.js';
import { InRootError, mkdirAllInRoot, readFileInRoot } from '../lib/in-root-fs.js';

export interface RootfsPaths {
  dir: string;
  upper: string;
  work: string;
  merged: string;
}

export function rootfsPaths(containerDir: string): RootfsPaths {
  return { dir: containerDir, upper: join(containerDir, 'upper'), work: join(containerDir, 'work'), merged: join(containerDir, 'merged') };
}

/**
 * Whether an overlay is mounted on `path`: an overlay has a device number of its own, so the
 * directory and its parent differ. Two stats instead of reading and parsing /proc/self/mountinfo,
 * which holds every mount of the host (160 KB, 1000+ lines on a busy test machine).
 */
export async function isMounted(path: string): Promise<boolean> {
  try {
    const [self, parent] = await Promise.all([stat(path), stat(dirname(path))]);
    return self.dev !== parent.dev;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    // Unreadable (a broken mount...): ask the mount table.
    const mounts = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
    return mounts.split('\n').some((l) => l.split(' ')[4] === path);
  }
}

/**
 * Merged dirs this process unmounted and has not mounted since: a second unmount (remove after the
 * exit's cleanup) needs no read of mountinfo. Only this module mounts there.
 */
const unmounted = new Set<string>();

/**
 * Mounts the overlay; lowerDirs top layer first. Idempotent. `volatile` (for containers whose upper
 * dir is deleted at exit: AutoRemove): the overlay skips syncing its upper filesystem, also when
 * unmounted, which otherwise makes the unmount wait for a sync of the whole host filesystem.
 */
export async function mountRootfs(p: RootfsPaths, lowerDirs: string[], opts: { volatile?: boolean } = {}): Promise<void> {
  const [, , madeMerged] = await Promise.all([mkdir(p.upper, { recursive: true }), mkdir(p.work, { recursive: true }), mkdir(p.merged, { recursive: true })]);
  // A merged dir created just now cannot have anything mounted on it: skip reading mountinfo.
  if (madeMerged === undefined && (await isMounted(p.merged))) return;
  unmounted.delete(p.merged);
  if (lowerDirs.length === 0) {
    // An image without layers: overlay needs a lower dir, so use an empty one.
    const empty = join(p.dir, 'empty');
    await mkdir(empty, { recursive: true });
    lowerDirs = [empty];
  }
  // redirect_dir and metacopy off: the upper dir must stay a plain diff that commit can turn into a layer.
  const data = `lowerdir=${lowerDirs.join(':')},upperdir=${p.upper},workdir=${p.work},redirect_dir=off,metacopy=off`;
  if (opts.volatile) {
    // Kernels before 5.10 do not know the option (EINVAL): mount as usual then.
    const done = await mount('overlay', p.merged, 'overlay', `${data},volatile`).then(() => true, () => false);
    if (done) return;
  }
  await mount('overlay', p.merged, 'overlay', data);
}

export async function unmountRootfs(p: RootfsPaths): Promise<void> {
  if (unmounted.has(p.merged)) return;
  if (!(await isMounted(p.merged))) return;
  try {
    await unmount(p.merged);
  } catch {
    const lazy = await unmount(p.merged, { lazy: true }).then(() => true, () => false);
    if (!lazy) return;
  }
  unmounted.add(p.merged);
}

/** Drops what unmountRootfs remembers of a container's rootfs (once its directory is gone). */
export function forgetRootfs(p: RootfsPaths): void {
  unmounted.delete(p.merged);
}

/**
 * /etc/passwd or /etc/group of a rootfs as text, '' when absent. The image (or the container, which
 * can replace them with a FIFO, a device, a link to anywhere or a huge file) controls them: read
 * in-root, regular files only, capped. Anything else throws, for this container only.
 */
async function readUserDb(root: string, path: string): Promise<string> {
  return ((await readFileInRoot(root, path, { maxBytes: USER_DB_CAP })) ?? Buffer.alloc(0)).toString('utf8');
}

/** Larger user databases are refused (real ones are kilobytes). */
const USER_DB_CAP = 16 * 1024 * 1024;

export interface ResolvedUser {
  uid: number;
  gid: number;
  additionalGids: number[];
  home: string;
}

/**
 * Resolves `name`, `uid`, `name:group`, `uid:gid` against the image's /etc/passwd and /etc/group;
 * `groupAdd` (HostConfig.GroupAdd: names or ids) joins the additional groups, looked up in the same
 * file, as dockerd does.
 */
export async function resolveUser(rootfs: string, user: string, groupAdd: string[] = []): Promise<ResolvedUser> {
  const [u = '', g] = user.split(':', 2);
  const failed = (err: Error) => {
    throw new Error(`unable to find user ${u || 'root'}: ${err.message}`);
  };
  const [passwd, group] = await Promise.all([readUserDb(rootfs, '/etc/passwd').catch(failed), readUserDb(rootfs, '/etc/group').catch(failed)]);
  const pw = passwd.split('\n').map((l) => l.split(':')).filter((f) => f.length >= 7);
  const gr = group.split('\n').map((l) => l.split(':')).filter((f) => f.length >= 4);
  let uid = 0;
  let gid = 0;
  let home = '/';
  let userName: string | undefined;
  if (u === '') {
    const root = pw.find((f) => f[2] === '0');
    home = root?.[5] ?? '/root';
    userName = root?.[0] ?? 'root';
  } else {
    const entry = pw.find((f) => f[0] === u) ?? (/^\d+$/.test(u) ? pw.find((f) => f[2] === u) : undefined);
    if (entry) {
      uid = Number(entry[2]);
      gid = Number(entry[3]);
      home = entry[5] || '/';
      userName = entry[0];
    } else if (/^\d+$/.test(u)) {
      uid = Number(u);
    } else {
      throw new Error(`unable to find user ${u}: no matching entries in passwd file`);
    }
  }
  if (g !== undefined && g !== '') {
    const entry = gr.find((f) => f[0] === g) ?? (/^\d+$/.test(g) ? gr.find((f) => f[2] === g) : undefined);
    if (entry) gid = Number(entry[2]);
    else if (/^\d+$/.test(g)) gid = Number(g);
    else throw new Error(`unable to find group ${g}: no matching entries in group file`);
  }
  const additionalGids = userName ? gr.filter((f) => f[3]!.split(',').includes(userName!) && Number(f[2]) !== gid).map((f) => Number(f[2])) : [];
  for (const name of groupAdd) {
    const entry = gr.find((f) => f[0] === name) ?? (/^\d+$/.test(name) ? gr.find((f) => f[2] === name) : undefined);
    if (!entry && !/^\d+$/.test(name)) throw new Error(`Unable to find group ${name}: no matching entries in group file`);
    const id = entry ? Number(entry[2]) : Number(name);
    if (!additionalGids.includes(id)) additionalGids.push(id);
  }
  return { uid, gid, additionalGids, home };
}

/**
 * Creates the container's working directory (owned by root, 0755, as dockerd does) inside its
 * rootfs; a non-directory in the way is dockerd's "Cannot mkdir" error.
 */
export async function prepareWorkingDir(rootfs: string, dir: string): Promise<void> {
  if (!dir || dir === '/') return;
  await mkdirAllInRoot(rootfs, dir, { mode: 0o755, uid: 0, gid: 0 }).catch((err: Error) => {
    if (err instanceof InRootError && err.code === 'ENOTDIR') throw new Error(`Cannot mkdir: ${dir} is not a directory`);
    throw new Error(`Cannot mkdir: ${err.message}`);
  });
}

/** Writes /etc/hostname, /etc/hosts and /etc/resolv.conf; the texts come from the network service (network/container-files.ts). */
export async function writeEtcFiles(opts: {
  hostnamePath: string;
  hostsPath: string;
  resolvConfPath: string;
  hostname: string;
  resolvConf: string;
  hosts: string;
}): Promise<void> {
  await Promise.all([
    writeFile(opts.hostnamePath, `${opts.hostname}\n`),
    writeFile(opts.hostsPath, opts.hosts),
    writeFile(opts.resolvConfPath, opts.resolvConf),
  ]);
}
