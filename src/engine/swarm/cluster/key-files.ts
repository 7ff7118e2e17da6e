/**
 * A manager's copies of the data key, the CA key and its node (TLS) key on disk: plain, or (the
 * managers auto-locked) sealed under a key derived from the swarm's unlock key, so that after a
 * restart nothing on the disk opens the cluster's secrets, nor speaks to peers and etcd as this
 * node, until `docker swarm unlock` gives the key again. A sealed file holds the JSON of
 * data-key.ts's Sealed; a plain one a PEM or base64 text.
 */
import { hkdfSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { invalidArgument } from '../../../lib/errors.js';
import { seal, unseal, type Sealed } from './data-key.js';

const PREFIX = 'SWMKEY-1-';

/** The key files are sealed under: derived from the unlock key's 32 bytes (400 for a malformed key, as dockerd). */
export function lockKeyOf(unlockKey: string): Buffer {
  const text = unlockKey.trim();
  const raw = text.startsWith(PREFIX) ? text.slice(PREFIX.length) : '';
  if (!raw || !/^[A-Za-z0-9+/]+$/.test(raw)) throw invalidArgument('invalid key string');
  return Buffer.from(hkdfSync('sha256', Buffer.from(raw, 'base64'), Buffer.alloc(0), 'berth swarm lock', 32));
}

/**
 * Writes `text`, sealed when a lock key is given; 0600 either way. Through a temp file and a rename:
 * cut short, the old key stays whole (a node key lost is a node lost).
 */
export async function writeKeyFile(path: string, text: string, lockKey: Buffer | undefined): Promise<void> {
  const tmp = `${path}.tmp`;
  await writeFile(tmp, lockKey ? JSON.stringify(seal(lockKey, { text })) : text, { mode: 0o600 });
  await rename(tmp, path);
}

/** A key file as found: its text, or its sealed form (to open with openKeyFile); undefined when absent. */
export async function readKeyFile(path: string): Promise<{ text?: string; sealed?: Sealed } | undefined> {
  if (!existsSync(path)) return undefined;
  const raw = await readFile(path, 'utf8');
  return raw.startsWith('{') ? { sealed: JSON.parse(raw) as Sealed } : { text: raw };
}

/** Throws (the authentication tag does not match) for a wrong lock key. */
export function openKeyFile(sealed: Sealed, lockKey: Buffer): string {
  return unseal<{ text: string }>(lockKey, sealed).text;
}

/** Whether the file is sealed: read at start-up, before anything else, to know the node is locked. */
export function isSealedSync(path: string): boolean {
  if (!existsSync(path)) return false;
  return readFileSync(path, 'utf8').startsWith('{');
}
