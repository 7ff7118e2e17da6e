/**
 * COPY and ADD: sources from the build context (or another stage's or image's root) copied into a
 * step's rootfs, resolved inside their roots so no link leads out of either. The checksum of what
 * is copied (names, types, modes, owners, sizes, link targets, contents; not times, as dockerd)
 * makes the step's cache key.
 */
import { createHash } from 'node:crypto';
import { contentHasher } from '../../lib/content-digest.js';
import { createReadStream, createWriteStream, lstatSync, type Stats } from 'node:fs';
import { chmod, copyFile, lchown, lstat, mkdir, open, readdir, readlink, rm, symlink, utimes, lutimes } from 'node:fs/promises';
import { basename, join, posix } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { decompressArchive } from '../../images/decompress.js';
import { sniffCompression } from '../../images/decompress.js';
import { unpackLayer } from '../../images/unpack-layer.js';
import { BerthError, invalidArgument } from '../../lib/errors.js';
import type { ContextDigests } from './context-digests.js';
import { resolveInRoot } from './fs-in-root.js';
import { httpGet } from './http-get.js';

export interface Owner {
  uid: number;
  gid: number;
}

/** One resolved source: a host path inside its root and the name it is copied under. */
export interface Source {
  abs: string;
  name: string;
  isDir: boolean;
  /** ADD of a local archive: extracted instead of copied */
  extract?: boolean;
}

const WILDCARD = /[*?[]/;

/** Expands the sources (wildcards against the root's entries), refusing what does not exist. */
export async function resolveSources(root: string, patterns: string[], cmd: string): Promise<Source[]> {
  const out: Source[] = [];
  for (const pattern of patterns) {
    const clean = posix.normalize('/' + pattern);
    if (WILDCARD.test(clean)) {
      const dir = posix.dirname(clean);
      const re = globToRegExp(posix.basename(clean));
      const dirAbs = resolveInRoot(root, dir);
      let names: string[] = [];
      try { names = (await readdir(dirAbs)).sort(); } catch { /* no such dir: no match */ }
      for (const n of names) {
        if (!re.test(n)) continue;
        const abs = resolveInRoot(root, posix.join(dir, n));
        const st = await lstat(abs).catch(() => undefined);
        if (st) out.push({ abs, name: n, isDir: st.isDirectory() });
      }
      continue;
    }
    const abs = resolveInRoot(root, clean);
    let st: Stats | undefined;
    try {
      st = lstatSync(abs);
    } catch {
      // missing, or under something that is no directory: as not found
    }
    if (!st) throw invalidArgument(`${cmd} failed: file not found in build context or excluded by .dockerignore: stat ${pattern.replace(/^\/+/, '')}: file does not exist`);
    out.push({ abs, name: posix.basename(clean) || '.', isDir: st.isDirectory() });
  }
  if (out.length === 0) throw invalidArgument(`${cmd} failed: no source files were specified`);
  return out;
}

function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = glob.indexOf(']', i + 1);
      if (end < 0) { re += '\\['; continue; }
      let cls = glob.slice(i + 1, end);
      if (cls.startsWith('!') || cls.startsWith('^')) cls = '^' + cls.slice(1);
      re += '[' + cls.replace(/\\/g, '\\\\') + ']';
      i = end;
    } else if (c === '\\' && i + 1 < glob.length) re += '\\' + glob[++i];
    else re += c.replace(/[.+^${}()|\\/]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** Whether these first bytes start a tar, possibly gzip/bzip2/xz compressed (zstd is not one dockerd reads). */
export function isArchiveHead(head: Buffer): boolean {
  const kind = sniffCompression(head);
  if (kind !== 'none') return kind !== 'zstd';
  return head.length >= 262 && head.toString('latin1', 257, 262) === 'ustar';
}

/** Whether a file is an archive ADD extracts: a tar, possibly gzip/bzip2/xz compressed. */
export async function isArchive(abs: string): Promise<boolean> {
  const fh = await open(abs, 'r');
  try {
    const head = Buffer.alloc(512);
    const { bytesRead } = await fh.read(head, 0, 512, 0);
    return isArchiveHead(head.subarray(0, bytesRead));
  } finally {
    await fh.close();
  }
}

/**
 * Hash of what the sources hold: names, modes, link targets, and each file's size and content
 * digest (lib/content-digest.ts), the digest taken from `known` (hashed as the context arrived) or by streaming the file.
 */
export async function checksumSources(sources: Source[], known?: ContextDigests): Promise<string> {
  const h = createHash('sha256');
  const walk = async (abs: string, rel: string, st: Stats): Promise<void> => {
    // owners count as in dockerd's tarsum: COPY --from keeps them, so they change what is copied
    h.update(`${rel}\0${st.mode}\0${st.uid}:${st.gid}\0`);
    if (st.isSymbolicLink()) h.update(`l${await readlink(abs)}\0`);
    else if (st.isFile()) {
      let digest = known?.get(st);
      if (digest === undefined) {
        const fh = contentHasher();
        for await (const chunk of createReadStream(abs)) fh.update(chunk as Buffer);
        digest = fh.digest('hex');
      }
      h.update(`f${st.size}\0${digest}\0`);
    } else if (st.isDirectory()) {
      for (const n of (await readdir(abs)).sort()) await walk(join(abs, n), `${rel}/${n}`, await lstat(join(abs, n)));
    }
  };
  // The sources themselves (a handful, named in the instruction) are stat'ed at once; a directory's
  // entries (any number of them) through the thread pool.
  for (const s of sources) await walk(s.abs, s.name, lstatSync(s.abs));
  return h.digest('hex');
}

export interface CopyOptions {
  /** the step's mounted rootfs */
  root: string;
  /** absolute destination inside the rootfs, as written (a trailing `/` means a directory) */
  dest: string;
  owner?: Owner;
  /** keep the sources' owners (COPY --from) */
  keepOwner?: boolean;
  mode?: number;
  /** where ADD's archives are unpacked first */
  scratchDir: string;
}

export async function copySources(sources: Source[], o: CopyOptions): Promise<void> {
  const destIsDir = o.dest.endsWith('/') || sources.length > 1 || sources.some((s) => s.isDir || s.extract);
  const destAbs = resolveInRoot(o.root, o.dest);
  const destExistsAsDir = (await lstat(destAbs).catch(() => undefined))?.isDirectory() ?? false;
  for (const s of sources) {
    if (s.extract) {
      const tmp = join(o.scratchDir, `add-${Math.random().toString(16).slice(2)}`);
      await mkdir(tmp, { recursive: true });
      try {
        await unpackLayer(decompressArchive('ADD archive', createReadStream(s.abs)), tmp).catch((err: unknown) => {
          throw err instanceof BerthError ? invalidArgument(`ADD failed: archive ${s.name}: ${err.message.replace('layer entry', 'archive entry')}`) : err;
        });
        await mkdirInRoot(o.root, o.dest, o);
        for (const n of await readdir(tmp)) await copyTree(join(tmp, n), posix.join(o.dest, n), { ...o, keepOwner: true });
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
      continue;
    }
    if (s.isDir) {
      await mkdirInRoot(o.root, o.dest, o);
      for (const n of (await readdir(s.abs)).sort()) await copyTree(join(s.abs, n), posix.join(o.dest, n), o);
      continue;
    }
    const target = destIsDir || destExistsAsDir ? posix.join(o.dest, s.name) : o.dest;
    await mkdirInRoot(o.root, posix.dirname(target), o);
    await copyTree(s.abs, target, o);
  }
}

/** mkdir -p inside the root; new directories are 0755 and owned by the copy's owner. */
async function mkdirInRoot(root: string, rel: string, o: CopyOptions): Promise<void> {
  const parts = rel.split('/').filter(Boolean);
  let cur = '';
  for (const p of parts) {
    cur = `${cur}/${p}`;
    const abs = resolveInRoot(root, cur);
    const st = await lstat(abs).catch(() => undefined);
    if (st?.isDirectory()) continue;
    if (st) await rm(abs, { recursive: true, force: true });
    await mkdir(abs, { mode: 0o755 });
    await chmod(abs, 0o755);
    if (o.owner) await lchown(abs, o.owner.uid, o.owner.gid);
  }
}

async function copyTree(srcAbs: string, destRel: string, o: CopyOptions): Promise<void> {
  const st = await lstat(srcAbs);
  const parent = resolveInRoot(o.root, posix.dirname(destRel));
  const dest = join(parent, basename(destRel));
  const existing = await lstat(dest).catch(() => undefined);
  const uid = o.owner?.uid ?? (o.keepOwner ? st.uid : 0);
  const gid = o.owner?.gid ?? (o.keepOwner ? st.gid : 0);
  if (st.isDirectory()) {
    if (existing && !existing.isDirectory()) await rm(dest, { force: true });
    if (!existing?.isDirectory()) await mkdir(dest);
    for (const n of (await readdir(srcAbs)).sort()) await copyTree(join(srcAbs, n), `${destRel}/${n}`, o);
    await chmod(dest, o.mode ?? st.mode & 0o7777);
    await lchown(dest, uid, gid);
    await utimes(dest, st.atime, st.mtime);
    return;
  }
  if (existing) await rm(dest, { recursive: true, force: true });
  if (st.isSymbolicLink()) {
    await symlink(await readlink(srcAbs), dest);
    await lchown(dest, uid, gid);
    await lutimes(dest, st.atime, st.mtime).catch(() => undefined);
    return;
  }
  if (!st.isFile()) return; // devices, fifos and sockets are not copied
  await copyFile(srcAbs, dest);
  await chmod(dest, o.mode ?? st.mode & 0o7777);
  await lchown(dest, uid, gid);
  await utimes(dest, st.atime, st.mtime);
}

/** ADD <url>: downloads into the scratch dir; the file is 0600 and named after the URL's last path part. */
export async function download(url: string, scratchDir: string, signal: AbortSignal): Promise<Source> {
  const { body, headers } = await httpGet(url, signal);
  const name = decodeURIComponent(new URL(url).pathname.split('/').filter(Boolean).pop() ?? '') || '__unnamed__';
  const dir = join(scratchDir, `url-${Math.random().toString(16).slice(2)}`);
  await mkdir(dir, { recursive: true });
  const abs = join(dir, name);
  await pipeline(body, createWriteStream(abs, { mode: 0o600 }));
  await chmod(abs, 0o600);
  const lm = headers.get('last-modified');
  if (lm && !Number.isNaN(Date.parse(lm))) await utimes(abs, new Date(lm), new Date(lm));
  return { abs, name, isDir: false };
}

