/**
 * File system operations Node has no API for: device/fifo nodes and extended attributes.
 * They go through Debian CLIs (coreutils `mknod`, findutils `xargs`, `setfattr`/`getfattr` from
 * the `attr` package), batched so a layer costs a handful of processes, not one per file:
 * whiteouts and xattrs are rare next to regular files, and a native addon would need a compiler
 * at install time for a few syscalls. Reading xattrs is the exception: every commit and build
 * step does it, so it runs in-process through libc (lib/xattrs.ts) where koffi loads. Every call
 * here works on the link itself, never a target (`setfattr -h`, `getfattr -h -P`, lgetxattr;
 * mknod never follows its last component).
 */
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { createInterface } from 'node:readline';
import { BerthError, internal } from '../lib/errors.js';
import { readXattrsUnder, xattrsAvailable } from '../lib/xattrs.js';

interface RunResult {
  code: number | null;
  stderr: string;
}

/** Run a command, feeding `input` on stdin. stdout is ignored unless `onLine` is given. */
function run(cmd: string, args: string[], input: Buffer | string, onLine?: (line: string) => void): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', onLine ? 'pipe' : 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => {
      if (stderr.length < 64 * 1024) stderr += d;
    });
    if (onLine) createInterface({ input: child.stdout!, crlfDelay: Infinity }).on('line', onLine);
    child.on('error', (err) => reject(internal(`cannot run ${cmd}: ${err.message}`, err)));
    child.on('close', (code) => resolve({ code, stderr: stderr.trim() }));
    // A command that exits early (bad input) closes its stdin: that shows in the exit code.
    child.stdin!.on('error', () => {});
    child.stdin!.end(input);
  });
}

/**
 * Create overlayfs whiteouts (character device 0/0, mode 0) at absolute paths whose parent
 * directories are already verified. One xargs process runs mknod for all of them, in parallel.
 */
export async function makeWhiteouts(paths: string[]): Promise<void> {
  if (paths.length === 0) return;
  const input = paths.map((p) => p + '\0').join('');
  const jobs = String(Math.max(2, Math.min(8, availableParallelism())));
  const r = await run('xargs', ['-0', '-r', '-P', jobs, '-I{}', 'mknod', '-m', '0', '--', '{}', 'c', '0', '0'], input);
  if (r.code !== 0) throw internal(`creating whiteouts failed: ${r.stderr || `xargs exited ${r.code}`}`);
}

/** Create a fifo. Fifos in layers are rare, so one process each is fine. */
export async function makeFifo(path: string): Promise<void> {
  const r = await run('mknod', ['-m', '0600', '--', path, 'p'], '');
  if (r.code !== 0) throw internal(`creating fifo ${path} failed: ${r.stderr}`);
}

export interface XattrItem {
  path: string; // absolute
  name: string;
  value: Buffer;
}

// A known namespace, then printable characters without "=" (the dump format's separator).
const XATTR_NAME_RE = /^(user|trusted|security|system)\.[\x21-\x3c\x3e-\x7e]+$/;

export function isWritableXattrName(name: string): boolean {
  return XATTR_NAME_RE.test(name) && name.length <= 255;
}

/**
 * Set many xattrs with one `setfattr -h --restore=-`. Throws when any of them failed and
 * `bestEffort` is off; otherwise returns setfattr's complaints (one per failed attribute).
 */
export async function setXattrs(items: XattrItem[], opts: { bestEffort: boolean }): Promise<string[]> {
  if (items.length === 0) return [];
  const lines: string[] = [];
  let last = '';
  for (const it of items) {
    if (!isWritableXattrName(it.name)) throw new BerthError('invalid-argument', `invalid xattr name ${JSON.stringify(it.name)}`);
    if (it.path !== last) {
      lines.push('', `# file: ${escapeDumpPath(it.path)}`);
      last = it.path;
    }
    lines.push(`${it.name}=0x${it.value.toString('hex')}`);
  }
  lines.push('');
  const r = await run('setfattr', ['-h', '--restore=-'], lines.join('\n'));
  if (r.code === 0) return [];
  const problems = r.stderr ? r.stderr.split('\n') : [`setfattr exited ${r.code}`];
  if (!opts.bestEffort) throw internal(`setting xattrs failed: ${problems.join('; ')}`);
  return problems;
}

/**
 * Every xattr under `dir` (the directory itself included) without following symlinks:
 * absolute path → [name, value] in name order. Only names passing `keep` are held in memory.
 * Read in-process (lib/xattrs.ts); getfattr only where libc cannot be called.
 */
export async function readXattrsTree(dir: string, keep: (name: string) => boolean): Promise<Map<string, [string, Buffer][]>> {
  if (xattrsAvailable()) {
    try {
      return await readXattrsUnder(dir, keep);
    } catch (err) {
      throw internal(`reading xattrs under ${dir} failed: ${(err as Error).message}`, err);
    }
  }
  return readXattrsTreeWithGetfattr(dir, keep);
}

/** readXattrsTree through `getfattr -R -d` (exported for the test comparing both). */
export async function readXattrsTreeWithGetfattr(dir: string, keep: (name: string) => boolean): Promise<Map<string, [string, Buffer][]>> {
  const out = new Map<string, [string, Buffer][]>();
  let current: [string, Buffer][] | undefined;
  let currentPath = '';
  const r = await run('getfattr', ['-R', '-P', '-h', '-d', '-m', '-', '-e', 'hex', '--absolute-names', '--', dir], '', (line) => {
    if (line.startsWith('# file: ')) {
      currentPath = unescapeDumpPath(line.slice(8));
      current = undefined;
      return;
    }
    const eq = line.indexOf('=');
    if (eq <= 0 || !currentPath) return;
    const name = line.slice(0, eq);
    if (!keep(name)) return;
    const raw = line.slice(eq + 1);
    const value = raw.startsWith('0x') ? Buffer.from(raw.slice(2), 'hex') : Buffer.from(raw.replace(/^"|"$/g, ''));
    if (!current) {
      current = [];
      out.set(currentPath, current);
    }
    current.push([name, value]);
  });
  if (r.code !== 0) throw internal(`reading xattrs under ${dir} failed: ${r.stderr || `getfattr exited ${r.code}`}`);
  for (const list of out.values()) list.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return out;
}

/** The attr tools' path quoting: backslash + three octal digits for anything unusual. */
export function escapeDumpPath(path: string): string {
  let s = '';
  for (const byte of Buffer.from(path, 'utf8')) {
    s += byte > 0x20 && byte < 0x7f && byte !== 0x5c ? String.fromCharCode(byte) : '\\' + byte.toString(8).padStart(3, '0');
  }
  return s;
}

export function unescapeDumpPath(s: string): string {
  const bytes: number[] = [];
  const raw = Buffer.from(s, 'utf8');
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === 0x5c && i + 3 < raw.length && /^[0-7]{3}$/.test(raw.toString('latin1', i + 1, i + 4))) {
      bytes.push(Number.parseInt(raw.toString('latin1', i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(c);
    }
  }
  return Buffer.from(bytes).toString('utf8');
}
