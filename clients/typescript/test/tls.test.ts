/**
 * DOCKER_HOST=tcp://, DOCKER_CERT_PATH and DOCKER_TLS_VERIFY: the client reaches the real berthd
 * through a mutual-TLS endpoint on 127.0.0.1 (a TLS terminator in front of berthd's socket,
 * since berthd itself listens on TCP only with TLS it does not offer yet).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BerthClient, parseDockerHost } from '@berth-engine/client';
import { loadTestEnv, tempDir } from './test-env.js';

const env = loadTestEnv();
const address = parseDockerHost(env.dockerHost);
const here = dirname(fileURLToPath(import.meta.url));
const makeCerts = resolve(here, '../../../testdata/make-certs.sh');
let certs: string;
let server: tls.Server;
let port: number;

before(async () => {
  certs = tempDir();
  execFileSync('bash', [makeCerts, certs]);
  server = tls.createServer(
    {
      key: readFileSync(join(certs, 'server-key.pem')),
      cert: readFileSync(join(certs, 'server-cert.pem')),
      ca: readFileSync(join(certs, 'ca.pem')),
      requestCert: true,
      rejectUnauthorized: true,
    },
    (conn) => {
      const upstream = address.kind === 'unix' ? net.connect(address.socketPath) : net.connect(address.port, address.host);
      conn.pipe(upstream).pipe(conn);
      const close = () => {
        conn.destroy();
        upstream.destroy();
      };
      conn.on('error', close);
      upstream.on('error', close);
    },
  );
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as net.AddressInfo).port;
});

after(() => new Promise<void>((r) => server.close(() => r())));

test('mutual TLS with verification from DOCKER_TLS_VERIFY and DOCKER_CERT_PATH', async () => {
  const client = BerthClient.fromEnv({ DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certs });
  try {
    assert.equal((await client.ping()).osType, 'linux');
    assert.equal((await client.version()).Os, 'linux');
  } finally {
    client.close();
  }
});

test('verification fails against a CA the daemon certificate is not from', async () => {
  const other = tempDir();
  execFileSync('bash', [makeCerts, other]);
  // Our own client certificate, but the other CA as the trust root.
  execFileSync('cp', [join(certs, 'cert.pem'), join(certs, 'key.pem'), other]);
  const client = BerthClient.fromEnv({ DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: other });
  try {
    await assert.rejects(client.ping(), /certificate|self.signed|verify/i);
  } finally {
    client.close();
  }
});

test('without DOCKER_TLS_VERIFY the daemon certificate is not checked, the client one is still sent', async () => {
  const other = tempDir();
  execFileSync('bash', [makeCerts, other]);
  execFileSync('cp', [join(certs, 'cert.pem'), join(certs, 'key.pem'), other]);
  const client = BerthClient.fromEnv({ DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_CERT_PATH: other });
  try {
    assert.equal((await client.ping()).osType, 'linux');
  } finally {
    client.close();
  }
});

test('a client without a certificate is turned away by the mutual-TLS endpoint', async () => {
  const noCert = tempDir();
  execFileSync('cp', [join(certs, 'ca.pem'), noCert]);
  const client = BerthClient.fromEnv({ DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: noCert });
  try {
    await assert.rejects(client.ping());
  } finally {
    client.close();
  }
});
