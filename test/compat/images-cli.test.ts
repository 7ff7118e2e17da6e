/**
 * The image side of berthd through the real docker CLI: version negotiation, info, pull (tags,
 * digests, platforms, a hub mirror, failures), images with filters and formats, image inspect,
 * history, tag, rmi, image prune, and login against Basic and token registries.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  otherPlatform,
  seedHubMirror,
  startCorruptingProxy,
  startRegistry,
  useDaemon,
  useSeededRegistry,
  type CorruptingProxy,
  type DaemonOptions,
  type TestRegistry,
} from '../harness/index.js';

const API = '1.55';

function lines(s: string): string[] {
  return s.split('\n').map((l) => l.trimEnd()).filter(Boolean);
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('docker CLI: images', () => {
  let mirror: TestRegistry;
  let hubDigest = '';
  let proxy: CorruptingProxy;
  const opts: DaemonOptions = { args: [] };
  before(async () => {
    mirror = await startRegistry('open');
    hubDigest = (await seedHubMirror(mirror)).busybox;
    opts.args!.push('--registry-mirror', mirror.url);
  });
  after(async () => {
    await proxy?.stop();
    await mirror?.stop();
  });
  const d = useDaemon(opts);
  const open = useSeededRegistry('open');
  const basic = useSeededRegistry('basic');
  const token = useSeededRegistry('token');
  before(async () => {
    proxy = await startCorruptingProxy(open().registry, { blobs: true });
  });

  const docker = (args: string[], o?: { input?: string; env?: Record<string, string> }) => d().docker(args, o);
  const ok = async (args: string[], o?: { input?: string; env?: Record<string, string> }) => {
    const r = await docker(args, o);
    assert.equal(r.code, 0, `docker ${args.join(' ')}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    return r;
  };

  describe('version and info', () => {
    it('docker version negotiates with the daemon', async () => {
      const r = await ok(['version', '--format', '{{.Server.APIVersion}} {{.Server.MinAPIVersion}} {{.Client.APIVersion}} {{.Server.Os}}']);
      const [server, min, client, os] = r.stdout.trim().split(' ');
      assert.equal(server, API);
      assert.equal(min, '1.24');
      assert.equal(os, 'linux');
      const [maj, minor] = client!.split('.').map(Number);
      assert.ok(maj === 1 && minor! >= 24 && minor! <= 55, `client API ${client}`);
    });

    it('DOCKER_API_VERSION pinned inside the window works, below it fails with dockerd\'s message', async () => {
      const r = await ok(['version', '--format', '{{.Client.APIVersion}}'], { env: { DOCKER_API_VERSION: '1.24' } });
      assert.equal(r.stdout.trim(), '1.24');
      await ok(['images'], { env: { DOCKER_API_VERSION: '1.41' } });
      const old = await docker(['version'], { env: { DOCKER_API_VERSION: '1.23' } });
      assert.notEqual(old.code, 0);
      assert.match(old.stderr, /client version 1\.23 is too old/);
    });

    it('docker info', async () => {
      const r = await ok(['info', '--format', '{{.OSType}}|{{.Driver}}|{{.DockerRootDir}}|{{json .RegistryConfig.Mirrors}}']);
      const [os, driver, root, mirrors] = r.stdout.trim().split('|');
      assert.equal(os, 'linux');
      assert.ok(driver);
      assert.equal(root, d().dataRoot);
      assert.ok(JSON.parse(mirrors!).some((m: string) => m.replace(/\/$/, '') === mirror.url));
      const plain = await ok(['info']);
      assert.match(plain.stdout, /Server Version:/);
    });
  });

  describe('pull', () => {
    it('docker pull prints dockerd\'s progress and the full name', async () => {
      const { registry, seeded } = open();
      const r = await ok(['pull', `${registry.host}/layered`]);
      const out = lines(r.stdout);
      assert.equal(out[0], 'Using default tag: latest');
      assert.equal(out[1], 'latest: Pulling from layered');
      for (const l of seeded.images.layered.layers) assert.ok(out.includes(`${l.digest.slice(7, 19)}: Pull complete`), r.stdout);
      assert.ok(out.includes(`Digest: ${seeded.digests.layered}`), r.stdout);
      assert.ok(out.includes(`Status: Downloaded newer image for ${registry.host}/layered:latest`), r.stdout);
      assert.equal(out[out.length - 1], `${registry.host}/layered:latest`);
    });

    it('pulling again says it is up to date', async () => {
      const r = await ok(['pull', `${open().registry.host}/layered:latest`]);
      assert.match(r.stdout, new RegExp(`Status: Image is up to date for ${escapeRe(open().registry.host)}/layered:latest`));
    });

    it('docker pull -q prints only the name', async () => {
      const r = await ok(['pull', '-q', `${open().registry.host}/busybox:1.35`]);
      assert.equal(r.stdout.trim(), `${open().registry.host}/busybox:1.35`);
    });

    it('docker pull by digest', async () => {
      const { registry, seeded } = open();
      const r = await ok(['pull', `${registry.host}/zstd@${seeded.digests.zstd}`]);
      assert.match(r.stdout, new RegExp(`${escapeRe(seeded.digests.zstd)}: Pulling from zstd`));
    });

    it('docker pull --platform picks that entry of an index', async () => {
      const p = otherPlatform();
      const platform = [p.os, p.architecture, p.variant].filter(Boolean).join('/');
      await ok(['pull', '--platform', platform, `${open().registry.host}/multiarch`]);
      const r = await ok(['image', 'inspect', '--format', '{{.Architecture}}', `${open().registry.host}/multiarch`]);
      assert.equal(r.stdout.trim(), p.architecture);
    });

    it('docker pull busybox goes through the hub mirror', async () => {
      const r = await ok(['pull', 'busybox']);
      assert.match(r.stdout, /latest: Pulling from library\/busybox/);
      assert.match(r.stdout, new RegExp(`Digest: ${hubDigest}`));
      assert.equal(lines(r.stdout).pop(), 'docker.io/library/busybox:latest');
      const img = await ok(['images', '--format', '{{.Repository}}:{{.Tag}}', 'busybox']);
      assert.deepEqual(lines(img.stdout), ['busybox:latest']);
    });

    it('a missing tag fails with dockerd\'s message', async () => {
      const r = await docker(['pull', `${open().registry.host}/busybox:no-such-tag`]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, new RegExp(`manifest for ${escapeRe(open().registry.host)}/busybox:no-such-tag not found`));
    });

    it('corrupted blobs fail the pull with a verification error and no image', async () => {
      const r = await docker(['pull', `${proxy.host}/layered:latest`]);
      assert.equal(r.code, 1, r.stdout);
      assert.match(r.stderr, /verification failed/);
      assert.ok(proxy.corrupted > 0);
      const list = await ok(['images', '-q', `${proxy.host}/layered`]);
      assert.equal(list.stdout.trim(), '');
    });
  });

  describe('images, inspect, history', () => {
    it('docker images lists repositories, tags and short ids', async () => {
      const { registry, seeded } = open();
      await ok(['pull', `${registry.host}/busybox:latest`]);
      const r = await ok(['images', '--format', '{{.Repository}}|{{.Tag}}|{{.ID}}', `${registry.host}/busybox`]);
      const rows = lines(r.stdout).sort();
      const id = seeded.images.busybox.config.digest.slice(7, 19);
      assert.deepEqual(rows, [`${registry.host}/busybox|1.35|${id}`, `${registry.host}/busybox|latest|${id}`]);
      const table = await ok(['images']);
      assert.match(lines(table.stdout)[0]!, /^REPOSITORY\s+TAG\s+IMAGE ID\s+CREATED\s+SIZE$/);
    });

    it('docker images --digests, -q, --no-trunc', async () => {
      const { registry, seeded } = open();
      const dg = await ok(['images', '--digests', '--format', '{{.Tag}} {{.Digest}}', `${registry.host}/busybox`]);
      assert.ok(lines(dg.stdout).includes(`latest ${seeded.digests.busybox}`), dg.stdout);
      const q = await ok(['images', '-q', '--no-trunc', `${registry.host}/busybox:latest`]);
      assert.equal(q.stdout.trim(), seeded.images.busybox.config.digest);
    });

    it('docker images --filter label= / reference= / dangling=', async () => {
      const { registry } = open();
      const byLabel = await ok(['images', '--filter', 'label=org.berth.fixture=layered', '--format', '{{.Repository}}']);
      assert.deepEqual(lines(byLabel.stdout), [`${registry.host}/layered`]);
      const byRef = await ok(['images', '--filter', `reference=${registry.host}/busy*`, '--format', '{{.Repository}}:{{.Tag}}']);
      assert.deepEqual(lines(byRef.stdout).sort(), [`${registry.host}/busybox:1.35`, `${registry.host}/busybox:latest`]);
      const dangling = await ok(['images', '--filter', 'dangling=true', '-q']);
      assert.equal(dangling.stdout.trim(), '');
    });

    it('docker image inspect by name, short id and digest; docker inspect finds images', async () => {
      const { registry, seeded } = open();
      const id = seeded.images.layered.config.digest;
      for (const name of [`${registry.host}/layered`, id.slice(7, 19), `${registry.host}/layered@${seeded.digests.layered}`]) {
        const r = await ok(['image', 'inspect', '--format', '{{.Id}} {{.Config.WorkingDir}} {{json .Config.Entrypoint}}', name]);
        assert.equal(r.stdout.trim(), `${id} /data ["/bin/sh","-c"]`, name);
      }
      const generic = await ok(['inspect', '--type', 'image', '--format', '{{.Os}}', `${registry.host}/layered`]);
      assert.equal(generic.stdout.trim(), 'linux');
      const json = JSON.parse((await ok(['image', 'inspect', `${registry.host}/layered`])).stdout);
      assert.equal(json.length, 1);
      assert.deepEqual(json[0].RootFS.Layers, seeded.images.layered.configJson.rootfs.diff_ids);
    });

    it('docker image inspect of a missing image fails', async () => {
      const r = await docker(['image', 'inspect', 'no-such-image']);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /No such image: no-such-image/);
    });

    it('docker history', async () => {
      const { registry, seeded } = open();
      const r = await ok(['history', '--no-trunc', '--format', '{{.CreatedBy}}', `${registry.host}/layered`]);
      const expected = [...seeded.images.layered.configJson.history!].reverse().map((h) => h.created_by!.trimEnd());
      assert.deepEqual(lines(r.stdout), expected);
      const table = await ok(['history', `${registry.host}/layered`]);
      assert.match(lines(table.stdout)[0]!, /^IMAGE\s+CREATED\s+CREATED BY\s+SIZE\s+COMMENT$/);
    });
  });

  describe('tag, rmi, prune', () => {
    it('docker tag, then the new name lists and inspects', async () => {
      const { registry, seeded } = open();
      await ok(['tag', `${registry.host}/busybox:latest`, 'berth-cli/mine:v1']);
      await ok(['tag', seeded.images.busybox.config.digest.slice(7, 19), 'berth-cli/mine']);
      const r = await ok(['images', '--format', '{{.Repository}}:{{.Tag}}', 'berth-cli/mine']);
      assert.deepEqual(lines(r.stdout).sort(), ['berth-cli/mine:latest', 'berth-cli/mine:v1']);
      const bad = await docker(['tag', `${registry.host}/busybox:latest`, 'Bad/Name']);
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /invalid reference format/);
      const missing = await docker(['tag', 'no-such-image', 'x:y']);
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /No such image: no-such-image/);
    });

    it('docker rmi of one tag untags', async () => {
      const r = await ok(['rmi', 'berth-cli/mine:v1']);
      assert.deepEqual(lines(r.stdout), ['Untagged: berth-cli/mine:v1']);
    });

    it('docker rmi by id with several names is refused unless -f', async () => {
      const { registry, seeded } = open();
      const id = seeded.images.busybox.config.digest.slice(7, 19);
      const r = await docker(['rmi', id]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, new RegExp(`conflict: unable to delete ${id} \\(must be forced\\) - image is referenced in multiple repositories`));
      const forced = await ok(['rmi', '-f', id]);
      const out = lines(forced.stdout);
      assert.ok(out.includes(`Untagged: ${registry.host}/busybox:latest`), forced.stdout);
      assert.ok(out.includes('Untagged: berth-cli/mine:latest'), forced.stdout);
      assert.ok(out.includes(`Deleted: ${seeded.images.busybox.config.digest}`), forced.stdout);
      const gone = await docker(['image', 'inspect', id]);
      assert.equal(gone.code, 1);
    });

    it('docker rmi of a missing image fails', async () => {
      const r = await docker(['rmi', 'no-such-image']);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /No such image: no-such-image/);
    });

    it('docker image prune removes dangling images only; -a with a label filter removes matching unused ones', async () => {
      const { registry } = open();
      // Make the multiarch image dangling by moving its tag to another image (the other-platform
      // image pulled earlier already lost that tag).
      await ok(['pull', `${registry.host}/multiarch`]);
      const multiarchId = (await ok(['image', 'inspect', '--format', '{{.Id}}', `${registry.host}/multiarch`])).stdout.trim();
      const before = await ok(['images', '-q', '--no-trunc']);
      await ok(['tag', `${registry.host}/layered`, `${registry.host}/multiarch:latest`]);
      const dangling = await ok(['images', '--filter', 'dangling=true', '-q', '--no-trunc']);
      assert.ok(lines(dangling.stdout).includes(multiarchId), dangling.stdout);
      const prune = await ok(['image', 'prune', '-f']);
      assert.match(prune.stdout, /Deleted Images:/);
      assert.match(prune.stdout, /Total reclaimed space:/);
      assert.equal((await ok(['images', '--filter', 'dangling=true', '-q'])).stdout.trim(), '');
      assert.ok(lines((await ok(['images', '-q', '--no-trunc'])).stdout).length < lines(before.stdout).length);
      const all = await ok(['image', 'prune', '-a', '-f', '--filter', 'label=org.berth.fixture=layered']);
      assert.match(all.stdout, /Deleted Images:/);
      const layered = await docker(['image', 'inspect', `${registry.host}/layered`]);
      assert.equal(layered.code, 1, 'layered was pruned');
    });
  });

  describe('login', () => {
    for (const [kind, reg] of [
      ['basic', basic],
      ['token', token],
    ] as const) {
      it(`docker login to a ${kind} registry, then pull with the stored credentials`, async () => {
        const { registry, seeded } = reg();
        const anon = await docker(['pull', seeded.refs.busybox]);
        assert.equal(anon.code, 1, 'anonymous pull is refused');
        const wrong = await docker(['login', registry.host, '-u', registry.username!, '--password-stdin'], { input: 'wrong-password\n' });
        assert.equal(wrong.code, 1);
        assert.match(wrong.stderr, /unauthorized|incorrect username or password|401/i);
        const login = await ok(['login', registry.host, '-u', registry.username!, '--password-stdin'], { input: `${registry.password}\n` });
        assert.match(login.stdout, /Login Succeeded/);
        const pulled = await ok(['pull', seeded.refs.layered]);
        assert.match(pulled.stdout, new RegExp(`Digest: ${seeded.digests.layered}`));
        await ok(['logout', registry.host]);
        const after = await docker(['pull', seeded.refs.busybox135]);
        assert.equal(after.code, 1, 'after logout the registry refuses again');
      });
    }
  });
});
