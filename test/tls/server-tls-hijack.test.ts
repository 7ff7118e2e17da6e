/**
 * listen() in-process: a hijacked connection (as attach and exec use) over mutual TLS keeps
 * sending after the client half-closes, and several hosts open together or not at all.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { connect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Router } from '../../src/api/router.js';
import { closeListeners, listen, type Listener, type TcpSecurity } from '../../src/api/server.js';
import { freePort } from '../harness/free-port.js';
import { createCa, type CertFiles, type TestCa } from './pki.js';

describe('API server over mutual TLS, in process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-tls-server-'));
  let ca: TestCa;
  let client: CertFiles;
  let sec: TcpSecurity;
  let listeners: Listener[] = [];
  let port = 0;
  const router = new Router();
  // Echoes everything the client sent once the client has half-closed.
  router.on('POST', '/test/echo', (ctx) => {
    const socket = ctx.socket!;
    socket.write('HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n');
    let got = '';
    socket.on('data', (b: Buffer) => (got += b.toString()));
    socket.on('end', () => setTimeout(() => socket.end(`echo:${got}`), 20));
  });

  before(async () => {
    ca = createCa(dir, 'ca');
    const server = ca.issue('server', { cn: 'berthd', ip: ['127.0.0.1'], usage: 'server' });
    client = ca.issue('client', { cn: 'client', usage: 'client' });
    sec = { tls: true, tlsVerify: true, tlsCaCert: ca.cert, tlsCert: server.cert, tlsKey: server.key, allowOpenTcp: false };
    port = await freePort();
    listeners = await listen(router, [`unix://${join(dir, 'api.sock')}`, `tcp://127.0.0.1:${port}`], '', sec);
  });

  after(async () => {
    await closeListeners(listeners);
    rmSync(dir, { recursive: true, force: true });
  });

  test('both hosts listen', () => {
    assert.deepEqual(listeners.map((l) => l.address), [`unix://${join(dir, 'api.sock')}`, `tcp://127.0.0.1:${port}`]);
  });

  test('output still flows after the client half-closes a hijacked TLS connection', async () => {
    const reply = await new Promise<string>((resolve, reject) => {
      const sock = connect({ host: '127.0.0.1', port, ca: ca.certPem, cert: client.certPem, key: client.keyPem }, () => {
        sock.write('POST /test/echo HTTP/1.1\r\nHost: berth\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n');
        setTimeout(() => sock.end('stdin bytes'), 50);
      });
      let all = '';
      sock.on('data', (b: Buffer) => (all += b.toString()));
      sock.on('close', () => resolve(all));
      sock.on('error', reject);
    });
    assert.match(reply, /^HTTP\/1\.1 101 UPGRADED\r\n/);
    assert.equal(reply.split('\r\n\r\n')[1], 'echo:stdin bytes');
  });

  test('tcp hosts without TLS settings are refused, and nothing stays open', async () => {
    const sock = join(dir, 'refused.sock');
    await assert.rejects(listen(router, [`unix://${sock}`, `tcp://127.0.0.1:${await freePort()}`], ''), /no TLS settings/);
    // The unix listener opened first was closed again (its file is gone once closed by node).
    assert.equal(existsSync(sock), false);
  });

  test('a bad key pair fails start-up with the file names', async () => {
    const bad = { ...sec, tlsKey: ca.key }; // the CA's key does not match the server certificate
    await assert.rejects(listen(router, [`tcp://127.0.0.1:${await freePort()}`], '', bad), /unable to use the TLS files \(--tlscert .*server\.pem, --tlskey .*ca-key\.pem\)/);
  });
});
