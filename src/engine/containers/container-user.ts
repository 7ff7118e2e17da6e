/**
 * The container's user and working directory, resolved inside its mounted rootfs (the image's
 * /etc/passwd and /etc/group, which the image or the container controls).
 */
import { InRootError, mkdirAllInRoot, readFileInRoot } from '../../lib/in-root-fs.js';

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
