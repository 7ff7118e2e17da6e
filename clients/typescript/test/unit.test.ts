/** Tests of the parts that need no daemon: host parsing, env, stream readers, credentials. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import {
  connectionFromEnv,
  demultiplex,
  encodeRegistryAuth,
  MultiplexError,
  negotiatedVersion,
  parseDockerHost,
  parseReference,
  readJsonLines,
  registryHost,
  resolveCredentials,
  storeCredentials,
  type OutputChunk,
} from '@berth-engine/client';
import { tempDir } from './test-env.js';

test('DOCKER_HOST forms', () => {
  assert.deepEqual(parseDockerHost('unix:///run/berth/berth.sock'), { kind: 'unix', socketPath: '/run/berth/berth.sock' });
  assert.deepEqual(parseDockerHost('/tmp/x.sock'), { kind: 'unix', socketPath: '/tmp/x.sock' });
  assert.deepEqual(parseDockerHost('tcp://127.0.0.1:2375'), { kind: 'tcp', host: '127.0.0.1', port: 2375 });
  assert.deepEqual(parseDockerHost('tcp://example.test', true), { kind: 'tcp', host: 'example.test', port: 2376 });
  assert.deepEqual(parseDockerHost('tcp://[::1]:4000'), { kind: 'tcp', host: '::1', port: 4000 });
  assert.throws(() => parseDockerHost('ssh://host'), /unsupported protocol/);
  assert.throws(() => parseDockerHost('unix://relative'), /absolute/);
});

test('environment: default socket, pinned version, TLS from DOCKER_CERT_PATH', () => {
  const plain = connectionFromEnv({ HOME: tempDir() });
  assert.equal(plain.host, 'unix:///run/berth/berth.sock');
  assert.equal(plain.tls, undefined);
  assert.equal(plain.apiVersion, undefined);

  const certs = tempDir();
  writeFileSync(join(certs, 'ca.pem'), 'CA');
  writeFileSync(join(certs, 'cert.pem'), 'CERT');
  writeFileSync(join(certs, 'key.pem'), 'KEY');
  const tls = connectionFromEnv({ DOCKER_HOST: 'tcp://h:2376', DOCKER_CERT_PATH: certs, DOCKER_TLS_VERIFY: '1', DOCKER_API_VERSION: '1.41' });
  assert.equal(tls.host, 'tcp://h:2376');
  assert.equal(tls.apiVersion, '1.41');
  assert.equal(tls.tls?.verify, true);
  assert.equal(tls.tls?.cert?.toString(), 'CERT');
  assert.equal(connectionFromEnv({ DOCKER_CERT_PATH: certs }).tls?.verify, false);

  const half = tempDir();
  writeFileSync(join(half, 'cert.pem'), 'CERT');
  assert.throws(() => connectionFromEnv({ DOCKER_CERT_PATH: half }), /both cert.pem and key.pem/);
});

test('version negotiation picks the lower version; no header means 1.24', () => {
  assert.equal(negotiatedVersion('1.44', '1.55'), '1.44');
  assert.equal(negotiatedVersion('1.56', '1.55'), '1.55');
  assert.equal(negotiatedVersion('1.9', '1.10'), '1.9');
  assert.equal(negotiatedVersion(undefined), '1.24');
});

function frame(type: number, payload: string): Buffer {
  const h = Buffer.alloc(8);
  h[0] = type;
  h.writeUInt32BE(Buffer.byteLength(payload), 4);
  return Buffer.concat([h, Buffer.from(payload)]);
}

async function collect(chunks: Buffer[]): Promise<OutputChunk[]> {
  const body = new PassThrough();
  const out: OutputChunk[] = [];
  const done = (async () => {
    for await (const c of demultiplex(body)) out.push(c);
  })();
  for (const c of chunks) body.write(c);
  body.end();
  await done;
  return out;
}

test('demultiplex: frames split at every byte boundary keep their streams', async () => {
  const bytes = Buffer.concat([frame(1, 'out one\n'), frame(2, 'err\n'), frame(0, 'stdin-as-out'), frame(1, '')]);
  for (let step = 1; step <= bytes.length; step++) {
    const pieces: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += step) pieces.push(bytes.subarray(i, i + step));
    const out = await collect(pieces);
    const join = (s: string) => Buffer.concat(out.filter((c) => c.stream === s).map((c) => c.data)).toString();
    assert.equal(join('stdout'), 'out one\nstdin-as-out', `step ${step}`);
    assert.equal(join('stderr'), 'err\n', `step ${step}`);
  }
});

test('demultiplex: a type-3 frame is the daemon reporting an error', async () => {
  await assert.rejects(collect([frame(1, 'a'), frame(3, 'log file gone')]), (e: Error) => e instanceof MultiplexError && e.message === 'error from daemon in stream: log file gone');
  await assert.rejects(collect([frame(7, 'x')]), /unrecognized stream: 7/);
});

test('demultiplex: yields data before a large frame is complete', async () => {
  const body = new PassThrough();
  const it = demultiplex(body)[Symbol.asyncIterator]();
  const big = frame(1, 'x'.repeat(100_000));
  body.write(big.subarray(0, 1000));
  const first = await it.next();
  assert.equal(first.done, false);
  assert.equal((first.value as OutputChunk).data.length, 992);
  body.end(big.subarray(1000));
  let rest = 0;
  for (let r = await it.next(); !r.done; r = await it.next()) rest += r.value.data.length;
  assert.equal(rest, 100_000 - 992);
});

test('readJsonLines: records across chunk boundaries, CRLF, blank lines', async () => {
  const body = new PassThrough();
  const got: unknown[] = [];
  const done = (async () => {
    for await (const r of readJsonLines(body)) got.push(r);
  })();
  body.write('{"status":"a"}\r\n{"sta');
  body.write('tus":"b"}\n\n');
  body.end('{"status":"c"}');
  await done;
  assert.deepEqual(got, [{ status: 'a' }, { status: 'b' }, { status: 'c' }]);
});

test('references: tag, digest, registry host', () => {
  assert.deepEqual(parseReference('busybox'), { repository: 'busybox' });
  assert.deepEqual(parseReference('127.0.0.1:5000/a/b:1.0'), { repository: '127.0.0.1:5000/a/b', tag: '1.0' });
  assert.deepEqual(parseReference('x@sha256:ab'), { repository: 'x', digest: 'sha256:ab' });
  assert.equal(registryHost('busybox'), 'docker.io');
  assert.equal(registryHost('library/busybox'), 'docker.io');
  assert.equal(registryHost('localhost/x'), 'localhost');
  assert.equal(registryHost('127.0.0.1:5000/x'), '127.0.0.1:5000');
  assert.equal(registryHost('index.docker.io/library/x'), 'docker.io');
});

test('X-Registry-Auth is base64url JSON without empty fields', () => {
  const enc = encodeRegistryAuth({ username: 'u', password: '>>>???', serveraddress: 'r:5000', email: '' });
  assert.doesNotMatch(enc, /[+/]/);
  const json = JSON.parse(Buffer.from(enc, 'base64url').toString());
  assert.deepEqual(json, { username: 'u', password: '>>>???', serveraddress: 'r:5000' });
});

/** A real credential helper program, speaking the protocol from a JSON file of its own. */
function installHelper(dir: string, name: string, store: Record<string, { Username: string; Secret: string }>): string {
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  const db = join(dir, `${name}.json`);
  writeFileSync(db, JSON.stringify(store));
  const script = join(bin, `docker-credential-${name}`);
  writeFileSync(
    script,
    `#!${process.execPath}
const fs = require('node:fs');
const db = ${JSON.stringify(db)};
let input = '';
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const store = JSON.parse(fs.readFileSync(db, 'utf8'));
  if (process.argv[2] === 'get') {
    const c = store[input.trim()];
    if (!c) { process.stdout.write('credentials not found in native keychain'); process.exit(1); }
    process.stdout.write(JSON.stringify({ ServerURL: input.trim(), ...c }));
  } else if (process.argv[2] === 'store') {
    const c = JSON.parse(input);
    store[c.ServerURL] = { Username: c.Username, Secret: c.Secret };
    fs.writeFileSync(db, JSON.stringify(store));
  } else process.exit(2);
});
`,
  );
  chmodSync(script, 0o755);
  return bin;
}

test('credentials: auths entries, credHelpers over credsStore, identity tokens, not found', async () => {
  const dir = tempDir();
  const bin = installHelper(dir, 'berthtest', {
    'helped.example:5000': { Username: 'helper-user', Secret: 'helper-pass' },
    'https://index.docker.io/v1/': { Username: '<token>', Secret: 'refresh-token' },
  });
  const savedPath = process.env.PATH;
  process.env.PATH = `${bin}:${savedPath}`;
  try {
    const config = join(dir, 'cfg');
    mkdirSync(config);
    writeFileSync(
      join(config, 'config.json'),
      JSON.stringify({
        auths: {
          'plain.example:5000': { auth: Buffer.from('alice:s3cret:with:colons').toString('base64') },
          'https://schemed.example/v1/': { auth: Buffer.from('bob:pw').toString('base64') },
          'helped.example:5000': {},
        },
        credHelpers: { 'helped.example:5000': 'berthtest', 'docker.io': 'berthtest' },
      }),
    );
    assert.deepEqual(await resolveCredentials(config, 'plain.example:5000'), { serveraddress: 'plain.example:5000', username: 'alice', password: 's3cret:with:colons' });
    assert.equal((await resolveCredentials(config, 'schemed.example'))?.username, 'bob');
    assert.deepEqual(await resolveCredentials(config, 'helped.example:5000'), { username: 'helper-user', password: 'helper-pass', serveraddress: 'helped.example:5000' });
    assert.deepEqual(await resolveCredentials(config, 'docker.io'), { identitytoken: 'refresh-token', serveraddress: 'https://index.docker.io/v1/' });
    assert.equal(await resolveCredentials(config, 'unknown.example'), undefined);

    // credsStore covers registries without their own helper; a miss falls back to auths.
    writeFileSync(join(config, 'config.json'), JSON.stringify({ credsStore: 'berthtest', auths: { 'plain.example:5000': { auth: Buffer.from('alice:pw').toString('base64') } } }));
    assert.equal((await resolveCredentials(config, 'helped.example:5000'))?.username, 'helper-user');
    assert.equal((await resolveCredentials(config, 'plain.example:5000'))?.username, 'alice');

    // Storing goes to the helper, and config.json only records the registry.
    await storeCredentials(config, 'new.example', { username: 'carol', password: 'pw2' });
    const cfg = JSON.parse(readFileSync(join(config, 'config.json'), 'utf8'));
    assert.deepEqual(cfg.auths['new.example'], {});
    assert.equal(cfg.credsStore, 'berthtest');
    assert.deepEqual(await resolveCredentials(config, 'new.example'), { username: 'carol', password: 'pw2', serveraddress: 'new.example' });
  } finally {
    process.env.PATH = savedPath;
  }
});

test('credentials: storing without a helper writes an auths entry, keeping other keys', async () => {
  const config = join(tempDir(), 'fresh');
  await storeCredentials(config, 'docker.io', { username: 'dave', password: 'pw' });
  const cfg = JSON.parse(readFileSync(join(config, 'config.json'), 'utf8'));
  assert.deepEqual(cfg.auths, { 'https://index.docker.io/v1/': { auth: Buffer.from('dave:pw').toString('base64') } });
  writeFileSync(join(config, 'config.json'), JSON.stringify({ ...cfg, detachKeys: 'ctrl-x' }));
  await storeCredentials(config, 'r.example', { username: 'e', password: 'f' });
  const again = JSON.parse(readFileSync(join(config, 'config.json'), 'utf8'));
  assert.equal(again.detachKeys, 'ctrl-x');
  assert.equal(Object.keys(again.auths).length, 2);
});

test('the package loads from CommonJS too', async () => {
  const { createRequire } = await import('node:module');
  const cjs = createRequire(import.meta.url)('@berth-engine/client') as typeof import('@berth-engine/client');
  assert.equal(typeof cjs.BerthClient, 'function');
  assert.equal(typeof cjs.BerthClient.fromEnv, 'function');
  assert.ok(new cjs.NotFoundError('x', 404) instanceof cjs.BerthApiError);
  assert.equal(cjs.parseDockerHost('unix:///a').kind, 'unix');
});
