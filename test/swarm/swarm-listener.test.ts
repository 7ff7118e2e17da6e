/**
 * The swarm port, as dockerd treats it: a taken port refuses `swarm init` and `swarm join` with an
 * error naming the address (no quiet move to another port); `--listen-addr host:0` takes a free one,
 * which `swarm join-token` then names. And the supervised etcd's log, rotated by size into a
 * bounded number of files (limits from BERTH_ETCD_LOG_MAX_SIZE / BERTH_ETCD_LOG_MAX_FILE). What
 * the swarm port serves survives a request that does not decode, and signs no joining node's
 * certificate for an address that is no IP address.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Server } from 'node:net';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useDaemon } from '../harness/index.js';
import { eventually } from './support.js';

function holdPort(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

describe('swarm port and etcd log', () => {
  const daemon = useDaemon({ env: { BERTH_ETCD_LOG_MAX_SIZE: '2k', BERTH_ETCD_LOG_MAX_FILE: '3' } });
  let held: { server: Server; port: number };
  /** The swarm port `--listen-addr 127.0.0.1:0` took (second test). */
  let swarmPort = 0;
  before(async () => (held = await holdPort()));
  after(async () => {
    held.server.close();
    await daemon().docker(['swarm', 'leave', '--force']);
  });

  it('a taken swarm port refuses init and join, naming the address; the node stays out of any swarm', async () => {
    const d = daemon();
    const init = await d.docker(['swarm', 'init', '--listen-addr', `127.0.0.1:${held.port}`]);
    assert.notEqual(init.code, 0);
    assert.match(init.stderr, new RegExp(`failed to listen on remote API address: listen tcp 127\\.0\\.0\\.1:${held.port}: bind: address already in use`));
    const api = await d.request('POST', '/swarm/init', { body: { ListenAddr: `127.0.0.1:${held.port}`, AdvertiseAddr: '127.0.0.1' } });
    assert.equal(api.status, 500);
    assert.match(api.json<{ message: string }>().message, /^manager stopped: failed to listen on remote API address/);
    // Refused before any manager is asked (the remote here answers nothing).
    const join = await d.request('POST', '/swarm/join', { body: { ListenAddr: `127.0.0.1:${held.port}`, AdvertiseAddr: '127.0.0.1', RemoteAddrs: ['127.0.0.1:9'], JoinToken: `SWMTKN-1-${'a'.repeat(50)}-${'b'.repeat(25)}` } });
    assert.equal(join.status, 500, join.text());
    assert.match(join.json<{ message: string }>().message, new RegExp(`listen tcp 127\\.0\\.0\\.1:${held.port}: bind: address already in use`));
    assert.equal((await d.docker(['info', '--format', '{{.Swarm.LocalNodeState}}'])).stdout.trim(), 'inactive');
  });

  it('--listen-addr host:0 takes a free port, the one join-token names; etcd.log rotates into at most 3 files', async () => {
    const d = daemon();
    const init = await d.docker(['swarm', 'init', '--listen-addr', '127.0.0.1:0']);
    assert.equal(init.code, 0, init.stderr);
    const m = /docker swarm join --token \S+ 127\.0\.0\.1:(\d+)\n/.exec(init.stdout);
    assert.ok(m, init.stdout);
    const port = Number(m[1]);
    assert.ok(port > 0 && port !== held.port);
    swarmPort = port;
    const addr = JSON.parse((await d.docker(['info', '--format', '{{json .Swarm.RemoteManagers}}'])).stdout) as { Addr: string }[];
    assert.deepEqual(addr.map((r) => r.Addr), [`127.0.0.1:${port}`]);

    const etcdDir = join(d.dataRoot, 'swarm', 'cluster', 'etcd');
    const logFile = join(etcdDir, 'etcd.log');
    // etcd writes a line for each connection to its client port that is not TLS, so the test makes
    // its log grow at will (its start-up alone writes a few KiB, and then little).
    const cmdline = readFileSync(`/proc/${Number(readFileSync(join(etcdDir, 'etcd.pid'), 'utf8'))}/cmdline`, 'utf8').split('\0');
    const clientUrl = new URL(cmdline[cmdline.indexOf('--listen-client-urls') + 1]!);
    const poke = () =>
      new Promise<void>((resolve) => {
        const s = connect({ host: clientUrl.hostname, port: Number(clientUrl.port) }, () => s.end('not tls\r\n\r\n'));
        s.on('error', () => resolve());
        s.on('close', () => resolve());
      });
    await eventually('etcd.log rotated twice', async () => {
      for (let i = 0; i < 10; i++) await poke();
      return existsSync(`${logFile}.2`);
    }, 60_000, 100);
    assert.ok(!existsSync(`${logFile}.3`), 'no more than max-file files');
    const kept = [logFile, `${logFile}.1`, `${logFile}.2`].map((f) => readFileSync(f, 'utf8')).join('');
    assert.match(kept, /TLS handshake error|rejected connection/, 'the pokes are what made it grow');
    for (const f of [`${logFile}.1`, `${logFile}.2`]) {
      assert.ok(statSync(f).size > 0, f);
      assert.match(readFileSync(f, 'utf8'), /"level":"\w+"/, `${f} holds etcd's log`);
    }
    // etcd keeps writing to the live file after the truncation (O_APPEND: no hole of zeros before it).
    const live = readFileSync(logFile);
    assert.ok(live.length === 0 || live[0] !== 0, 'the live file starts with text, not a hole');
  });

  it('the swarm port: a request that does not decode is refused, not fatal; a join naming no IP address gets no certificate', async () => {
    const d = daemon();
    assert.ok(swarmPort > 0, 'the swarm of the previous test');
    // Without a node certificate, a path that does not decode: refused, and berthd goes on.
    for (const path of ['/task-secrets/%E0%A4%A', '/task-logs/%E0%A4%A']) {
      const res = await swarmPortRequest(swarmPort, 'GET', path);
      assert.ok(res.status === 400 || res.status === 403, `${path}: ${res.status} ${res.body}`);
    }
    assert.equal((await d.docker(['info', '--format', '{{.Swarm.LocalNodeState}}'])).stdout.trim(), 'active');

    // A joining node with the worker token names an "address" that would write its own certificate
    // extensions (a CA's): refused before anything is signed.
    const token = (await d.docker(['swarm', 'join-token', '-q', 'worker'])).stdout.trim();
    const work = mkdtempSync(join(tmpdir(), 'berth-join-'));
    try {
      execFileSync('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(work, 'key.pem'), '-out', join(work, 'req.csr'), '-subj', '/CN=x'], { stdio: 'ignore' });
      const csr = readFileSync(join(work, 'req.csr'), 'utf8');
      const addr = '127.0.0.1\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,digitalSignature';
      const ask = { token, csr, addr, hostname: 'h', architecture: 'x86_64', ncpu: 1, memTotal: 1, availability: 'active', listenPort: 2377 };
      const res = await swarmPortRequest(swarmPort, 'POST', '/join', JSON.stringify(ask));
      if (res.status === 200) {
        const cert = new X509Certificate((JSON.parse(res.body) as { cert: string }).cert);
        assert.fail(`a certificate was signed (CA: ${cert.ca})`);
      }
      assert.equal(res.status, 400, res.body);
      assert.match(res.body, /malformed join request|not an IP address/);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    const nodes = (await d.docker(['node', 'ls', '-q'])).stdout.trim().split('\n');
    assert.equal(nodes.length, 1, 'no node was admitted');
  });
});

/** A request to the swarm port over TLS, without a client certificate; its status and body (or status 0: the connection failed). */
function swarmPortRequest(port: number, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = httpsRequest({ host: '127.0.0.1', port, method, path, rejectUnauthorized: false, timeout: 10_000, headers: body ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } : {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (err) => resolve({ status: 0, body: String(err) }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ status: 0, body: String(err) }));
    req.end(body);
  });
}
