/**
 * Test support for src/images: tar archives generated in the test with tar-stream (no binary
 * fixtures), temp dirs that clean up after themselves, and small inspection helpers.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tarStream from 'tar-stream';
import type { TestContext } from 'node:test';

export interface FixtureEntry {
  name: string;
  type?: tarStream.Header['type'];
  data?: string | Buffer;
  mode?: number;
  uid?: number;
  gid?: number;
  mtime?: Date;
  linkname?: string;
  devmajor?: number;
  devminor?: number;
  pax?: Record<string, string>;
}

/** Raw archive bytes to splice in as they are (for headers tar-stream cannot write). */
export interface RawPiece {
  raw: Buffer;
}

/** A whole tar archive. Entries are written by tar-stream; raw pieces are copied verbatim. */
export async function makeTar(entries: (FixtureEntry | RawPiece)[]): Promise<Buffer> {
  const out: Buffer[] = [];
  for (const e of entries) {
    if ('raw' in e) {
      out.push(e.raw);
      continue;
    }
    const pack = tarStream.pack();
    const { data, ...header } = e;
    const mtime = header.mtime ?? new Date(1_600_000_000_000);
    pack.entry({ mode: 0o644, uid: 0, gid: 0, ...header, mtime } as Parameters<tarStream.Pack["entry"]>[0], data ?? '');
    pack.finalize();
    const parts: Buffer[] = [];
    for await (const c of pack) parts.push(c as Buffer);
    const whole = Buffer.concat(parts);
    out.push(whole.subarray(0, whole.length - 1024)); // drop each piece's end-of-archive blocks
  }
  out.push(Buffer.alloc(1024));
  return Buffer.concat(out);
}

/** A fresh temp dir removed when the test ends, pass or fail. */
export async function tempDir(t: TestContext, prefix = 'berth-images-'): Promise<string> {
  const dir = await fs.mkdtemp(join(tmpdir(), prefix));
  t.after(() => fs.rm(dir, { recursive: true, force: true }));
  return dir;
}

/** One xattr through getfattr (independent of the code under test); undefined when absent. */
export function getXattr(path: string, name: string): Buffer | undefined {
  try {
    const out = execFileSync('getfattr', ['-h', '--absolute-names', '-e', 'hex', '-n', name, '--', path], {
      stdio: ['ignore', 'pipe', 'ignore'],
    }).toString();
    const line = out.split('\n').find((l) => l.startsWith(name + '='));
    return line === undefined ? undefined : Buffer.from(line.slice(name.length + 3), 'hex');
  } catch {
    return undefined;
  }
}

export function setXattr(path: string, name: string, value: Buffer): void {
  execFileSync('setfattr', ['-h', '-n', name, '-v', '0x' + value.toString('hex'), '--', path]);
}

/** Every path under dir, relative, sorted. */
export async function listTree(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (abs: string, rel: string) => {
    for (const d of await fs.readdir(abs, { withFileTypes: true })) {
      const r = rel ? `${rel}/${d.name}` : d.name;
      out.push(r);
      if (d.isDirectory()) await walk(join(abs, d.name), r);
    }
  };
  await walk(dir, '');
  return out.sort();
}
