/**
 * The daemon's TCP socket: mutual TLS (only clients with a certificate from --tlscacert get in),
 * several -H at once, refusal of an open TCP socket unless asked for, and the unix socket's
 * mode and group. Clients are the real docker CLI and node:tls.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../harness/free-port.js';
import { DaemonExitError, startDaemon, type TestDaemon } from './daemon.js';
import { createCa, type CertFiles, type TestCa } from './pki.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function docker(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile('docker', args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: env.DOCKER_CONFIG ?? '/nonexistent', ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
    child.stdin?.end();
  });
}

/** GET /_ping over TLS; resolves with the status, rejects when the server refuses the client. */
function tlsPing(port: number, opts: RequestOptions): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path: '/_ping', agent: false, ...opts }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.setTimeout(15_000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}

function plainPing(target: { port: number } | { socketPath: string }): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', path: '/_ping', agent: false, ...target }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A DOCKER_CERT_PATH directory with the given files under the CLI's names. */
function certPath(root: string, name: string, files: { ca: string; cert?: CertFiles }): string {
  const dir = join(root, name);
  mkdirSync(dir);
  copyFileSync(files.ca, join(dir, 'ca.pem'));
  if (files.cert) {
    copyFileSync(files.cert.cert, join(dir, 'cert.pem'));
    copyFileSync(files.cert.key, join(dir, 'key.pem'));
  }
  return dir;
}

describe('daemon over TCP with mutual TLS', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-tls-tcp-'));
  let ca: TestCa;
  let otherCa: TestCa;
  let server: CertFiles;
  let client: CertFiles;
  let stranger: CertFiles;
  let daemon: TestDaemon | undefined;
  let port = 0;

  before(async () => {
    ca = createCa(dir, 'daemon-ca');
    otherCa = createCa(dir, 'other-ca');
    server = ca.issue('server', { cn: 'berthd', dns: ['localhost'], ip: ['127.0.0.1'], usage: 'server' });
    client = ca.issue('client', { cn: 'berth-client', usage: 'client' });
    stranger = otherCa.issue('stranger', { cn: 'stranger', usage: 'client' });
    port = await freePort();
    // TLS settings from daemon.json, as dockerd's keys; the TCP host from -H next to the unix one.
    daemon = await startDaemon({
      args: ['-H', `tcp://127.0.0.1:${port}`],
      config: { tlsverify: true, tlscacert: ca.cert, tlscert: server.cert, tlskey: server.key },
    });
  });

  after(async () => {
    await daemon?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the docker CLI with a client certificate from the CA gets in', async () => {
    const env = { DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certPath(dir, 'cli-good', { ca: ca.cert, cert: client }), DOCKER_CONFIG: join(dir, 'cfg') };
    const version = await docker(['version', '--format', '{{.Server.Version}}'], env);
    assert.equal(version.code, 0, version.stderr);
    assert.match(version.stdout.trim(), /^\d+\.\d+/);
    const info = await docker(['info', '--format', '{{.ServerVersion}} {{.Name}}'], env);
    assert.equal(info.code, 0, info.stderr);
    assert.equal(info.stdout.trim().split(' ')[0], version.stdout.trim());
  });

  test('the unix socket serves at the same time', async () => {
    assert.equal(await plainPing({ socketPath: daemon!.socket }), 200);
    const run = await docker(['version', '--format', '{{.Server.Version}}'], { DOCKER_HOST: `unix://${daemon!.socket}`, DOCKER_CONFIG: join(dir, 'cfg') });
    assert.equal(run.code, 0, run.stderr);
  });

  test('node:tls: a certificate from the CA is admitted; none, or one from another CA, is refused', async () => {
    assert.equal(await tlsPing(port, { ca: ca.certPem, cert: client.certPem, key: client.keyPem }), 200);
    await assert.rejects(tlsPing(port, { ca: ca.certPem }), (err: NodeJS.ErrnoException) => {
      assert.match(`${err.code} ${err.message}`, /CERTIFICATE_REQUIRED|certificate required|HANDSHAKE_FAILURE|ECONNRESET|socket hang up/i);
      return true;
    });
    await assert.rejects(tlsPing(port, { ca: ca.certPem, cert: stranger.certPem, key: stranger.keyPem }), (err: NodeJS.ErrnoException) => {
      assert.match(`${err.code} ${err.message}`, /UNKNOWN_CA|unknown ca|BAD_CERTIFICATE|DECRYPT_ERROR|ECONNRESET|socket hang up/i);
      return true;
    });
    // Plain HTTP on the TLS port gets no API answer.
    await assert.rejects(async () => assert.equal(await plainPing({ port }), 200));
  });

  test('the docker CLI without a client certificate, or with one from another CA, is refused', async () => {
    const base = { DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CONFIG: join(dir, 'cfg') };
    const none = await docker(['version', '--format', '{{.Server.Version}}'], { ...base, DOCKER_CERT_PATH: certPath(dir, 'cli-none', { ca: ca.cert }) });
    assert.notEqual(none.code, 0);
    assert.equal(none.stdout.trim(), '');
    assert.match(none.stderr, /certificate required|bad certificate|handshake failure|connection reset|cert\.pem/i);
    const foreign = await docker(['version', '--format', '{{.Server.Version}}'], { ...base, DOCKER_CERT_PATH: certPath(dir, 'cli-foreign', { ca: ca.cert, cert: stranger }) });
    assert.notEqual(foreign.code, 0);
    assert.equal(foreign.stdout.trim(), '');
    // Go clients send no certificate when theirs is not from a CA the server names: "certificate required".
    assert.match(foreign.stderr, /certificate required|unknown certificate authority|bad certificate|handshake failure|connection reset/i);
    assert.match(daemon!.logs(), /TLS handshake failed/);
  });

  test('the unix socket is mode 0660', () => {
    const st = statSync(daemon!.socket);
    assert.equal(st.mode & 0o777, 0o660);
  });
});

describe('daemon start-up rules for TCP and the socket group', () => {
  test('tcp:// without --tlsverify is refused unless --allow-open-tcp is given', async () => {
    const port = await freePort();
    await assert.rejects(startDaemon({ args: ['-H', `tcp://127.0.0.1:${port}`] }), (err: unknown) => {
      assert.ok(err instanceof DaemonExitError);
      assert.notEqual(err.code, 0);
      assert.match(err.log, new RegExp(`refusing to listen on tcp://127.0.0.1:${port} without --tlsverify.*--allow-open-tcp`));
      return true;
    });
    // TLS without client verification is still an open socket.
    await assert.rejects(startDaemon({ args: ['-H', `tcp://127.0.0.1:${port}`, '--tls'] }), /refusing to listen/);

    const d = await startDaemon({ args: ['-H', `tcp://127.0.0.1:${port}`, '--allow-open-tcp'] });
    try {
      assert.equal(await plainPing({ port }), 200);
      assert.match(d.logs(), /"level":"warn","msg":"API listening on tcp:\/\/127\.0\.0\.1:\d+ without client certificate verification/);
    } finally {
      await d.stop();
    }
  });

  test('missing TLS files stop the daemon at start-up with the path in the message', async () => {
    const port = await freePort();
    await assert.rejects(
      startDaemon({ args: ['-H', `tcp://127.0.0.1:${port}`, '--tlsverify', '--tlscacert', '/nonexistent/ca.pem', '--tlscert', '/nonexistent/cert.pem', '--tlskey', '/nonexistent/key.pem'] }),
      /unable to read --tlscert \/nonexistent\/cert\.pem/,
    );
  });

  test('--group names the socket group; a named group that does not exist is an error', async () => {
    // Debian's base system always has the `daemon` group (GID 1).
    const d = await startDaemon({ args: ['--group', 'daemon'] });
    try {
      const st = statSync(d.socket);
      assert.equal(st.gid, 1);
      assert.equal(st.uid, 0);
    } finally {
      await d.stop();
    }
    await assert.rejects(startDaemon({ args: ['--group', 'berth-no-such-group'] }), /group \\?"berth-no-such-group\\?" for the API socket does not exist/);
  });
});
