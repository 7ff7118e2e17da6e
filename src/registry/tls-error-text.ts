/**
 * Node's TLS failures in the words dockerd (Go's crypto/tls and x509) uses, so users and tools
 * see `tls: failed to verify certificate: x509: certificate signed by unknown authority` rather
 * than OpenSSL's names; likewise a refused connection and an unknown host name. Anything else keeps
 * Node's message.
 */
import { isIP } from 'node:net';
import type { PeerCertificate } from 'node:tls';
import { errorMessage } from '../lib/errors.js';

const VERIFY = 'tls: failed to verify certificate: x509:';

const UNKNOWN_AUTHORITY = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);

/** Go's names for TLS alerts a server sends (OpenSSL says e.g. `tlsv1 alert unknown ca`). */
const ALERTS: Record<string, string> = {
  'unknown ca': 'unknown certificate authority',
  'bad certificate': 'bad certificate',
  'certificate required': 'certificate required',
  'certificate unknown': 'unknown certificate',
  'certificate expired': 'expired certificate',
  'certificate revoked': 'revoked certificate',
  'unsupported certificate': 'unsupported certificate',
  'handshake failure': 'handshake failure',
  'protocol version': 'protocol version not supported',
  'access denied': 'access denied',
  'decrypt error': 'error decrypting message',
  'internal error': 'internal error',
};

interface NodeTlsError {
  code?: string;
  reason?: string;
  host?: string;
  cert?: PeerCertificate;
}

export function transportErrorText(err: unknown): string {
  const e = (err ?? {}) as NodeTlsError;
  const code = e.code ?? '';
  if (UNKNOWN_AUTHORITY.has(code)) return `${VERIFY} certificate signed by unknown authority`;
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID') return `${VERIFY} certificate has expired or is not yet valid`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `${VERIFY} ${nameMismatch(e.host ?? '', e.cert)}`;
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG' || (code === 'EPROTO' && /wrong version number/.test(errorMessage(err)))) {
    return 'http: server gave HTTP response to HTTPS client';
  }
  const alert = /(?:sslv3|tlsv1|tlsv13) alert (.+)$/.exec(e.reason ?? '')?.[1];
  if (alert !== undefined) return `remote error: tls: ${ALERTS[alert] ?? alert}`;
  // Go's net package words these two, which users meet most (nothing listening, a name unknown).
  const net = err as { address?: string; port?: number; hostname?: string };
  if (code === 'ECONNREFUSED' && net.address !== undefined) return `dial tcp ${net.address.includes(':') ? `[${net.address}]` : net.address}:${net.port ?? ''}: connect: connection refused`;
  if (code === 'ENOTFOUND' && net.hostname !== undefined) return `dial tcp: lookup ${net.hostname}: no such host`;
  return errorMessage(err);
}

/** `x509: certificate is valid for a, b, not c`, as Go words a hostname mismatch. */
function nameMismatch(host: string, cert: PeerCertificate | undefined): string {
  const sans = (cert?.subjectaltname ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  if (isIP(host)) {
    const ips = sans.filter((s) => s.startsWith('IP Address:')).map((s) => s.slice('IP Address:'.length));
    if (ips.length === 0) return `cannot validate certificate for ${host} because it doesn't contain any IP SANs`;
    return `certificate is valid for ${ips.join(', ')}, not ${host}`;
  }
  const dns = sans.filter((s) => s.startsWith('DNS:')).map((s) => s.slice('DNS:'.length));
  if (dns.length === 0) return `certificate is not valid for any names, but wanted to match ${host}`;
  return `certificate is valid for ${dns.join(', ')}, not ${host}`;
}
