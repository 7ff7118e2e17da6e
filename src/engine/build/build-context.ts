/**
 * The build context: the request body (a tar, plain or gzip/bzip2/xz) unpacked as it streams into
 * a directory of its own under the data root, by the layer unpacker, which refuses hostile entries
 * (`..`, escaping links, devices). Then the Dockerfile is read and `.dockerignore` applied.
 */
import { lstat, mkdir, readdir, readFile, rm, rmdir } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { decompressArchive } from '../../images/decompress.js';
import { unpackLayer } from '../../images/unpack-layer.js';
import { BerthError, invalidArgument } from '../../lib/errors.js';
import { DockerIgnore, readIgnorePatterns } from './dockerfile/dockerignore.js';
import { resolveInRoot } from './fs-in-root.js';

export interface BuildContext {
  /** The unpacked context. */
  dir: string;
  dockerfile: string;
  dockerfileName: string;
  /** Removes the context from disk. */
  dispose(): Promise<void>;
}

export async function receiveContext(workDir: string, body: Readable, dockerfileName: string | undefined): Promise<BuildContext> {
  const dir = join(workDir, `ctx-${randomBytes(8).toString('hex')}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const dispose = () => rm(dir, { recursive: true, force: true });
  try {
    try {
      await unpackLayer(decompressArchive('build context', body), dir);
    } catch (err) {
      if (err instanceof BerthError) throw invalidArgument(`invalid build context: ${err.message.replace(/layer entry/, 'context entry')}`);
      throw err;
    }
    let name = dockerfileName || 'Dockerfile';
    let text = await readInside(dir, name);
    if (text === undefined && !dockerfileName) {
      name = 'dockerfile';
      text = await readInside(dir, name);
    }
    if (text === undefined) throw invalidArgument(`Cannot locate specified Dockerfile: ${dockerfileName || 'Dockerfile'}`);
    const ignoreText = await readInside(dir, '.dockerignore');
    if (ignoreText !== undefined) await applyIgnore(dir, new DockerIgnore(readIgnorePatterns(ignoreText)));
    return { dir, dockerfile: text, dockerfileName: name, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

/** A Dockerfile or .dockerignore bigger than this is refused rather than read into memory. */
const MAX_TEXT = 16 * 1024 * 1024;

async function readInside(root: string, rel: string): Promise<string | undefined> {
  const abs = await resolveInRoot(root, rel);
  try {
    const st = await lstat(abs);
    if (!st.isFile()) return undefined;
    if (st.size > MAX_TEXT) throw invalidArgument(`${rel} is too large (${st.size} bytes; at most ${MAX_TEXT})`);
    return await readFile(abs, 'utf8');
  } catch (err) {
    if (err instanceof BerthError) throw err;
    return undefined;
  }
}

/** Removes what the patterns exclude (files first; a directory only once nothing kept is left in it). */
async function applyIgnore(root: string, ig: DockerIgnore): Promise<void> {
  if (ig.empty) return;
  const walk = async (rel: string): Promise<boolean> => {
    // returns whether the directory still holds something
    const entries = await readdir(join(root, rel), { withFileTypes: true });
    let kept = 0;
    for (const e of entries) {
      const r = rel ? posix.join(rel, e.name) : e.name;
      if (e.isDirectory()) {
        const left = await walk(r);
        if (!left && ig.ignores(r)) await rmdir(join(root, r));
        else kept++;
      } else if (ig.ignores(r)) await rm(join(root, r), { force: true });
      else kept++;
    }
    return kept > 0;
  };
  await walk('');
}
