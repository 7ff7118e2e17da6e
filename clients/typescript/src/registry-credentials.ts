/**
 * Registry credentials from the docker CLI's config.json ($DOCKER_CONFIG or ~/.docker): a helper
 * named in credHelpers for the registry wins, then credsStore, then the `auths` entry a login
 * wrote. Credentials are encoded into X-Registry-Auth as the official clients do.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { helperGet, helperStore } from './credential-helper.js';
import { authKey, hostOfAuthKey } from './image-reference.js';
import type { AuthConfig } from './models.js';

interface AuthsEntry {
  auth?: string;
  username?: string;
  password?: string;
  email?: string;
  identitytoken?: string;
  registrytoken?: string;
}

export interface DockerConfigFile {
  auths?: Record<string, AuthsEntry>;
  credsStore?: string;
  credHelpers?: Record<string, string>;
  [key: string]: unknown;
}

export function readDockerConfig(configDir: string): DockerConfigFile {
  let text: string;
  try {
    text = readFileSync(join(configDir, 'config.json'), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
  return text.trim() ? (JSON.parse(text) as DockerConfigFile) : {};
}

/** The helper that keeps credentials for `host`, if config.json names one. */
function helperFor(config: DockerConfigFile, host: string): string | undefined {
  for (const [key, helper] of Object.entries(config.credHelpers ?? {})) {
    if (hostOfAuthKey(key) === host && helper) return helper;
  }
  return config.credsStore || undefined;
}

/** Finds the `auths` entry for a host: the exact key first, then keys with a scheme or path. */
function authsEntry(config: DockerConfigFile, host: string): AuthsEntry | undefined {
  const auths = config.auths ?? {};
  const exact = auths[authKey(host)];
  if (exact) return exact;
  for (const [key, entry] of Object.entries(auths)) if (hostOfAuthKey(key) === host) return entry;
  return undefined;
}

function fromEntry(entry: AuthsEntry, serveraddress: string): AuthConfig | undefined {
  const auth: AuthConfig = { serveraddress };
  if (entry.auth) {
    const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon === -1) throw new Error(`invalid auth entry for ${serveraddress} in config.json`);
    auth.username = decoded.slice(0, colon);
    auth.password = decoded.slice(colon + 1);
  } else if (entry.username) {
    auth.username = entry.username;
    auth.password = entry.password ?? '';
  }
  if (entry.identitytoken) auth.identitytoken = entry.identitytoken;
  if (entry.registrytoken) auth.registrytoken = entry.registrytoken;
  if (entry.email) auth.email = entry.email;
  return auth.username || auth.identitytoken || auth.registrytoken ? auth : undefined;
}

/** Stored credentials for a registry host ("docker.io", "127.0.0.1:5000"), or undefined. */
export async function resolveCredentials(configDir: string, host: string): Promise<AuthConfig | undefined> {
  const config = readDockerConfig(configDir);
  const key = authKey(host);
  const helper = helperFor(config, host);
  if (helper) {
    const found = await helperGet(helper, key);
    if (found) return found;
  }
  const entry = authsEntry(config, host);
  return entry ? fromEntry(entry, key) : undefined;
}

/**
 * Keeps credentials after a login: through the registry's helper when config.json names one
 * (config.json then records only that the registry has credentials), else in `auths`.
 */
export async function storeCredentials(configDir: string, host: string, auth: AuthConfig): Promise<void> {
  const config = readDockerConfig(configDir);
  const key = authKey(host);
  const helper = helperFor(config, host);
  const auths = { ...config.auths };
  if (helper) {
    await helperStore(helper, key, auth);
    auths[key] = {};
  } else if (auth.identitytoken) {
    auths[key] = { identitytoken: auth.identitytoken, ...(auth.username && { auth: Buffer.from(`${auth.username}:`).toString('base64') }) };
  } else {
    auths[key] = { auth: Buffer.from(`${auth.username ?? ''}:${auth.password ?? ''}`).toString('base64') };
  }
  writeConfigAtomically(configDir, { ...config, auths });
}

function writeConfigAtomically(configDir: string, config: DockerConfigFile): void {
  mkdirSync(configDir, { recursive: true, mode: 0o700 });
  const target = join(configDir, 'config.json');
  const temp = `${target}.${process.pid}.tmp`;
  writeFileSync(temp, JSON.stringify(config, null, '\t') + '\n', { mode: 0o600 });
  renameSync(temp, target);
}

/** X-Registry-Auth: base64url (with padding) of the AuthConfig JSON, empty fields left out. */
export function encodeRegistryAuth(auth: AuthConfig): string {
  const clean = Object.fromEntries(Object.entries(auth).filter(([, v]) => v !== undefined && v !== ''));
  return Buffer.from(JSON.stringify(clean)).toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
}
