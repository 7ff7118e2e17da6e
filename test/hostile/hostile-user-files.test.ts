/**
 * Files an image or a container controls and berthd reads or creates at start (/etc/passwd,
 * /etc/group, WORKDIR): a FIFO, a huge file, links to a device or to a host path, a directory.
 * Each start fails with a clear error for that container (or stays inside its root), nothing
 * blocks, and 20 ordinary containers started meanwhile run normally.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  assembleManifest, BUSYBOX_CONFIG, busyboxLayer, buildLayer, FIXTURE_CREATED, pushImage, useDaemon, useSeededRegistry,
  type LayerEntry,
} from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';

const USER_DB_CAP = 16 * 1024 * 1024;

interface Case {
  tag: string;
  layer: LayerEntry[];
  config?: Record<string, unknown>;
  /** What the start's error says. */
  error: RegExp;
}

describe('hostile user files and WORKDIR', () => {
  const d = useDaemon();
  const reg = useSeededRegistry('open');
  let outside = '';
  let busybox = '';
  const refs = new Map<string, string>();
  let cases: Case[] = [];

  before(async () => {
    const { registry, seeded } = reg();
    busybox = seeded.refs.busybox;
    // A host file holding a passwd entry for `berth` with uid 4242: were the link followed out of the
    // root, the container would run as 4242 instead of failing.
    outside = mkdtempSync(join(tmpdir(), 'berth-safefs-outside-'));
    writeFileSync(join(outside, 'passwd'), 'berth:x:4242:4242::/:/bin/sh\n');
    const user = { User: 'berth' };
    cases = [
      { tag: 'fifo-passwd', layer: [{ type: 'fifo', path: 'etc/passwd' }], config: user, error: /unable to find user berth: \/etc\/passwd: not a regular file/ },
      { tag: 'fifo-group', layer: [{ type: 'fifo', path: 'etc/group' }], error: /unable to find user root: \/etc\/group: not a regular file/ },
      { tag: 'huge-group', layer: [{ type: 'file', path: 'etc/group', content: Buffer.alloc(USER_DB_CAP + 1, 'x') }], config: { User: 'berth:berth' }, error: /\/etc\/group: larger than/ },
      { tag: 'devzero-passwd', layer: [{ type: 'symlink', path: 'etc/passwd', target: '/dev/zero' }], config: user, error: /unable to find user berth: no matching entries in passwd file/ },
      { tag: 'outside-passwd', layer: [{ type: 'symlink', path: 'etc/passwd', target: join(outside, 'passwd') }], config: user, error: /unable to find user berth: no matching entries in passwd file/ },
      { tag: 'relative-outside-passwd', layer: [{ type: 'symlink', path: 'etc/passwd', target: `../../../../../../../../..${join(outside, 'passwd')}` }], config: user, error: /unable to find user berth: no matching entries in passwd file/ },
      { tag: 'dir-passwd', layer: [{ type: 'dir', path: 'etc/passwd' }], config: user, error: /unable to find user berth: \/etc\/passwd: is a directory/ },
      { tag: 'file-workdir', layer: [{ type: 'file', path: 'srv', content: 'not a dir\n' }], config: { WorkingDir: '/srv/app' }, error: /Cannot mkdir: \/srv\/app is not a directory/ },
      { tag: 'fifo-workdir', layer: [{ type: 'fifo', path: 'srv' }], config: { WorkingDir: '/srv' }, error: /Cannot mkdir: \/srv is not a directory/ },
    ];
    const base = await busyboxLayer('gzip');
    const etcFiles: LayerEntry[] = [
      { type: 'fifo', path: 'etc/hosts' },
      { type: 'symlink', path: 'etc/resolv.conf', target: join(outside, 'passwd') },
      { type: 'symlink', path: 'etc/hostname', target: '/dev/zero' },
    ];
    for (const c of [...cases, { tag: 'link-workdir', layer: [{ type: 'symlink', path: 'srv', target: outside } as LayerEntry], config: { WorkingDir: '/srv/app' } }, { tag: 'etc-files', layer: etcFiles }]) {
      const top = await buildLayer(c.layer);
      const image = assembleManifest({
        format: 'docker',
        layers: [base, top],
        config: { ...BUSYBOX_CONFIG, ...c.config },
        history: [{ created: FIXTURE_CREATED, created_by: 'busybox' }, { created: FIXTURE_CREATED, created_by: c.tag }],
      });
      await pushImage(registry, 'hostile-files', c.tag, image);
      refs.set(c.tag, `${registry.host}/hostile-files:${c.tag}`);
    }
    const pulls = await Promise.all([busybox, ...refs.values()].map((r) => d().docker(['pull', '-q', r])));
    for (const p of pulls) assert.equal(p.code, 0, p.stderr);
  });

  after(() => rmSync(outside, { recursive: true, force: true }));

  async function create(dm: TestDaemon, image: string, cmd: string[], extra: Record<string, unknown> = {}): Promise<string> {
    const c = await dm.request('POST', '/containers/create', { body: { Image: image, Cmd: cmd, ...extra } });
    assert.equal(c.status, 201, c.text());
    return c.json().Id as string;
  }

  /** 20 ordinary `run --rm`-like containers, all started together: each must exit 0. */
  async function twentyOrdinary(dm: TestDaemon): Promise<void> {
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const id = await create(dm, busybox, ['sh', '-c', `echo ok-${i}`]);
        const s = await dm.request('POST', `/containers/${id}/start`);
        const w = await dm.request('POST', `/containers/${id}/wait`);
        const logs = (await dm.docker(['logs', id])).stdout;
        await dm.request('DELETE', `/containers/${id}?force=1`);
        return { start: s.status, exit: w.json().StatusCode, logs, i };
      }),
    );
    for (const r of results) assert.deepEqual(r, { start: 204, exit: 0, logs: `ok-${r.i}\n`, i: r.i });
  }

  it('each hostile image fails to start with a clear error, and 20 ordinary containers start meanwhile', async () => {
    const dm = d();
    const hostile = Promise.all(
      // Two starts per case: more than libuv's four pool threads in total, were any of them to block.
      cases.flatMap((c) => [0, 1].map(async () => {
        const id = await create(dm, refs.get(c.tag)!, ['true']);
        const s = await dm.request('POST', `/containers/${id}/start`);
        const inspect = (await dm.request('GET', `/containers/${id}/json`)).json();
        await dm.request('DELETE', `/containers/${id}?force=1`);
        return { tag: c.tag, status: s.status, message: String(s.json().message ?? ''), running: inspect.State.Running, expected: c.error };
      })),
    );
    await twentyOrdinary(dm);
    for (const r of await hostile) {
      assert.equal(r.status, 400, `${r.tag}: ${r.message}`);
      assert.match(r.message, r.expected, r.tag);
      assert.equal(r.running, false, r.tag);
    }
  });

  it('a WORKDIR through a link to a host path is created inside the root', async () => {
    const dm = d();
    const run = await dm.docker(['run', '--rm', refs.get('link-workdir')!, 'sh', '-c', `pwd; ls -ld ${outside}/app | cut -c1-10`]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, `${outside}/app\ndrwxr-xr-x\n`);
    assert.deepEqual(readdirSync(outside), ['passwd'], 'nothing created on the host');
  });

  it('/etc/hosts, /etc/hostname and /etc/resolv.conf as a FIFO or links out of the root: the container gets its own files', async () => {
    const dm = d();
    const run = await dm.docker(['run', '--name', 'etc-files', '--hostname', 'etcbox', refs.get('etc-files')!, 'sh', '-c', 'cat /etc/hostname; grep -c localhost /etc/hosts; grep -c nameserver /etc/resolv.conf'], { timeoutMs: 60_000 });
    assert.equal(run.code, 0, run.stderr);
    const [hostname, hosts, resolv] = run.stdout.trim().split('\n');
    assert.equal(hostname, 'etcbox');
    assert.ok(Number(hosts) >= 1, run.stdout);
    assert.ok(Number(resolv) >= 1, run.stdout);
    assert.equal(readFileSync(join(outside, 'passwd'), 'utf8'), 'berth:x:4242:4242::/:/bin/sh\n', 'the host file is untouched');
    await dm.docker(['rm', '-f', 'etc-files']);
  });

  it('a container that replaces its /etc/passwd with a FIFO gets a clear error on its next start, over and over, and others still start', async () => {
    const dm = d();
    const made = await dm.docker(['run', '--name', 'fifo-maker', busybox, 'sh', '-c', 'rm /etc/passwd && mkfifo /etc/passwd']);
    assert.equal(made.code, 0, made.stderr);
    const starts = await Promise.all(Array.from({ length: 6 }, () => dm.docker(['start', 'fifo-maker'], { timeoutMs: 60_000 })));
    for (const s of starts) {
      assert.notEqual(s.code, 0);
      assert.match(s.stderr, /unable to find user root: \/etc\/passwd: not a regular file/);
    }
    await twentyOrdinary(dm);
    // exec with a user reads the same file: a clear error too, while the container runs.
    const live = await dm.docker(['run', '-d', '--name', 'fifo-live', busybox, 'sh', '-c', 'rm /etc/passwd && mkfifo /etc/passwd && sleep 60']);
    assert.equal(live.code, 0, live.stderr);
    let exec = { code: 0, stdout: '', stderr: '' };
    for (let i = 0; i < 50; i++) {
      exec = await dm.docker(['exec', '-u', 'berth', 'fifo-live', 'true'], { timeoutMs: 60_000 });
      if (exec.code !== 0 && /not a regular file/.test(exec.stderr)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.match(exec.stderr, /unable to find user berth: \/etc\/passwd: not a regular file/);
    await dm.docker(['rm', '-f', 'fifo-maker', 'fifo-live']);
    assert.equal(existsSync(join(outside, 'app')), false);
  });
});
