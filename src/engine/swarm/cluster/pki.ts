/**
 * The cluster's certificate authority and node certificates, made with the openssl tool (P-256 keys:
 * quick to make). The CA signs each node's certificate at init or join; the certificates serve both the
 * join listener and etcd's client and peer TLS. The join tokens carry the CA's digest, which a joining
 * node checks the manager's chain against before it trusts anything the manager says.
 */
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { invalidArgument } from '../../../lib/errors.js';

const run = promisify(execFile);
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export interface CertPair {
  cert: string;
  key: string;
}

async function inTemp<T>(parent: string, fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(parent, 'pki-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function openssl(args: string[], cwd: string): Promise<void> {
  await run('openssl', args, { cwd, timeout: 30_000 });
}

/** A new root CA (20 years, as swarmkit's), PEM. */
export function newCa(workDir: string): Promise<CertPair> {
  return inTemp(workDir, async (dir) => {
    await openssl(['req', '-x509', ...EC_KEY, '-keyout', 'ca-key.pem', '-out', 'ca.pem', '-days', '7300', '-subj', '/CN=swarm-ca',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
    return { cert: await readFile(join(dir, 'ca.pem'), 'utf8'), key: await readFile(join(dir, 'ca-key.pem'), 'utf8') };
  });
}

/** A key and a certificate signing request for a node (made by the node itself: the key never travels). */
export function newCsr(workDir: string): Promise<{ key: string; csr: string }> {
  return inTemp(workDir, async (dir) => {
    await openssl(['req', '-new', ...EC_KEY, '-keyout', 'key.pem', '-out', 'req.csr', '-subj', '/CN=swarm-node'], dir);
    return { key: await readFile(join(dir, 'key.pem'), 'utf8'), csr: await readFile(join(dir, 'req.csr'), 'utf8') };
  });
}

/** A request for another certificate for a key the node has already (a renewal keeps the key). */
export function csrFor(workDir: string, key: string): Promise<string> {
  return inTemp(workDir, async (dir) => {
    await writeFile(join(dir, 'key.pem'), key, { mode: 0o600 });
    await openssl(['req', '-new', '-key', 'key.pem', '-out', 'req.csr', '-subj', '/CN=swarm-node'], dir);
    return readFile(join(dir, 'req.csr'), 'utf8');
  });
}

export interface NodeIdentity {
  nodeId: string;
  role: 'manager' | 'worker';
  clusterId: string;
  /** IP addresses the certificate is valid for (the node's advertised one). */
  ips: string[];
  /** How long it is valid, from now (CAConfig.NodeCertExpiry). */
  seconds: number;
}

/** openssl's `ca` (not `x509 -req`, whose validity is whole days only) with a database of its own per signature. */
const CA_CONFIG = ['[ca]', 'default_ca = node_ca', '[node_ca]', 'database = index.txt', 'serial = serial', 'new_certs_dir = .', 'default_md = sha256',
  'policy = node_policy', 'unique_subject = no', '[node_policy]', 'O = optional', 'OU = optional', 'CN = supplied'].join('\n') + '\n';

/** A time as openssl's `ca -enddate` takes it: YYYYMMDDHHMMSSZ. */
const asn1Time = (ms: number) => new Date(ms).toISOString().replace(/[-:T]/g, '').replace(/\.\d+Z$/, 'Z');

/** Signs a node's request: CN the node id, OU its role, O the cluster, usable as TLS server and client. */
export async function signNode(workDir: string, ca: CertPair, csr: string, who: NodeIdentity): Promise<string> {
  // The addresses come from the joining node and go into openssl's extension file: anything but an
  // IP address (a newline, then `basicConstraints=CA:TRUE`, say) would be signed as it says.
  const bad = who.ips.find((ip) => typeof ip !== 'string' || !isIP(ip));
  if (bad !== undefined) throw invalidArgument(`not an IP address for a node certificate: ${JSON.stringify(bad)}`);
  return inTemp(workDir, async (dir) => {
    await writeFile(join(dir, 'ca.pem'), ca.cert);
    await writeFile(join(dir, 'ca-key.pem'), ca.key, { mode: 0o600 });
    await writeFile(join(dir, 'req.csr'), csr);
    const sans = [...new Set(['127.0.0.1', ...who.ips])].map((ip) => `IP:${ip}`);
    await writeFile(join(dir, 'ext'), [
      'basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment', 'extendedKeyUsage=serverAuth,clientAuth',
      `subjectAltName=${sans.join(',')}`,
    ].join('\n') + '\n');
    const subj = `/O=${who.clusterId}/OU=swarm-${who.role}/CN=${who.nodeId}`;
    await writeFile(join(dir, 'ca.cnf'), CA_CONFIG);
    await writeFile(join(dir, 'index.txt'), '');
    // The subject names the node (etcd's user, the peers' check of who asks), whatever the request said.
    await openssl(['ca', '-batch', '-config', 'ca.cnf', '-cert', 'ca.pem', '-keyfile', 'ca-key.pem', '-in', 'req.csr', '-out', 'node.pem', '-notext', '-rand_serial',
      '-enddate', asn1Time(Date.now() + Math.max(1, who.seconds) * 1000), '-extfile', 'ext', '-subj', subj], dir);
    return readFile(join(dir, 'node.pem'), 'utf8');
  });
}

/** The CA's digest as join tokens carry it: SHA-256 of its DER, 50 base-36 digits. */
export function caDigest(ca: string | Buffer): string {
  const der = typeof ca === 'string' ? new X509Certificate(ca).raw : ca;
  return BigInt(`0x${createHash('sha256').update(der).digest('hex')}`).toString(36).padStart(50, '0').slice(0, 50);
}

/** Facts of a certificate for the API (Node TLSInfo): the issuer's subject and public key, base64 DER. */
export function tlsInfo(caPem: string): { TrustRoot: string; CertIssuerSubject: string; CertIssuerPublicKey: string } {
  const ca = new X509Certificate(caPem);
  // Subject as DER is not exposed by node; the issuer's name in text form stands for it.
  return {
    TrustRoot: caPem,
    CertIssuerSubject: Buffer.from(ca.subject).toString('base64'),
    CertIssuerPublicKey: ca.publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
  };
}
