/**
 * Hijacked streams over a mutual-TLS tcp:// host with the real CLI: stdin in, stdin EOF
 * (close_notify/half-close) without losing the output after it, and exec exit codes.
 */
import { before, after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, makeTempDir, removeDir, run, startDaemon, startRegistry, seedRegistry, type TestDaemon, type TestRegistry } from '../harness/index.js';
import { createCa } from '../tls/pki.js';

describe('attach and exec over TLS', () => {
  const dir = makeTempDir('berth-tls-attach-');
  let daemon: TestDaemon | undefined;
  let registry: TestRegistry | undefined;
  let image = '';
  let env: NodeJS.ProcessEnv = {};

  before(async () => {
    const ca = createCa(dir, 'ca');
    const server = ca.issue('server', { cn: 'berthd', ip: ['127.0.0.1'], usage: 'server' });
    const client = ca.issue('client', { cn: 'client', usage: 'client' });
    const certPath = join(dir, 'client-certs');
    mkdirSync(certPath);
    copyFileSync(ca.cert, join(certPath, 'ca.pem'));
    copyFileSync(client.cert, join(certPath, 'cert.pem'));
    copyFileSync(client.key, join(certPath, 'key.pem'));
    const port = await freePort();
    daemon = await startDaemon({ args: ['-H', `tcp://127.0.0.1:${port}`, '--tlsverify', '--tlscacert', ca.cert, '--tlscert', server.cert, '--tlskey', server.key] });
    registry = await startRegistry('open');
    image = (await seedRegistry(registry)).refs.busybox;
    const pull = await daemon.docker(['pull', '-q', image]);
    assert.equal(pull.code, 0, pull.stderr);
    env = { ...process.env, DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certPath, DOCKER_CONFIG: join(dir, 'cfg') };
    delete env.DOCKER_CONTEXT;
  });

  after(async () => {
    await daemon?.teardown();
    await registry?.stop();
    await removeDir(dir);
  });

  const docker = (args: string[], input?: string) => run('docker', args, { env, input, timeoutMs: 60_000 });

  it('docker run -i: input echoed, output after stdin EOF arrives', async () => {
    const r = await docker(['run', '-i', '--rm', image, 'sh', '-c', 'cat; sleep 0.3; echo after; exit 3'], 'over tls\n');
    assert.equal(r.code, 3, r.stderr);
    assert.equal(r.stdout, 'over tls\nafter\n');
  });

  it('docker exec: output and exit code', async () => {
    const c = await docker(['run', '-d', image, 'sleep', '300']);
    assert.equal(c.code, 0, c.stderr);
    const id = c.stdout.trim();
    const r = await docker(['exec', '-i', id, 'sh', '-c', 'cat; exit 4'], 'exec over tls\n');
    assert.equal(r.code, 4, r.stderr);
    assert.equal(r.stdout, 'exec over tls\n');
    await docker(['rm', '-f', id]);
  });
});
