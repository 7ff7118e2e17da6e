/**
 * `docker run` through the real CLI: foreground output and exit codes, --rm, stdin piping (binary,
 * 100 MB), stdin EOF without losing output, `docker start -a`, and what berthd holds meanwhile.
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { makeTempDir, removeDir, useDaemon, useSeededRegistry } from '../harness/index.js';
import { dockerPipe } from './support.js';

describe('docker run, start -a and attach through the CLI', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';

  before(async () => {
    image = reg().seeded.refs.busybox;
    const r = await daemon().docker(['pull', image]);
    assert.equal(r.code, 0, r.stderr);
  });

  describe('docker run (foreground, no tty)', () => {
    it('prints the output and exits 0', async () => {
      const r = await daemon().docker(['run', image, 'echo', 'hi']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, 'hi\n');
    });

    it('keeps stdout and stderr apart', async () => {
      const r = await daemon().docker(['run', '--rm', image, 'sh', '-c', 'echo to-out; echo to-err >&2']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, 'to-out\n');
      assert.equal(r.stderr, 'to-err\n');
    });

    it('--rm: exits with the container exit code and removes the container', async () => {
      const name = `rm-${randomBytes(4).toString('hex')}`;
      const r = await daemon().docker(['run', '--rm', '--name', name, image, 'sh', '-c', 'echo bye; exit 3']);
      assert.equal(r.code, 3, r.stderr);
      assert.equal(r.stdout, 'bye\n');
      const ps = await daemon().docker(['ps', '-a', '--filter', `name=${name}`, '--format', '{{.Names}}']);
      assert.equal(ps.stdout.trim(), '');
    });

    it('output written right at start is not lost (attach happens before start)', async () => {
      for (let i = 0; i < 5; i++) {
        const r = await daemon().docker(['run', '--rm', image, 'sh', '-c', 'echo first; echo second >&2']);
        assert.equal(r.stdout, 'first\n');
        assert.equal(r.stderr, 'second\n');
      }
    });

    it('a failing command reports the runtime error', async () => {
      const r = await daemon().docker(['run', image, '/no/such/binary']);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /no such file|not found/i);
    });

    it('--rm with a command that cannot start: the CLI returns and the container is gone', async () => {
      const name = `rmfail-${randomBytes(4).toString('hex')}`;
      const r = await daemon().docker(['run', '--rm', '--name', name, image, '/no/such/binary'], { timeoutMs: 30_000 });
      assert.notEqual(r.code, 0);
      assert.doesNotMatch(r.stderr, /killed after/);
      const ps = await daemon().docker(['ps', '-a', '--filter', `name=${name}`, '--format', '{{.Names}}']);
      assert.equal(ps.stdout.trim(), '');
    });
  });

  describe('docker run -i (stdin)', () => {
    it('echoes piped input and ends at EOF', async () => {
      const r = await daemon().docker(['run', '-i', '--rm', image, 'cat'], { input: 'line one\nline two\n' });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, 'line one\nline two\n');
    });

    it('output after stdin EOF still arrives (half-close)', async () => {
      const r = await daemon().docker(['run', '-i', '--rm', image, 'sh', '-c', 'cat; sleep 0.5; echo after-eof; exit 6'], { input: 'x\n' });
      assert.equal(r.code, 6, r.stderr);
      assert.equal(r.stdout, 'x\nafter-eof\n');
    });

    it('empty stdin gives EOF at once', async () => {
      const r = await daemon().docker(['run', '-i', '--rm', image, 'wc', '-c'], { input: '' });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.trim(), '0');
    });

    it('100 MB of random bytes through cat come back exactly', async () => {
      const dir = await makeTempDir('berth-pipe-');
      try {
        const file = join(dir, 'in.bin');
        const hash = createHash('sha256');
        const out = createWriteStream(file);
        for (let i = 0; i < 100; i++) {
          const chunk = randomBytes(1024 * 1024);
          hash.update(chunk);
          if (!out.write(chunk)) await once(out, 'drain');
        }
        out.end();
        await once(out, 'finish');
        const rssBefore = await berthdRssKb(daemon().pid);
        const r = await dockerPipe(daemon(), ['run', '-i', '--rm', image, 'cat'], file);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.bytes, 100 * 1024 * 1024);
        assert.equal(r.sha256, hash.digest('hex'));
        // Streams stay streams: the daemon must not have held the payload.
        const rssAfter = await berthdRssKb(daemon().pid);
        assert.ok(rssAfter - rssBefore < 80 * 1024, `berthd RSS grew by ${rssAfter - rssBefore} kB`);
      } finally {
        await removeDir(dir);
      }
    });
  });

  describe('docker start -a / docker attach', () => {
    it('start -a attaches before the process starts', async () => {
      const name = `sa-${randomBytes(4).toString('hex')}`;
      const c = await daemon().docker(['create', '--name', name, image, 'sh', '-c', 'echo started; exit 2']);
      assert.equal(c.code, 0, c.stderr);
      const r = await daemon().docker(['start', '-a', name]);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stdout, 'started\n');
      // A second run of the same container attaches again.
      const again = await daemon().docker(['start', '-a', name]);
      assert.equal(again.stdout, 'started\n');
      await daemon().docker(['rm', '-f', name]);
    });

    it('docker attach follows a running container to its exit', async () => {
      const name = `at-${randomBytes(4).toString('hex')}`;
      const c = await daemon().docker(['run', '-d', '--name', name, image, 'sh', '-c', 'sleep 1; echo late; exit 9']);
      assert.equal(c.code, 0, c.stderr);
      const r = await daemon().docker(['attach', name]);
      assert.equal(r.stdout, 'late\n');
      assert.equal(r.code, 9, r.stderr);
      await daemon().docker(['rm', '-f', name]);
    });
  });
});

async function berthdRssKb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}
