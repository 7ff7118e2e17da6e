/**
 * The TLS and TCP settings of the daemon configuration: dockerd's flags and daemon.json keys,
 * `--flag=false`, tlsverify implying tls, and the refusal of open TCP sockets.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig, type DaemonConfig } from '../../src/config.js';
import { formatTcpAddress, parseTcpAddress } from '../../src/lib/tcp-address.js';

function withConfigFile(json: unknown, fn: (path: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'berth-tls-config-'));
  try {
    const path = join(dir, 'daemon.json');
    writeFileSync(path, JSON.stringify(json));
    fn(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const load = (args: string[]) => loadConfig(args) as DaemonConfig;

test('tcp addresses: default ports by TLS, all interfaces for an empty host, bracketed IPv6', () => {
  assert.deepEqual(parseTcpAddress('tcp://127.0.0.1:2376', true), { host: '127.0.0.1', port: 2376 });
  assert.deepEqual(parseTcpAddress('tcp://127.0.0.1', true), { host: '127.0.0.1', port: 2376 });
  assert.deepEqual(parseTcpAddress('tcp://127.0.0.1', false), { host: '127.0.0.1', port: 2375 });
  assert.deepEqual(parseTcpAddress('tcp://:2376', true), { host: '0.0.0.0', port: 2376 });
  assert.deepEqual(parseTcpAddress('tcp://[::1]:2376', true), { host: '::1', port: 2376 });
  assert.equal(formatTcpAddress(parseTcpAddress('tcp://[::1]', true)), 'tcp://[::1]:2376');
  for (const bad of ['tcp://127.0.0.1:0', 'tcp://127.0.0.1:99999', 'tcp://127.0.0.1:x', 'tcp://::1:2376', 'tcp://[::1', 'tcp://h:1/path', 'unix:///x']) {
    assert.throws(() => parseTcpAddress(bad, true), /invalid tcp address/, bad);
  }
});

test('an open tcp:// host is refused unless --allow-open-tcp; --tlsverify makes it acceptable', () => {
  withConfigFile({}, (file) => {
    const base = ['--config-file', file, '-H', 'tcp://127.0.0.1:2376'];
    assert.throws(() => load(base), (err: Error) => err instanceof ConfigError && /refusing to listen on tcp:\/\/127\.0\.0\.1:2376 without --tlsverify/.test(err.message));
    assert.throws(() => load([...base, '--tls']), /refusing to listen/);
    assert.equal(load([...base, '--allow-open-tcp']).allowOpenTcp, true);
    const cfg = load([...base, '--tlsverify', '--tlscacert', '/x/ca.pem', '--tlscert', '/x/cert.pem', '--tlskey', '/x/key.pem']);
    assert.deepEqual([cfg.tls, cfg.tlsVerify, cfg.tlsCaCert, cfg.tlsCert, cfg.tlsKey], [true, true, '/x/ca.pem', '/x/cert.pem', '/x/key.pem']);
    // A unix socket alone needs nothing.
    assert.equal(load(['--config-file', file]).tlsVerify, false);
  });
});

test('daemon.json takes dockerd\'s keys; --flag=false overrides the file', () => {
  withConfigFile({ hosts: ['tcp://127.0.0.1:2376'], tlsverify: true, tlscacert: '/f/ca.pem', tlscert: '/f/cert.pem', tlskey: '/f/key.pem' }, (file) => {
    const cfg = load(['--config-file', file]);
    assert.deepEqual([cfg.tls, cfg.tlsVerify, cfg.tlsCaCert, cfg.tlsCert, cfg.tlsKey], [true, true, '/f/ca.pem', '/f/cert.pem', '/f/key.pem']);
    assert.throws(() => load(['--config-file', file, '--tlsverify=false']), /refusing to listen/);
    assert.equal(load(['--config-file', file, '--tlsverify=false', '--allow-open-tcp=true']).tlsVerify, false);
    assert.throws(() => load(['--config-file', file, '--tlsverify=maybe']), /invalid boolean value "maybe" for --tlsverify/);
  });
  withConfigFile({ tlsverify: 'yes' }, (file) => assert.throws(() => load(['--config-file', file]), /tlsverify must be true or false/));
  withConfigFile({ 'allow-open-tcp': true, hosts: ['tcp://127.0.0.1'] }, (file) => assert.equal(load(['--config-file', file]).allowOpenTcp, true));
});
