/**
 * TEST ONLY. Throwaway certificate authorities and certificates made with openssl (P-256 keys:
 * quick to generate), and a host name that reaches a loopback address without being one of the
 * loopback literals a registry client treats as insecure by default.
 */
import { execFileSync } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

export interface CertFiles {
  /** PEM paths. */
  cert: string;
  key: string;
  /** PEM contents. */
  certPem: string;
  keyPem: string;
}

export interface TestCa extends CertFiles {
  name: string;
  /** Issues a leaf certificate signed by this CA. */
  issue(name: string, opts: { cn: string; dns?: string[]; ip?: string[]; usage: 'server' | 'client' | 'both' }): CertFiles;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export function createCa(dir: string, name: string): TestCa {
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}-key.pem`);
  openssl(['req', '-x509', ...EC_KEY, '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  const ca: TestCa = {
    name, cert, key, certPem: readFileSync(cert, 'utf8'), keyPem: readFileSync(key, 'utf8'),
    issue(leaf, opts) {
      const leafKey = join(dir, `${leaf}-key.pem`);
      const csr = join(dir, `${leaf}.csr`);
      const leafCert = join(dir, `${leaf}.pem`);
      const ext = join(dir, `${leaf}.ext`);
      const sans = [...(opts.dns ?? []).map((d) => `DNS:${d}`), ...(opts.ip ?? []).map((i) => `IP:${i}`)];
      const eku = { server: 'serverAuth', client: 'clientAuth', both: 'serverAuth,clientAuth' }[opts.usage];
      writeFileSync(ext, [
        'basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment', `extendedKeyUsage=${eku}`,
        ...(sans.length ? [`subjectAltName=${sans.join(',')}`] : []),
      ].join('\n') + '\n');
      openssl(['req', '-new', ...EC_KEY, '-keyout', leafKey, '-out', csr, '-subj', `/CN=${opts.cn}`], dir);
      openssl(['x509', '-req', '-in', csr, '-CA', cert, '-CAkey', key, '-CAcreateserial', '-out', leafCert, '-days', '2', '-extfile', ext], dir);
      return { cert: leafCert, key: leafKey, certPem: readFileSync(leafCert, 'utf8'), keyPem: readFileSync(leafKey, 'utf8') };
    },
  };
  return ca;
}

/**
 * A DNS name (this machine's host name, or Debian's `ip6-localhost`) that resolves to a loopback
 * address, with that address. Registries reached by such a name get verified TLS, so the tests
 * can show verification failing and succeeding on one host. Undefined when none resolves.
 */
export async function loopbackName(): Promise<{ name: string; address: string } | undefined> {
  for (const name of [hostname(), 'ip6-localhost', 'ip6-loopback']) {
    if (name === '' || name.toLowerCase() === 'localhost') continue;
    try {
      const { address } = await lookup(name);
      if (address.startsWith('127.') || address === '::1') return { name, address };
    } catch {
      // Not resolvable here; try the next candidate.
    }
  }
  return undefined;
}
