/**
 * Files in and out of containers (`docker cp`, /containers/{id}/archive): the facade the route
 * calls. Paths are the container's: resolved inside its rootfs with symlinks followed within it,
 * and through its mounts into their sources (containerMountPoints), never by joining strings
 * (ContainerView). A stopped container's rootfs is mounted for as long as the operation runs.
 * dockerd's rules: the path's last component is not followed unless the path ends in `/` or
 * `/.`; GET archives a directory under its base name (`./` for `dir/.`); PUT extracts into a
 * directory only.
 */
import { closeSync, fstatSync, type BigIntStats } from 'node:fs';
import fsp from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { BerthError, invalidArgument, notFound } from '../../lib/errors.js';
import { at, cleanPath, ContainerView, InRootError, isMissing, type ResolvedPath } from '../../lib/in-root-fs.js';
import type { ContainerRecord } from './container-model.js';
import { holdRootfs } from './container-inspect-fs.js';
import { resolveUser } from './container-user.js';
import type { ContainerService } from './container-service.js';
import { decompressArchive } from './archive-decompress.js';
import { packPath } from './archive-pack.js';
import { unpackInto } from './archive-unpack.js';
import { containerMountPoints } from './container-mounts.js';
import type { PathStat } from '../../lib/docker-api-types.js';

export type { PathStat };

export interface ExtractOptions {
  noOverwriteDirNonDir: boolean;
  copyUIDGID: boolean;
}

export class ContainerArchive {
  constructor(private readonly containers: ContainerService) {}

  /** HEAD: the stat of `path` (its last link not followed). */
  async stat(idOrName: string, path: string): Promise<PathStat> {
    const c = this.containers.get(idOrName);
    const held = await holdRootfs(this.containers, c);
    try {
      const view = await ContainerView.open(held.merged, containerMountPoints(c));
      try {
        const target = await this.#locate(view, path, idOrName);
        closeFd(target.resolved.fd);
        return target.stat;
      } finally {
        view.close();
      }
    } finally {
      held.release();
    }
  }

  /**
   * GET: the stat of `path` and its tar, which `send` streams into the response (ending it); the
   * rootfs stays mounted until the tar is sent, or until `send` fails.
   */
  async archive(idOrName: string, path: string): Promise<{ stat: PathStat; send: (out: Writable) => Promise<void> }> {
    const c = this.containers.get(idOrName);
    const held = await holdRootfs(this.containers, c);
    let view: ContainerView | undefined;
    try {
      view = await ContainerView.open(held.merged, containerMountPoints(c));
      const { stat, resolved, abs, linkText } = await this.#locate(view, path, idOrName);
      const rebase = abs.name === '/' ? '' : abs.name;
      const pack = packPath(view, { start: resolved, rebase, linkTarget: linkText });
      const v = view;
      const send = async (out: Writable) => {
        try {
          await pack.writeTo(out);
        } finally {
          v.close();
          held.release();
        }
      };
      this.containers.events.publish('container', 'archive-path', c.id, this.containers.attrs(c));
      return { stat, send };
    } catch (err) {
      view?.close();
      held.release();
      throw err;
    }
  }

  /** PUT: extracts the (possibly compressed) tar `body` into the directory `path`. */
  async extract(idOrName: string, path: string, body: Readable, opts: ExtractOptions): Promise<void> {
    const c = this.containers.get(idOrName);
    const held = await holdRootfs(this.containers, c);
    try {
      const view = await ContainerView.open(held.merged, containerMountPoints(c));
      try {
        // The extraction point is followed to the end, so a link to a directory works.
        const dest = await view.resolve(cleanPath(path)).catch((err) => {
          throw this.#notFound(err, path, idOrName);
        });
        try {
          if (!fstatSync(dest.fd).isDirectory()) throw invalidArgument('extraction point is not a directory');
          if (dest.mount && !dest.mount.rw) throw invalidArgument('mounted volume is marked read-only');
          if (!dest.mount && c.hostConfig.ReadonlyRootfs) throw invalidArgument('container rootfs is marked read-only');
          const chown = opts.copyUIDGID && c.config.User ? await this.#user(held.merged, c) : undefined;
          const tar = decompressArchive(body);
          await unpackInto(view, dest, tar, { noOverwriteDirNonDir: opts.noOverwriteDirNonDir, chown, readonlyRootfs: !!c.hostConfig.ReadonlyRootfs }).catch((err) => {
            throw err instanceof BerthError ? err : invalidArgument(`extracting the archive into ${path}: ${(err as Error).message}`, err);
          });
        } finally {
          closeFd(dest.fd);
        }
      } finally {
        view.close();
      }
    } finally {
      held.release();
    }
    this.containers.events.publish('container', 'extract-to-dir', c.id, this.containers.attrs(c));
  }

  async #user(rootfs: string, c: ContainerRecord): Promise<{ uid: number; gid: number }> {
    const u = await resolveUser(rootfs, c.config.User ?? '').catch((err: Error) => {
      throw invalidArgument(err.message);
    });
    return { uid: u.uid, gid: u.gid };
  }

  /** The path as dockerd reads it: cleaned, absolute, its last link followed only after `/` or `/.`. */
  async #locate(view: ContainerView, path: string, idOrName: string): Promise<{ stat: PathStat; resolved: ResolvedPath; abs: { path: string; name: string }; linkText?: string }> {
    const abs = absPath(path);
    const followLast = /\/\.?$/.test(path) || path === '.';
    const resolved = await view.resolve(abs.path, { followLast }).catch((err) => {
      throw this.#notFound(err, path, idOrName);
    });
    try {
      const st = fstatSync(resolved.fd, { bigint: true });
      let linkTarget = '';
      let linkText: string | undefined;
      if (st.isSymbolicLink()) {
        const slash = abs.path.lastIndexOf('/');
        const parentPath = abs.path.slice(0, slash) || '/';
        const parent = await view.resolve(parentPath);
        try {
          linkText = await fsp.readlink(at(parent.fd, abs.path.slice(slash + 1)));
        } finally {
          closeFd(parent.fd);
        }
        linkTarget = await view.resolve(abs.path).then(
          (r) => {
            closeFd(r.fd);
            return r.path;
          },
          // A dangling link: as far as it goes, as dockerd's in-scope resolution answers.
          () => cleanPath(linkText!.startsWith('/') ? linkText! : `${parentPath}/${linkText}`),
        );
      }
      return { stat: { name: abs.name, size: Number(st.size), mode: goFileMode(st), mtime: goTime(st), linkTarget }, resolved, abs, linkText };
    } catch (err) {
      closeFd(resolved.fd);
      throw err;
    }
  }

  #notFound(err: unknown, path: string, idOrName: string): Error {
    if (isMissing(err)) return notFound(`Could not find the file ${path} in container ${idOrName}`);
    if (err instanceof InRootError) return invalidArgument(err.message);
    return err as Error;
  }
}

/** dockerd's absolute form of a requested path, and the base name its entries get. */
function absPath(path: string): { path: string; name: string } {
  const clean = cleanPath(path);
  if (/(^|\/)\.$/.test(path)) return { path: clean, name: '.' };
  if (clean === '/') return { path: clean, name: '/' };
  return { path: clean, name: clean.slice(clean.lastIndexOf('/') + 1) };
}

const S_IFMT = 0o170000n;
/** Go's os.FileMode: permission bits, then type and special bits high up (dir = 1<<31...). */
function goFileMode(st: BigIntStats): number {
  const mode = st.mode;
  let m = Number(mode & 0o777n);
  if (mode & 0o4000n) m += 2 ** 23; // setuid
  if (mode & 0o2000n) m += 2 ** 22; // setgid
  if (mode & 0o1000n) m += 2 ** 20; // sticky
  switch (mode & S_IFMT) {
    case 0o040000n:
      m += 2 ** 31;
      break;
    case 0o120000n:
      m += 2 ** 27;
      break;
    case 0o010000n:
      m += 2 ** 25;
      break;
    case 0o140000n:
      m += 2 ** 24;
      break;
    case 0o020000n:
      m += 2 ** 26 + 2 ** 21;
      break;
    case 0o060000n:
      m += 2 ** 26;
      break;
  }
  return m;
}

/** Go's JSON time: RFC 3339 with nanoseconds, trailing zeros dropped. */
function goTime(st: BigIntStats): string {
  const ns = st.mtimeNs;
  const secs = ns / 1_000_000_000n;
  const frac = (ns % 1_000_000_000n).toString().padStart(9, '0').replace(/0+$/, '');
  const base = new Date(Number(secs) * 1000).toISOString().slice(0, 19);
  return `${base}${frac ? `.${frac}` : ''}Z`;
}

function closeFd(fd: number): void {
  closeSync(fd);
}
