/**
 * A tar extracted into a directory of a container (PUT /containers/{id}/archive), streamed entry by
 * entry, with dockerd's rules: missing parent directories are created (0755, root), an existing
 * entry is replaced unless both are directories, `noOverwriteDirNonDir` refuses replacing a
 * directory by a non-directory and the reverse, and owners come from the headers (or all are the
 * container's user with copyUIDGID).
 *
 * Safety: names are taken relative to the extraction directory and may not climb out of it
 * (`../`), nor be absolute; symlinks whose target climbs out of it and hardlinks to anything
 * outside it are refused, as dockerd refuses them. Every entry is created by one name relative to
 * a directory descriptor resolved inside the container (ContainerView: symlinks followed within
 * its root, mounts crossed into their sources), with O_NOFOLLOW / O_EXCL / l* calls, so neither a
 * link in the archive nor one a running container swaps in meanwhile leads anywhere outside.
 * A read-only mount or rootfs is refused before anything is written there.
 */
import { spawn } from 'node:child_process';
import { closeSync, constants, fchmod as fchmodCb, fchmodSync, fchown as fchownCb, fchownSync, fstatSync, futimes as futimesCb, futimesSync, lstatSync, open, openSync, writeSync } from 'node:fs';
import fsp from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import tarStream from 'tar-stream';
import { BerthError, invalidArgument } from '../../lib/errors.js';
import { at, chmodAt, isMissing, type ContainerView, type ResolvedPath } from '../../lib/in-root-fs.js';
import { writeBatched } from '../../lib/batched-write.js';
import { BATCH, SmallFileWriter } from './archive-file-writer.js';

const openFd = promisify(open) as (path: string, flags: number, mode?: number) => Promise<number>;
const O_PATH = 0o10000000;
const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_TRUNC, O_DIRECTORY } = constants;
/** Parent directory descriptors kept open between entries (most archives write one directory at a time). */
const DIR_CACHE = 32;
/** Names remembered as made by this extraction; past this both sets start over (memory stays bounded). */
const MADE_MAX = 65_536;
/** Files up to this size are written synchronously in the rootfs (larger ones could hold the loop on a slow disk). */
const SYNC_WRITE_MAX = 1024 * 1024;
/** Who a file this process creates belongs to (in a directory without the setgid bit). */
const CREATOR = { uid: process.geteuid?.() ?? -1, gid: process.getegid?.() ?? -1 };
const S_ISGID = 0o2000;

export interface UnpackOptions {
  noOverwriteDirNonDir: boolean;
  /** Set: every entry gets this owner (copyUIDGID with a container user). */
  chown?: { uid: number; gid: number };
  /** The rootfs is read-only (entries outside writable mounts are refused). */
  readonlyRootfs: boolean;
}

type Header = tarStream.Header;
type Entry = AsyncIterable<Buffer> & { header: Header; resume(): unknown };
/** A directory entries are created in; `setgid`: new entries take its group, not the creator's. */
type Dir = ResolvedPath & { setgid: boolean };

/** Extracts `tar` (uncompressed) into `dest`, an already resolved directory of the view. */
export async function unpackInto(view: ContainerView, dest: ResolvedPath, tar: Readable, opts: UnpackOptions): Promise<void> {
  const extract = tarStream.extract();
  const fed = pipeline(tar, extract as unknown as NodeJS.WritableStream);
  fed.catch(() => {}); // awaited below
  const u = new Unpacker(view, dest, opts);
  try {
    for await (const entry of extract as unknown as AsyncIterable<Entry>) {
      await u.entry(entry);
    }
    await fed;
    await u.finish();
  } catch (err) {
    tar.destroy();
    (extract as unknown as { destroy(): void }).destroy();
    // A decoder's failure (a truncated gzip) names the cause; the reader only saw its end.
    const fedErr = await fed.then(() => undefined, (e: unknown) => e);
    throw fedErr instanceof BerthError ? fedErr : err;
  } finally {
    await u.close();
  }
}

class Unpacker {
  /** rel dir path ('' = dest) → descriptor; insertion order is the eviction order. */
  readonly #dirs = new Map<string, Dir>();
  /** Directories whose times are set last (their entries change them). */
  readonly #dirTimes: { rel: string; mtime: Date }[] = [];
  /** Directories this extraction created (and still holds as created), and every name it made. */
  readonly #fresh = new Set<string>();
  readonly #made = new Set<string>();
  readonly #writer = new SmallFileWriter();

  constructor(
    private readonly view: ContainerView,
    private readonly dest: ResolvedPath,
    private readonly opts: UnpackOptions,
  ) {}

  async entry(e: Entry): Promise<void> {
    const h = e.header;
    try {
      await this.#entry(e, h);
    } finally {
      e.resume(); // whatever was not read
    }
  }

  async #entry(e: Entry, h: Header): Promise<void> {
    const parts = relParts(h.name);
    if (parts.length === 0) return; // the extraction directory itself: left as it is
    const rel = parts.join('/');
    const base = parts[parts.length - 1]!;
    const parentRel = parts.slice(0, -1).join('/');
    const cpath = joinPath(this.dest.path, rel);
    const isDir = h.type === 'directory';
    const isFile = h.type === 'file' || h.type === 'contiguous-file';
    // Forgetting both sets at once is always safe: a directory made later starts with no names.
    if (this.#made.size >= MADE_MAX) {
      this.#made.clear();
      this.#fresh.clear();
    }
    // A name not made yet in a directory this extraction made is free: its file or directory needs
    // none of the files before it on disk. Anything else may replace or link to one of them, so it
    // waits until the writer thread has written them all.
    const freshName = this.#fresh.has(parentRel) && !this.#made.has(rel);
    if (!freshName || !(isFile || isDir)) await this.#writer.flush();
    this.#made.add(rel);
    if (!isDir) await this.#forget(rel);
    const parent = await this.#dir(parentRel);
    this.#checkWritable(parent, cpath);

    const mount = this.view.mountAt(joinPath(parent.path, base));
    if (mount) {
      // A mount point (e.g. /etc/hosts): what is there is the mount's, only its content can change.
      if (h.type === 'directory') return;
      if (h.type !== 'file' && h.type !== 'contiguous-file') throw invalidArgument(`cannot replace mount point ${cpath} with ${h.name}`);
      if (!mount.rw) throw invalidArgument('mounted volume is marked read-only');
      const fd = await openFd(mount.source, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_NONBLOCK);
      try {
        if (!fstatSync(fd).isFile()) throw invalidArgument(`cannot replace mount point ${cpath} with ${h.name}`);
        await writeBatched(fd, e);
      } finally {
        closeSync(fd);
      }
      return;
    }

    // In the rootfs (an overlay: nothing there can make these wait) the small steps of an entry run
    // synchronously, microseconds each instead of a pool round trip each; in a mount's source
    // (possibly a network file system) they stay asynchronous.
    const local = !parent.mount;
    const uid = this.opts.chown?.uid ?? h.uid ?? 0;
    const gid = this.opts.chown?.gid ?? h.gid ?? 0;
    const mode = (h.mode ?? 0o644) & 0o7777;
    // A new file is already the creator's: most archives (root's files, extracted by root) need no chown.
    const chown = uid !== CREATOR.uid || gid !== CREATOR.gid || parent.setgid;
    if (freshName && isFile && local && (h.size ?? 0) <= BATCH && this.#writer.wants()) {
      const mtime = (h.mtime ?? new Date()).getTime() / 1000;
      await this.#writer.add({ dirFd: parent.fd, name: base, cpath, chown: chown ? { uid, gid } : undefined, mode, mtime }, h.size ?? 0, e);
      return;
    }
    const name = at(parent.fd, base);
    const createFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;
    // A new file (the common case) is created at once: O_EXCL is the check that nothing is there.
    let created: number | undefined;
    if (local && isFile) {
      try {
        created = openSync(name, createFlags, 0o600);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
    const existing = created !== undefined ? undefined : local ? lstatSync(name, { throwIfNoEntry: false }) : await fsp.lstat(name).catch(() => undefined);
    if (existing) {
      if (this.opts.noOverwriteDirNonDir && existing.isDirectory() && !isDir) throw invalidArgument(`cannot overwrite directory "${cpath}" with non-directory "${h.name}"`);
      if (this.opts.noOverwriteDirNonDir && !existing.isDirectory() && isDir) throw invalidArgument(`cannot overwrite non-directory "${cpath}" with directory "${h.name}"`);
      if (!(existing.isDirectory() && isDir)) {
        await removeAt(parent.fd, base);
        await this.#forget(rel); // a directory reached through what was there (a link) is not this one
      }
    }
    switch (h.type) {
      case 'directory':
        if (!existing?.isDirectory()) {
          await fsp.mkdir(name, 0o700);
          this.#fresh.add(rel);
        }
        await fsp.lchown(name, uid, gid);
        await chmodAt(parent.fd, base, mode);
        // Its files' group follows the new mode.
        if (this.#dirs.has(rel)) this.#dirs.get(rel)!.setgid = (mode & S_ISGID) !== 0;
        this.#dirTimes.push({ rel, mtime: h.mtime ?? new Date() });
        return;
      case 'file':
      case 'contiguous-file': {
        const fd = created ?? (local ? openSync(name, createFlags, 0o600) : await openFd(name, createFlags, 0o600));
        try {
          if (local && (h.size ?? 0) <= SYNC_WRITE_MAX) {
            for await (const chunk of e) for (let off = 0; off < chunk.length; ) off += writeSync(fd, chunk, off);
            if (created === undefined || chown) fchownSync(fd, uid, gid);
            fchmodSync(fd, mode);
            futimesSync(fd, h.mtime ?? new Date(), h.mtime ?? new Date());
          } else {
            await writeBatched(fd, e);
            await fchown(fd, uid, gid);
            await fchmod(fd, mode);
            await futimes(fd, h.mtime ?? new Date());
          }
        } finally {
          closeSync(fd);
        }
        return;
      }
      case 'symlink': {
        const target = h.linkname ?? '';
        // dockerd's rule: the target, taken from the link's directory, must stay in the extraction directory.
        if (!target.startsWith('/') && climbsOut([...parts.slice(0, -1), ...target.split('/')])) throw invalidArgument(`invalid symlink "${h.name}" -> "${target}"`);
        await fsp.symlink(target, name);
        await fsp.lchown(name, uid, gid);
        await fsp.lutimes(name, h.mtime ?? new Date(), h.mtime ?? new Date());
        return;
      }
      case 'link': {
        const tparts = relParts(h.linkname ?? '', true);
        if (tparts === undefined || tparts.length === 0) throw invalidArgument(`invalid hardlink "${h.name}" -> "${h.linkname}"`);
        const tparent = await this.#dir(tparts.slice(0, -1).join('/'));
        await fsp.link(at(tparent.fd, tparts[tparts.length - 1]!), name);
        return;
      }
      case 'character-device':
      case 'block-device':
      case 'fifo': {
        const kind = h.type === 'fifo' ? ['p'] : [h.type === 'character-device' ? 'c' : 'b', String(h.devmajor ?? 0), String(h.devminor ?? 0)];
        // mknod(1) reaches the name through this process's descriptor of its directory.
        await mknod(`/proc/${process.pid}/fd/${parent.fd}/${base}`, kind);
        await fsp.lchown(name, uid, gid);
        await chmodAt(parent.fd, base, mode);
        await fsp.lutimes(name, h.mtime ?? new Date(), h.mtime ?? new Date());
        return;
      }
      default:
        return; // sockets and unknown types: skipped, as dockerd skips them
    }
  }

  #checkWritable(parent: ResolvedPath, cpath: string): void {
    if (parent.mount) {
      if (!parent.mount.rw) throw invalidArgument('mounted volume is marked read-only');
    } else if (this.opts.readonlyRootfs) {
      throw new BerthError('invalid-argument', `container rootfs is marked read-only (${cpath})`);
    }
  }

  /** The directory at `rel` under the destination, created (0755, root) with its parents if missing. */
  async #dir(rel: string): Promise<Dir> {
    const cached = this.#dirs.get(rel);
    if (cached) return cached;
    let r: ResolvedPath;
    let setgid: boolean;
    if (rel === '') {
      r = { ...this.dest, fd: await openFd(at(this.dest.fd), O_PATH | O_DIRECTORY) };
      setgid = (fstatSync(r.fd).mode & S_ISGID) !== 0;
    } else {
      try {
        r = await this.view.resolve(joinPath(this.dest.path, rel));
      } catch (err) {
        if (!isMissing(err)) throw err;
        const i = rel.lastIndexOf('/');
        const parent = await this.#dir(i < 0 ? '' : rel.slice(0, i));
        this.#checkWritable(parent, joinPath(this.dest.path, rel));
        const base = rel.slice(i + 1);
        const made = await fsp.mkdir(at(parent.fd, base), 0o755).then(
          () => true,
          (e: NodeJS.ErrnoException) => {
            if (e.code !== 'EEXIST') throw e;
            return false;
          },
        );
        await fsp.lchown(at(parent.fd, base), 0, 0);
        r = await this.view.resolve(joinPath(this.dest.path, rel));
        if (made) {
          this.#fresh.add(rel);
          this.#made.add(rel);
        }
      }
      const st = fstatSync(r.fd);
      if (!st.isDirectory()) {
        closeSync(r.fd);
        throw invalidArgument(`cannot extract into ${joinPath(this.dest.path, rel)}: not a directory`);
      }
      setgid = (st.mode & S_ISGID) !== 0;
    }
    const d: Dir = { ...r, setgid };
    this.#dirs.set(rel, d);
    if (this.#dirs.size > DIR_CACHE) {
      const [k, v] = this.#dirs.entries().next().value as [string, Dir];
      await this.#writer.flush(); // files still to be written may be under it
      this.#dirs.delete(k);
      closeSync(v.fd);
    }
    return d;
  }

  /**
   * An entry replaces what was at `rel`: descriptors of it and below it are stale, and directories
   * there are no longer ones this extraction made. Descriptors close only once no file still to
   * be written names them (a closed number could be reused for another directory meanwhile).
   */
  async #forget(rel: string): Promise<void> {
    const under = (k: string) => k === rel || k.startsWith(`${rel}/`);
    for (const k of this.#fresh) if (under(k)) this.#fresh.delete(k);
    const stale = [...this.#dirs].filter(([k]) => under(k));
    if (stale.length === 0) return;
    await this.#writer.flush();
    for (const [k, v] of stale) {
      this.#dirs.delete(k);
      closeSync(v.fd);
    }
  }

  /** Directory times last, deepest first, so creating their entries does not change them again. */
  async finish(): Promise<void> {
    await this.#writer.flush();
    for (const d of this.#dirTimes.reverse()) {
      const r = await this.view.resolve(joinPath(this.dest.path, d.rel), { followLast: false }).catch(() => undefined);
      if (!r) continue;
      try {
        if (fstatSync(r.fd).isDirectory()) await fsp.utimes(at(r.fd), d.mtime, d.mtime);
      } finally {
        closeSync(r.fd);
      }
    }
  }

  async close(): Promise<void> {
    await this.#writer.settle();
    for (const v of this.#dirs.values()) closeSync(v.fd);
    this.#dirs.clear();
  }
}

/**
 * A tar name as path parts under the extraction directory: `.` and empty parts dropped, `..`
 * applied. An absolute name is taken from the extraction directory, as dockerd joins it (compose
 * sends its inline configs and secrets as `/run/secrets/<name>` with `/` as the destination); at
 * its root `..` stays there, as Go's Clean leaves it. A relative name that climbs out is refused
 * (undefined with `lenient`).
 */
function relParts(name: string, lenient?: false): string[];
function relParts(name: string, lenient: true): string[] | undefined;
function relParts(name: string, lenient = false): string[] | undefined {
  const absolute = name.startsWith('/');
  const out: string[] = [];
  for (const p of name.split('/')) {
    if (p === '' || p === '.') continue;
    if (p === '..') {
      if (out.length === 0) {
        if (absolute) continue;
        if (lenient) return undefined;
        throw invalidArgument(`invalid archive entry "${name}": it is outside of the extraction directory`);
      }
      out.pop();
    } else out.push(p);
  }
  return out;
}

function climbsOut(parts: string[]): boolean {
  let depth = 0;
  for (const p of parts) {
    if (p === '' || p === '.') continue;
    depth += p === '..' ? -1 : 1;
    if (depth < 0) return true;
  }
  return false;
}

const joinPath = (dir: string, rel: string) => (rel === '' ? dir : dir === '/' ? `/${rel}` : `${dir}/${rel}`);

const fchown = promisify(fchownCb);
const fchmod = promisify(fchmodCb);
const futimesP = promisify(futimesCb);
const futimes = (fd: number, t: Date) => futimesP(fd, t, t);

/**
 * Removes `name` in the directory `dirFd` and, for a directory, everything under it, through
 * descriptors (O_NOFOLLOW | O_DIRECTORY at each level): a link swapped in meanwhile is an error
 * (or is removed as a link), never followed.
 */
async function removeAt(dirFd: number, name: string): Promise<void> {
  const st = await fsp.lstat(at(dirFd, name));
  if (!st.isDirectory()) {
    await fsp.unlink(at(dirFd, name));
    return;
  }
  const fd = await openFd(at(dirFd, name), O_PATH | O_DIRECTORY | O_NOFOLLOW);
  try {
    if (fstatSync(fd).ino !== st.ino) throw new Error(`${name} changed while it was being removed`);
    for (const child of await fsp.readdir(at(fd))) await removeAt(fd, child);
  } finally {
    closeSync(fd);
  }
  await fsp.rmdir(at(dirFd, name));
}

function mknod(path: string, kind: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn('mknod', ['-m', '0600', '--', path, ...kind], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`mknod ${path}: ${err.trim() || `exit ${code}`}`))));
  });
}
