/**
 * Reads connection settings from the environment the way the docker CLI does: DOCKER_HOST,
 * DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, DOCKER_API_VERSION and DOCKER_CONFIG.
 */
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_HOST } from './docker-host.js';

export interface TlsSettings {
  /** PEM bundle of trusted CAs; the system roots when absent. */
  ca?: Buffer;
  /** Client certificate and key, for mutual TLS. */
  cert?: Buffer;
  key?: Buffer;
  /** Check the daemon's certificate and name. DOCKER_TLS_VERIFY turns this on. */
  verify: boolean;
}

export interface ConnectionSettings {
  /** DOCKER_HOST form: unix:///path or tcp://host:port. */
  host: string;
  tls?: TlsSettings;
  /** A pinned API version; when set, no negotiation happens. */
  apiVersion?: string;
  /** Directory holding config.json (credentials). */
  configDir: string;
}

type Env = Record<string, string | undefined>;

export function dockerConfigDir(env: Env = process.env): string {
  return env.DOCKER_CONFIG || join(homedir(), '.docker');
}

/** DOCKER_CERT_PATH alone enables TLS without verification; DOCKER_TLS_VERIFY (non-empty) verifies. */
export function connectionFromEnv(env: Env = process.env): ConnectionSettings {
  const settings: ConnectionSettings = { host: env.DOCKER_HOST || DEFAULT_HOST, configDir: dockerConfigDir(env) };
  const verify = Boolean(env.DOCKER_TLS_VERIFY);
  if (env.DOCKER_CERT_PATH || verify) {
    settings.tls = { ...readCertDir(env.DOCKER_CERT_PATH || dockerConfigDir(env)), verify };
  }
  if (env.DOCKER_API_VERSION) settings.apiVersion = env.DOCKER_API_VERSION.replace(/^v/, '');
  return settings;
}

/** Loads ca.pem, cert.pem and key.pem from a directory; a certificate needs its key and vice versa. */
export function readCertDir(dir: string): Omit<TlsSettings, 'verify'> {
  const read = (name: string) => {
    const p = join(dir, name);
    return existsSync(p) ? readFileSync(p) : undefined;
  };
  const ca = read('ca.pem');
  const cert = read('cert.pem');
  const key = read('key.pem');
  if (Boolean(cert) !== Boolean(key)) {
    throw new Error(`${dir} must hold both cert.pem and key.pem for mutual TLS, or neither`);
  }
  return { ...(ca && { ca }), ...(cert && { cert }), ...(key && { key }) };
}
