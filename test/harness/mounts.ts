import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { run } from './child-process.js';

/** Finds and lazily unmounts whatever is still mounted under a test's temp dir. */

/** Mount points under `dir` (itself included), deepest first, read from /proc/self/mountinfo. */
export function mountsUnder(dir: string): string[] {
  let text: string;
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    const target = line.split(' ')[4];
    if (!target) continue;
    // mountinfo escapes space, tab, newline and backslash as octal.
    const path = target.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    if (path === dir || path.startsWith(prefix)) out.add(path);
  }
  return [...out].sort((a, b) => b.split('/').length - a.split('/').length || b.length - a.length);
}

/** Unmounts (umount -l) everything under dir, a few passes because stacked mounts reappear. */
export async function unmountUnder(dir: string): Promise<string[]> {
  const failed: string[] = [];
  for (let pass = 0; pass < 5; pass++) {
    const mounts = mountsUnder(dir);
    if (!mounts.length) return [];
    failed.length = 0;
    for (const m of mounts) {
      const r = await run('umount', ['-l', m], { timeoutMs: 10000 });
      if (r.code !== 0) failed.push(`${m}: ${r.stderr.trim()}`);
    }
  }
  return mountsUnder(dir).length ? failed : [];
}

/** The same, synchronously, for the exit hook. */
export function unmountUnderSync(dir: string): void {
  for (let pass = 0; pass < 5; pass++) {
    const mounts = mountsUnder(dir);
    if (!mounts.length) return;
    for (const m of mounts) spawnSync('umount', ['-l', m], { stdio: 'ignore', timeout: 10000 });
  }
}
