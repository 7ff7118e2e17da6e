/**
 * Looking at a container's file system from the host: what changed against its image (`docker
 * diff`, and what `docker commit` packs), the whole rootfs as a tar (`docker export`) and the
 * sizes `docker ps -s` shows. The changes live in the overlay's upper dir; the image layers are
 * its lower dirs (top first), in overlay form (whiteouts as 0/0 character devices, opaque
 * directories marked with the trusted.overlay.opaque xattr).
 */
import { execFile, spawn } from 'node:child_process';
import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { promisify } from 'node:util';
import { internal } from '../../lib/errors.js';
import { readXattrSync, walkTree, xattrsAvailable } from '../../lib/xattrs.js';
import { log } from '../../lib/log.js';
import type { ContainerRecord } from './container-model.js';
import { isRunningLike } from './container-model.js';
import { mountRootfs, rootfsPaths, unmountRootfs } from './rootfs-mount.js';
import type { ContainerService } from './container-service.js';
import { ChangeKind, type Change } from '../../lib/docker-api-types.js';

const run = promisify(execFile);

/** The overlay a container runs on: its upper dir and its image's layer dirs, top first. */
export interface LayerView {
  upper: string;
  lowers: string[];
}

export function containerLayerView(containers: ContainerService, c: ContainerRecord): LayerView {
  const image = containers.images.records.getImage(c.imageId);
  if (!image) throw internal(`image ${c.imageId} of container ${c.name} is gone`);
  return {
    upper: rootfsPaths(containers.containerDir(c.id)).upper,
    lowers: [...image.chainIds].reverse().map((id) => containers.images.layers.diffDir(id as `sha256:${string}`)),
  };
}

/** Holders of a rootfs mount per container (exports, copies): the last one to end unmounts a stopped container's rootfs. */
const holding = new Map<string, number>();

/**
 * Mounts a container's rootfs (a no-op while it runs) and keeps it mounted until the returned
 * release is called; then a stopped container's rootfs is unmounted unless another holder remains.
 */
export async function holdRootfs(containers: ContainerService, c: ContainerRecord): Promise<{ merged: string; release: () => void }> {
  const paths = rootfsPaths(containers.containerDir(c.id));
  const view = containerLayerView(containers, c);
  await containers.withLock(c.id, async () => {
    if (!containers.find(c.id)) throw internal(`container ${c.id} was removed`);
    await mountRootfs(paths, view.lowers);
    holding.set(c.id, (holding.get(c.id) ?? 0) + 1);
  });
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    const n = (holding.get(c.id) ?? 1) - 1;
    if (n > 0) holding.set(c.id, n);
    else holding.delete(c.id);
    if (n > 0) return;
    containers
      .withLock(c.id, async () => {
        // Started meanwhile: the mount is the container's now.
        if (!isRunningLike(c.state) && !holding.has(c.id)) await unmountRootfs(paths);
      })
      .catch((err) => log.warn('rootfs: unmount failed', { id: c.id, err }));
  };
  return { merged: paths.merged, release };
}

/** `docker export`: mounts a stopped container's rootfs for as long as the tar runs. */
export async function exportContainer(containers: ContainerService, idOrName: string): Promise<Readable> {
  const c = containers.get(idOrName);
  const held = await holdRootfs(containers, c);
  return exportTar(held.merged, held.release);
}

/** `docker ps -s`: bytes the container wrote, and those plus its image's. */
export async function containerSize(containers: ContainerService, c: ContainerRecord): Promise<{ rw: number; rootFs: number }> {
  const view = containerLayerView(containers, c);
  const rw = await treeSize(view.upper, await runtimeArtifacts(view));
  const image = containers.images.records.getImage(c.imageId);
  return { rw, rootFs: rw + (image?.size ?? 0) };
}

export { ChangeKind, type Change };

/**
 * Mount points the runtime creates in the upper dir when the image lacks them. dockerd keeps
 * them in a separate "init" layer, so they never show in `docker diff` or in a commit; here they
 * are recognized and left out: empty files and directories at exactly these paths (bind mounts
 * and kernel file systems cover them, so a container can never have written to them).
 */
const RUNTIME_MOUNTPOINTS = ['etc/hostname', 'etc/hosts', 'etc/resolv.conf', 'dev', 'proc', 'sys', '.dockerenv', 'etc/mtab'];

/**
 * Relative paths of the upper dir that are runtime mount points (and directories only holding
 * them). `isOpaque` answers for a directory of the upper dir when the caller already knows its
 * xattrs; without it the xattr is read.
 */
export async function runtimeArtifacts(view: LayerView, isOpaque?: (absDir: string) => boolean): Promise<Set<string>> {
  const out = new Set<string>();
  for (const rel of RUNTIME_MOUNTPOINTS) {
    const st = await lstatOrUndefined(join(view.upper, rel));
    if (!st) continue;
    if ((st.isFile() && st.size === 0) || (st.isDirectory() && (await fs.readdir(join(view.upper, rel))).length === 0)) out.add(rel);
  }
  // A directory copied up only because a mount point was created in it (typically /etc).
  const parents = [...new Set([...out].map(parentOf).filter((p) => p !== ''))].sort((a, b) => b.length - a.length);
  const lower = new LayerLookup(view.lowers);
  for (const dir of parents) {
    const abs = join(view.upper, dir);
    const names = await fs.readdir(abs).catch(() => undefined);
    if (!names || !names.every((n) => out.has(`${dir}/${n}`))) continue;
    if (isOpaque ? isOpaque(abs) : (await opaqueDirs([abs])).size > 0) continue;
    if (await lower.exists(dir)) out.add(dir);
  }
  return out;
}

/** `docker diff`: every path of the upper dir as added, modified or deleted, in path order. */
export async function containerChanges(view: LayerView): Promise<Change[]> {
  if (!(await isDirectory(view.upper))) return []; // never started
  const skip = await runtimeArtifacts(view);
  const lower = new LayerLookup(view.lowers);
  const out: Change[] = [];
  const opaque = await opaqueDirsUnder(view.upper);
  const walk = async (rel: string, parentInLower: boolean, parentOpaque: boolean): Promise<void> => {
    const abs = rel ? join(view.upper, rel) : view.upper;
    const names = (await fs.readdir(abs)).sort(byteOrder);
    const present = new Set<string>();
    for (const name of names) {
      const r = rel ? `${rel}/${name}` : name;
      if (skip.has(r)) continue;
      present.add(name);
      const st = await fs.lstat(join(abs, name));
      if (st.isCharacterDevice() && st.rdev === 0) {
        out.push({ Path: `/${r}`, Kind: ChangeKind.Deleted });
        continue;
      }
      const inLower = parentInLower && (await lower.exists(r));
      out.push({ Path: `/${r}`, Kind: inLower ? ChangeKind.Modified : ChangeKind.Added });
      if (st.isDirectory()) await walk(r, inLower, opaque.has(join(abs, name)));
    }
    // An opaque directory hides everything the image had in it.
    if (parentOpaque && parentInLower) {
      for (const name of await lower.children(rel)) {
        if (!present.has(name)) out.push({ Path: `/${rel ? `${rel}/` : ''}${name}`, Kind: ChangeKind.Deleted });
      }
    }
  };
  await walk('', true, false);
  out.sort((a, b) => byteOrder(a.Path, b.Path));
  return out;
}

/** Finds paths in the image's layers as the overlay would show them without the upper dir. */
class LayerLookup {
  readonly #opaque = new Map<string, boolean>();
  constructor(readonly lowers: string[]) {}

  async exists(rel: string): Promise<boolean> {
    const parts = rel.split('/');
    for (const layer of this.lowers) {
      const st = await lstatOrUndefined(join(layer, rel));
      if (st) return !isWhiteout(st);
      // Not in this layer: stop if something on the way hides the layers below.
      for (let i = 0; i < parts.length; i++) {
        const dir = join(layer, ...parts.slice(0, i));
        const dst = await lstatOrUndefined(dir);
        if (!dst) break;
        if (!dst.isDirectory()) return false;
        if (await this.#isOpaque(dir)) return false;
      }
    }
    return false;
  }

  /** Names in a directory of the image (without whiteouts and what they hide). */
  async children(rel: string): Promise<string[]> {
    const seen = new Map<string, boolean>();
    for (const layer of this.lowers) {
      const dir = rel ? join(layer, rel) : layer;
      const names = await fs.readdir(dir).catch(() => [] as string[]);
      for (const n of names) {
        if (seen.has(n)) continue;
        const st = await lstatOrUndefined(join(dir, n));
        seen.set(n, !!st && !isWhiteout(st));
      }
      if (names.length > 0 && (await this.#isOpaque(dir))) break;
    }
    return [...seen].filter(([, present]) => present).map(([n]) => n).sort(byteOrder);
  }

  async #isOpaque(dir: string): Promise<boolean> {
    let v = this.#opaque.get(dir);
    if (v === undefined) {
      v = (await opaqueDirs([dir])).size > 0;
      this.#opaque.set(dir, v);
    }
    return v;
  }
}

const OPAQUE = 'trusted.overlay.opaque';
const isOpaqueValue = (v: Buffer | undefined): boolean => v !== undefined && v.length === 1 && v[0] === 0x79; // "y"

/** Which of these directories carry trusted.overlay.opaque=y (read in-process; getfattr without libc). */
async function opaqueDirs(dirs: string[]): Promise<Set<string>> {
  const out = new Set<string>();
  if (dirs.length === 0) return out;
  if (xattrsAvailable()) {
    for (const d of dirs) if (isOpaqueValue(readXattrSync(d, OPAQUE))) out.add(d);
    return out;
  }
  const r = await run('getfattr', ['-h', '-n', OPAQUE, '--absolute-names', '-e', 'text', '--', ...dirs], { maxBuffer: 16 * 1024 * 1024 }).catch(
    (err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }),
  );
  parseOpaque(r.stdout, out);
  return out;
}

/** Every opaque directory under `root`: an in-process walk, or one getfattr run without libc. */
async function opaqueDirsUnder(root: string): Promise<Set<string>> {
  const out = new Set<string>();
  if (xattrsAvailable()) {
    // Like getfattr's partial output, what was found before an error (a directory removed meanwhile) counts.
    await walkTree(root, (path, isDir) => {
      if (isDir && isOpaqueValue(readXattrSync(path, OPAQUE))) out.add(path);
    }).catch(() => {});
    return out;
  }
  const r = await run('getfattr', ['-R', '-P', '-h', '-n', OPAQUE, '--absolute-names', '-e', 'text', '--', root], { maxBuffer: 64 * 1024 * 1024 }).catch(
    (err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }),
  );
  parseOpaque(r.stdout, out);
  return out;
}

function parseOpaque(dump: string, out: Set<string>): void {
  let file = '';
  for (const line of dump.split('\n')) {
    if (line.startsWith('# file: ')) file = unescapeOctal(line.slice(8));
    else if (line === 'trusted.overlay.opaque="y"' && file) out.add(file);
  }
}

function unescapeOctal(s: string): string {
  return Buffer.from(s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))), 'latin1').toString('utf8');
}

/**
 * `docker export`: the merged rootfs as a tar stream (GNU tar reading the mounted overlay).
 * Names are relative without a leading "./", numeric owners, file capabilities kept.
 */
export function exportTar(merged: string, onDone: () => void): Readable {
  const out = new PassThrough();
  let finished = false;
  const done = () => {
    if (finished) return;
    finished = true;
    onDone();
  };
  fs.readdir(merged).then(
    (names) => {
      const tar = spawn(
        'tar',
        ['-C', merged, '--create', '--file=-', '--numeric-owner', '--sort=name', '--format=posix', '--pax-option=delete=atime,delete=ctime', '--xattrs', '--xattrs-include=security.capability', '--null', '--files-from=-'],
        { stdio: ['pipe', 'pipe', 'pipe'] },
      );
      let stderr = '';
      tar.stderr.setEncoding('utf8').on('data', (d: string) => {
        if (stderr.length < 8192) stderr += d;
      });
      tar.stdin.on('error', () => undefined);
      tar.stdin.end(names.sort(byteOrder).map((n) => `${n}\0`).join(''));
      tar.stdout.pipe(out);
      // A client that goes away stops tar.
      out.on('close', () => {
        if (tar.exitCode === null) tar.kill('SIGKILL');
      });
      tar.on('close', (code) => {
        // Exit 1 is "some files changed while read": the archive is still whole.
        if (code !== 0 && code !== 1) {
          log.warn('export: tar failed', { code, stderr });
          out.destroy(new Error(`tar failed: ${stderr.trim() || `exit ${code}`}`));
        }
        done();
      });
      tar.on('error', (err) => {
        out.destroy(err);
        done();
      });
    },
    (err) => {
      out.destroy(err);
      done();
    },
  );
  return out;
}

/** Bytes of the files in a tree (hard links once), leaving out `skip` (relative paths). */
export async function treeSize(root: string, skip: Set<string> = new Set()): Promise<number> {
  let total = 0;
  const seen = new Set<string>();
  const walk = async (rel: string): Promise<void> => {
    const abs = rel ? join(root, rel) : root;
    let dir;
    try {
      dir = await fs.opendir(abs);
    } catch {
      return;
    }
    for await (const ent of dir) {
      const r = rel ? `${rel}/${ent.name}` : ent.name;
      if (skip.has(r)) continue;
      if (ent.isDirectory()) {
        await walk(r);
        continue;
      }
      const st = await lstatOrUndefined(join(abs, ent.name));
      if (!st || isWhiteout(st)) continue;
      if (st.nlink > 1) {
        const key = `${st.dev}:${st.ino}`;
        if (seen.has(key)) continue;
        seen.add(key);
      }
      total += st.size;
    }
  };
  await walk('');
  return total;
}

export async function isDirectory(path: string): Promise<boolean> {
  return (await lstatOrUndefined(path))?.isDirectory() ?? false;
}

function isWhiteout(st: Stats): boolean {
  return st.isCharacterDevice() && st.rdev === 0;
}

async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(path);
  } catch {
    return undefined;
  }
}

function parentOf(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
