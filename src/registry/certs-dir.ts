/**
 * Per-registry TLS files in the layout dockerd users know from /etc/docker/certs.d:
 * `<root>/<host[:port]>/*.crt` are extra CAs, `*.cert` + `*.key` (same base name) a client
 * certificate. Read on every pull or login, so new files apply without a restart.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BerthError, errorMessage } from '../lib/errors.js';
import { log } from '../lib/log.js';

export const DEFAULT_CERTS_DIR = '/etc/berth/certs.d';

/** TLS material for one registry host. */
export interface HostTls {
  /** The directory the files came from (for messages). */
  dir: string;
  /** PEM CAs trusted in addition to the system's. */
  ca: string[];
  /** PEM client certificate and its key. */
  cert?: string;
  key?: string;
  /** Digest of the material: requests with equal ids may share connections. */
  id: string;
}

/** Loads `<root>/<hostPort>/`; undefined when the directory does not exist or holds no TLS files. */
export async function loadHostTls(root: string, hostPort: string): Promise<HostTls | undefined> {
  // The name comes from an image reference; never let it leave the certs root.
  if (hostPort === '' || hostPort.includes('/') || hostPort.startsWith('.')) return undefined;
  const dir = join(root, hostPort);
  let names: string[];
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    names = entries.filter((e) => e.isFile() || e.isSymbolicLink()).map((e) => e.name).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw new BerthError('internal', `unable to read registry certificates in ${dir}: ${errorMessage(err)}`, { cause: err });
  }
  const has = new Set(names);
  const ca: string[] = [];
  const pairs: Array<{ cert: string; key: string }> = [];
  for (const name of names) {
    if (name.endsWith('.crt')) {
      ca.push(await read(dir, name));
    } else if (name.endsWith('.cert')) {
      const keyName = `${name.slice(0, -'.cert'.length)}.key`;
      if (!has.has(keyName)) {
        throw new BerthError('invalid-argument', `missing key ${keyName} for client certificate ${name}. CA certificates must use the extension .crt`);
      }
      pairs.push({ cert: await read(dir, name), key: await read(dir, keyName) });
    } else if (name.endsWith('.key')) {
      const certName = `${name.slice(0, -'.key'.length)}.cert`;
      if (!has.has(certName)) throw new BerthError('invalid-argument', `missing client certificate ${certName} for key ${name}`);
    }
  }
  if (ca.length === 0 && pairs.length === 0) return undefined;
  if (pairs.length > 1) log.warn('several client certificates for one registry; using the first by name', { dir });
  const pair = pairs[0];
  const hash = createHash('sha256').update(dir);
  for (const text of [...ca, pair?.cert ?? '', pair?.key ?? '']) hash.update('\0').update(text);
  return { dir, ca, ...(pair ? { cert: pair.cert, key: pair.key } : {}), id: hash.digest('hex') };
}

/** `base` with `extra` CAs trusted too (a token service signed by the registry's CA). */
export function withExtraCas(base: HostTls | undefined, extra: HostTls | undefined): HostTls | undefined {
  if (!extra || extra.ca.length === 0) return base;
  if (!base) return { dir: extra.dir, ca: extra.ca, id: createHash('sha256').update(`ca-only\0${extra.id}`).digest('hex') };
  if (base.id === extra.id) return base;
  return { ...base, ca: [...base.ca, ...extra.ca], id: createHash('sha256').update(`${base.id}\0${extra.id}`).digest('hex') };
}

async function read(dir: string, name: string): Promise<string> {
  try {
    return await readFile(join(dir, name), 'utf8');
  } catch (err) {
    throw new BerthError('internal', `unable to read ${join(dir, name)}: ${errorMessage(err)}`, { cause: err });
  }
}
