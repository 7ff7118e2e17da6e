/**
 * The system's trusted CAs, as Go programs (dockerd among them) find them on Linux: $SSL_CERT_FILE,
 * else the distribution's bundle. Node's own compiled-in Mozilla list is the last resort, so
 * CAs an administrator installed with update-ca-certificates are trusted as dockerd trusts them.
 */
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';

const BUNDLES = [
  '/etc/ssl/certs/ca-certificates.crt', // Debian, Ubuntu, Alpine, Arch
  '/etc/pki/tls/certs/ca-bundle.crt', // Fedora, RHEL
  '/etc/ssl/ca-bundle.pem', // openSUSE
  '/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem',
  '/etc/ssl/cert.pem',
];

let cached: { source: string; pem: string[] } | undefined;

/** PEM text of the trusted roots (read once; a daemon restart picks up changes). */
export function systemCas(): string[] {
  cached ??= loadSystemCas();
  return cached.pem;
}

/** Where the roots came from, for diagnostics. */
export function systemCaSource(): string {
  cached ??= loadSystemCas();
  return cached.source;
}

function loadSystemCas(): { source: string; pem: string[] } {
  const candidates = process.env.SSL_CERT_FILE ? [process.env.SSL_CERT_FILE] : BUNDLES;
  for (const path of candidates) {
    try {
      const text = readFileSync(path, 'utf8');
      if (text.includes('-----BEGIN CERTIFICATE-----')) return { source: path, pem: [text] };
    } catch {
      // Not this distribution's layout; try the next one.
    }
  }
  return { source: 'node built-in roots', pem: [...rootCertificates] };
}
