/**
 * Paths inside a root directory (a build context, a mounted image) resolved the way the root's own
 * processes would see them: symlinks are followed relative to the root, `..` stops at the root, so
 * no resolved path lies outside it whatever the tree holds. The lstat calls are synchronous: a few
 * microseconds each on a local tree, bounded by the path's components and MAX_LINKS, where a
 * thread-pool round trip each made up ~0.6 ms of a cached COPY step here.
 */
import { lstatSync, readlinkSync, type Stats } from 'node:fs';
import { join, posix } from 'node:path';

const MAX_LINKS = 40;

/** Absolute host path of `rel` inside `root`; the last component is followed only if `followLast`. */
export function resolveInRoot(root: string, rel: string, followLast = true): string {
  let parts = posix.normalize('/' + rel).split('/').filter(Boolean);
  const done: string[] = [];
  let links = 0;
  // How many components of `done` exist: below a missing one nothing can, so nothing is looked up,
  // but a `..` after it (a link's target may hold one) still climbs within the root, never above it.
  let existing = Infinity;
  while (parts.length > 0) {
    const p = parts.shift()!;
    if (p === '.' ) continue;
    if (p === '..') {
      done.pop();
      if (done.length <= existing) existing = Infinity;
      continue;
    }
    const abs = join(root, ...done, p);
    const last = parts.length === 0;
    let st: Stats | undefined;
    if (done.length < existing) {
      try {
        st = lstatSync(abs);
      } catch {
        // missing, or under something that is no directory
      }
    }
    if (!st) {
      existing = Math.min(existing, done.length);
      done.push(p);
      continue;
    }
    if (st.isSymbolicLink() && (!last || followLast)) {
      if (++links > MAX_LINKS) throw new Error(`too many levels of symbolic links: ${rel}`);
      const target = readlinkSync(abs);
      if (target.startsWith('/')) done.length = 0;
      parts = [...target.split('/').filter(Boolean), ...parts];
      continue;
    }
    done.push(p);
  }
  return join(root, ...done);
}

/** The root-relative form of a path resolveInRoot returned. */
export function relToRoot(root: string, abs: string): string {
  return abs === root ? '' : abs.slice(root.length + 1);
}
