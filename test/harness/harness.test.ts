import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import { MediaType } from '../../src/lib/oci.js';
import { isAlive, isRunning, run } from './child-process.js';
import { makeTempDir, removeDir } from './temp-dir.js';
import { startCorruptingProxy } from './corrupting-proxy.js';
import { RegistryClient } from './registry-client.js';
import { startRegistry, type TestRegistry } from './registry.js';
import {
  busyboxImage,
  hostileImages,
  HOSTILE_CASES,
  layeredImage,
  multiarchImage,
  openBlob,
  readBlob,
  seedRegistry,
  zstdImage,
  type BuiltLayerBlob,
  type SeededImages,
} from '../fixtures/index.js';

const ACCEPT = [MediaType.dockerManifest, MediaType.dockerManifestList, MediaType.ociManifest, MediaType.ociIndex].join(', ');

function sha256(b: Buffer): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

function basic(user: string, pass: string): string {
  return `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
}

interface TarEntry {
  name: string;
  type: string;
  mode: number;
  uid: number;
  linkname: string | null;
  data: Buffer;
}

/** Lists a layer's tar entries (decompressed with gunzip or the zstd CLI). */
async function layerEntries(layer: BuiltLayerBlob): Promise<TarEntry[]> {
  let source: Readable;
  if (layer.compression === 'zstd') {
    source = spawn('zstd', ['-d', '-c', '-q', layer.path], { stdio: ['ignore', 'pipe', 'inherit'] }).stdout;
  } else {
    source = openBlob(layer).pipe(createGunzip());
  }
  const out: TarEntry[] = [];
  const ex = tar.extract();
  const done = (async () => {
    for await (const entry of ex) {
      const chunks: Buffer[] = [];
      for await (const c of entry) chunks.push(c as Buffer);
      const h = entry.header;
      out.push({ name: h.name, type: h.type, mode: h.mode, uid: h.uid, linkname: h.linkname, data: Buffer.concat(chunks) });
    }
  })();
  source.pipe(ex as unknown as NodeJS.WritableStream);
  await done;
  return out;
}

describe('fixtures', () => {
  it('busybox: static busybox, applet symlinks, users, tmp 1777, Docker media types', async () => {
    const img = await busyboxImage();
    assert.equal(img.mediaType, MediaType.dockerManifest);
    assert.equal(img.config.mediaType, MediaType.dockerConfig);
    assert.equal(img.layers[0]!.mediaType, MediaType.dockerLayerGzip);
    assert.deepEqual(img.configJson.config?.Cmd, ['sh']);
    assert.match(img.configJson.config?.Env?.[0] ?? '', /^PATH=/);
    assert.equal(img.configJson.os, 'linux');
    assert.equal(img.manifest.layers[0]!.digest, sha256(await readBlob(img.layers[0]!)));
    assert.equal(img.config.digest, sha256(img.config.data));
    const entries = await layerEntries(img.layers[0]!);
    const byName = new Map(entries.map((e) => [e.name.replace(/\/$/, ''), e]));
    assert.equal(byName.get('bin/busybox')?.type, 'file');
    assert.equal(byName.get('bin/sh')?.type, 'symlink');
    assert.equal(byName.get('bin/sh')?.linkname, 'busybox');
    assert.equal(byName.get('bin/ls')?.type, 'symlink');
    assert.match(byName.get('etc/passwd')!.data.toString(), /^berth:x:1000:1000:/m);
    assert.match(byName.get('etc/group')!.data.toString(), /^berth:x:1000:/m);
    assert.equal(byName.get('tmp')?.mode, 0o1777);
    assert.equal(byName.get('home/berth')?.uid, 1000);
    // diff_id is the digest of the uncompressed tar
    const tarBytes = await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      openBlob(img.layers[0]!).pipe(createGunzip()).on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks))).on('error', reject);
    });
    assert.equal(img.configJson.rootfs.diff_ids[0], sha256(tarBytes));
  });

  it('layered: OCI types, whiteout and opaque marker in layer 3, links in layer 2', async () => {
    const img = await layeredImage();
    const busybox = await busyboxImage();
    assert.equal(img.mediaType, MediaType.ociManifest);
    assert.equal(img.layers.length, 3);
    assert.equal(img.layers[0]!.digest, busybox.layers[0]!.digest, 'shares the busybox layer');
    assert.ok(img.layers.every((l) => l.mediaType === MediaType.ociLayerGzip));
    const l2 = await layerEntries(img.layers[1]!);
    assert.ok(l2.some((e) => e.name === 'data/hardlink' && e.type === 'link' && e.linkname === 'data/keep'));
    assert.ok(l2.some((e) => e.name === 'data/link' && e.type === 'symlink'));
    const l3 = (await layerEntries(img.layers[2]!)).map((e) => e.name);
    assert.ok(l3.includes('etc/.wh.removeme'));
    assert.ok(l3.includes('data/dir/.wh..wh..opq'));
    assert.equal(img.configJson.config?.WorkingDir, '/data');
    assert.deepEqual(img.configJson.config?.Entrypoint, ['/bin/sh', '-c']);
    assert.equal(img.configJson.history?.filter((h) => !h.empty_layer).length, 3);
  });

  it('multiarch: an OCI index whose host entry is the busybox manifest', async () => {
    const idx = await multiarchImage();
    const busybox = await busyboxImage();
    assert.equal(idx.mediaType, MediaType.ociIndex);
    assert.equal(idx.index.manifests.length, 2);
    assert.equal(idx.index.manifests[0]!.digest, busybox.digest);
    const other = idx.manifests[1]!;
    assert.notEqual(other.platform.architecture, busybox.platform.architecture);
    const entries = await layerEntries(other.layers[0]!);
    assert.equal(entries[0]!.name, 'arch');
    assert.equal(entries[0]!.data.toString(), `${other.platform.architecture}\n`);
  });

  it('zstd: a zstd layer with the same diff_id as the gzip one', async () => {
    const img = await zstdImage();
    const busybox = await busyboxImage();
    assert.equal(img.layers[0]!.mediaType, MediaType.ociLayerZstd);
    assert.equal(img.configJson.rootfs.diff_ids[0], busybox.configJson.rootfs.diff_ids[0]);
    assert.notEqual(img.layers[0]!.digest, busybox.layers[0]!.digest);
    const head = (await readBlob(img.layers[0]!)).subarray(0, 4);
    assert.deepEqual([...head], [0x28, 0xb5, 0x2f, 0xfd], 'zstd frame magic');
  });

  it('hostile: every case carries its hostile entry verbatim', async () => {
    const images = await hostileImages();
    assert.equal(images.length, HOSTILE_CASES.length);
    const names = async (tag: string) => {
      const h = images.find((i) => i.case.tag === tag)!;
      const all = [];
      for (const l of h.image.layers.slice(1)) all.push(...(await layerEntries(l)));
      return all;
    };
    assert.ok((await names('dotdot')).some((e) => e.name === '../berth-hostile-dotdot'));
    const abs = await names('abs-symlink');
    assert.deepEqual(abs.map((e) => [e.name, e.type]), [['bin/evil', 'symlink'], ['bin/evil/berth-hostile-abs-symlink', 'file']]);
    assert.equal(abs[0]!.linkname, '/etc');
    assert.ok((await names('hardlink-abs')).some((e) => e.type === 'link' && e.linkname === '/etc/passwd'));
    assert.ok((await names('chardev')).some((e) => e.type === 'character-device'));
  });
});

describe('open registry', () => {
  let reg: TestRegistry;
  let seeded: SeededImages;
  before(async () => {
    reg = await startRegistry('open');
    seeded = await seedRegistry(reg);
  });
  after(async () => {
    await reg?.stop();
  });

  it('serves each seeded tag with the expected digest', async () => {
    const cases: Array<[string, string, string]> = [
      ['busybox', 'latest', seeded.digests.busybox],
      ['busybox', '1.35', seeded.digests.busybox],
      ['layered', 'latest', seeded.digests.layered],
      ['multiarch', 'latest', seeded.digests.multiarch],
      ['zstd', 'latest', seeded.digests.zstd],
    ];
    for (const [repo, tag, digest] of cases) {
      const res = await fetch(`${reg.url}/v2/${repo}/manifests/${tag}`, { headers: { Accept: ACCEPT } });
      assert.equal(res.status, 200, `${repo}:${tag}`);
      const body = Buffer.from(await res.arrayBuffer());
      assert.equal(res.headers.get('docker-content-digest'), digest, `${repo}:${tag}`);
      assert.equal(sha256(body), digest, `${repo}:${tag} body`);
    }
    assert.equal(seeded.refs.busybox, `${reg.host}/busybox:latest`);
  });

  it('serves blobs and the multiarch children by digest', async () => {
    const img = seeded.images.busybox;
    const res = await fetch(`${reg.url}/v2/busybox/blobs/${img.layers[0]!.digest}`);
    assert.equal(res.status, 200);
    assert.equal(sha256(Buffer.from(await res.arrayBuffer())), img.layers[0]!.digest);
    for (const [arch, digest] of Object.entries(seeded.multiarchChildren)) {
      const m = await fetch(`${reg.url}/v2/multiarch/manifests/${digest}`, { headers: { Accept: ACCEPT } });
      assert.equal(m.status, 200, arch);
    }
  });

  it('stop() ends the process and removes its dir', async () => {
    const r = await startRegistry('open');
    assert.ok(isAlive(r.pid));
    await r.stop();
    assert.equal(isRunning(r.pid), false);
    assert.equal(existsSync(r.dir), false);
  });
});

describe('basic-auth registry', () => {
  let reg: TestRegistry;
  let seeded: SeededImages;
  before(async () => {
    reg = await startRegistry('basic');
    seeded = await seedRegistry(reg);
  });
  after(async () => {
    await reg?.stop();
  });

  it('refuses anonymous and wrong credentials with a Basic challenge', async () => {
    const anon = await fetch(`${reg.url}/v2/`);
    assert.equal(anon.status, 401);
    assert.match(anon.headers.get('www-authenticate') ?? '', /^Basic realm=/);
    const wrong = await fetch(`${reg.url}/v2/busybox/manifests/latest`, { headers: { Authorization: basic(reg.username!, 'wrong') } });
    assert.equal(wrong.status, 401);
  });

  it('accepts the right credentials', async () => {
    const res = await fetch(`${reg.url}/v2/busybox/manifests/latest`, {
      headers: { Authorization: basic(reg.username!, reg.password!), Accept: ACCEPT },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('docker-content-digest'), seeded.digests.busybox);
  });
});

describe('token-auth registry', () => {
  let reg: TestRegistry;
  let seeded: SeededImages;
  before(async () => {
    reg = await startRegistry('token');
    seeded = await seedRegistry(reg);
  });
  after(async () => {
    await reg?.stop();
  });

  async function token(scope: string, auth?: string): Promise<Response> {
    const u = new URL(reg.tokenServerUrl!);
    u.searchParams.set('service', reg.tokenServer!.service);
    u.searchParams.set('scope', scope);
    return fetch(u, auth ? { headers: { Authorization: auth } } : {});
  }

  it('answers /v2/ with a Bearer challenge naming the token server', async () => {
    const res = await fetch(`${reg.url}/v2/busybox/manifests/latest`);
    assert.equal(res.status, 401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    assert.match(challenge, /^Bearer /);
    assert.ok(challenge.includes(`realm="${reg.tokenServerUrl}"`), challenge);
    assert.ok(challenge.includes('scope="repository:busybox:pull"'), challenge);
  });

  it('gives anonymous clients a token that grants nothing', async () => {
    const res = await token('repository:busybox:pull');
    assert.equal(res.status, 200);
    const { token: t } = (await res.json()) as { token: string };
    const m = await fetch(`${reg.url}/v2/busybox/manifests/latest`, { headers: { Authorization: `Bearer ${t}`, Accept: ACCEPT } });
    assert.equal(m.status, 401);
  });

  it('refuses wrong credentials at the token server', async () => {
    const res = await token('repository:busybox:pull', basic(reg.username!, 'wrong'));
    assert.equal(res.status, 401);
  });

  it('issues a token the registry accepts, limited to the requested repository', async () => {
    const res = await token('repository:busybox:pull', basic(reg.username!, reg.password!));
    assert.equal(res.status, 200);
    const body = (await res.json()) as { token: string; access_token: string; expires_in: number };
    assert.equal(body.token, body.access_token);
    const ok = await fetch(`${reg.url}/v2/busybox/manifests/latest`, { headers: { Authorization: `Bearer ${body.token}`, Accept: ACCEPT } });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('docker-content-digest'), seeded.digests.busybox);
    const other = await fetch(`${reg.url}/v2/layered/manifests/latest`, { headers: { Authorization: `Bearer ${body.token}`, Accept: ACCEPT } });
    assert.equal(other.status, 401, 'a busybox token must not open layered');
    const rec = reg.tokenServer!.requests.at(-1)!;
    assert.equal(rec.auth, 'ok');
    assert.deepEqual(rec.granted, [{ type: 'repository', name: 'busybox', actions: ['pull'] }]);
  });

  it('supports the OAuth2 password and refresh_token grants', async () => {
    const form = new URLSearchParams({
      grant_type: 'password', username: reg.username!, password: reg.password!, service: reg.tokenServer!.service,
      scope: 'repository:busybox:pull', client_id: 'berth-test', access_type: 'offline',
    });
    const res = await fetch(reg.tokenServerUrl!, { method: 'POST', body: form });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { access_token: string; refresh_token: string };
    assert.ok(body.refresh_token);
    const again = await fetch(reg.tokenServerUrl!, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: body.refresh_token, service: reg.tokenServer!.service, scope: 'repository:layered:pull' }),
    });
    assert.equal(again.status, 200);
    const t = ((await again.json()) as { access_token: string }).access_token;
    const m = await fetch(`${reg.url}/v2/layered/manifests/latest`, { headers: { Authorization: `Bearer ${t}`, Accept: ACCEPT } });
    assert.equal(m.status, 200);
  });

  it('with anonymousPull, anonymous clients can pull but not push', async () => {
    const r = await startRegistry('token', { anonymousPull: true });
    try {
      await seedRegistry(r);
      const anon = new RegistryClient({ url: r.url });
      const get = await anon.request('GET', '/v2/busybox/manifests/latest', { headers: { Accept: ACCEPT } });
      assert.equal(get.status, 200);
      const push = await anon.request('POST', '/v2/busybox/blobs/uploads/');
      assert.equal(push.status, 401);
    } finally {
      await r.stop();
    }
  });
});

describe('corrupting proxy', () => {
  let reg: TestRegistry;
  let seeded: SeededImages;
  before(async () => {
    reg = await startRegistry('open');
    seeded = await seedRegistry(reg);
  });
  after(async () => {
    await reg?.stop();
  });

  it('flips a byte in blob bodies but leaves manifests alone by default', async () => {
    const proxy = await startCorruptingProxy(reg);
    try {
      const layer = seeded.images.busybox.layers[0]!;
      const res = await fetch(`${proxy.url}/v2/busybox/blobs/${layer.digest}`);
      assert.equal(res.status, 200);
      const body = Buffer.from(await res.arrayBuffer());
      assert.equal(body.length, layer.size);
      assert.notEqual(sha256(body), layer.digest);
      assert.equal(proxy.corrupted, 1);
      // Only the gzip mtime byte changed, so the body still decompresses.
      assert.equal(body[0], 0x1f);

      const m = await fetch(`${proxy.url}/v2/busybox/manifests/latest`, { headers: { Accept: ACCEPT } });
      assert.equal(sha256(Buffer.from(await m.arrayBuffer())), seeded.digests.busybox);

      const direct = await fetch(`${reg.url}/v2/busybox/blobs/${layer.digest}`);
      assert.equal(sha256(Buffer.from(await direct.arrayBuffer())), layer.digest);
    } finally {
      await proxy.stop();
    }
  });

  it('corrupts manifests when asked, keeping them valid JSON', async () => {
    const proxy = await startCorruptingProxy(reg, { blobs: false, manifests: true });
    try {
      const res = await fetch(`${proxy.url}/v2/busybox/manifests/latest`, { headers: { Accept: ACCEPT } });
      const body = Buffer.from(await res.arrayBuffer());
      assert.equal(res.headers.get('docker-content-digest'), seeded.digests.busybox, 'header still claims the real digest');
      assert.notEqual(sha256(body), seeded.digests.busybox);
      assert.doesNotThrow(() => JSON.parse(body.toString()));
    } finally {
      await proxy.stop();
    }
  });

  it('relays auth challenges and credentials of the registry behind it', async () => {
    const treg = await startRegistry('token');
    const proxy = await startCorruptingProxy(treg);
    try {
      await seedRegistry(proxy);
      const client = new RegistryClient(proxy);
      const layer = (await busyboxImage()).layers[0]!;
      const res = await client.request('GET', `/v2/busybox/blobs/${layer.digest}`);
      assert.equal(res.status, 200);
      assert.notEqual(sha256(res.body), layer.digest);
    } finally {
      await proxy.stop();
      await treg.stop();
    }
  });
});

describe('cli', () => {
  it('up writes env.json with seeded registries; down stops them and removes it', async () => {
    const cli = fileURLToPath(new URL('./cli.js', import.meta.url));
    const dir = makeTempDir('cli-test');
    const envPath = `${dir}/env.json`;
    try {
      const up = await run(process.execPath, [cli, 'up', '--out', envPath, '--registries', 'open,token', '--no-daemon', '--no-hub-mirror'], { timeoutMs: 60000 });
      assert.equal(up.code, 0, up.stderr);
      const env = JSON.parse(readFileSync(envPath, 'utf8'));
      assert.ok(isAlive(env.pid));
      assert.deepEqual(Object.keys(env.registries).sort(), ['open', 'token']);
      assert.ok(env.registries.token.password);
      const m = await fetch(`${env.registries.open.url}/v2/busybox/manifests/latest`, { headers: { Accept: ACCEPT } });
      assert.equal(m.headers.get('docker-content-digest'), env.registries.open.digests.busybox);
      const down = await run(process.execPath, [cli, 'down', '--env', envPath], { timeoutMs: 60000 });
      assert.equal(down.code, 0, down.stderr);
      assert.equal(existsSync(envPath), false);
      assert.equal(isRunning(env.pid), false);
      await assert.rejects(fetch(`${env.registries.open.url}/v2/`));
      assert.equal(existsSync(env.registries.open.logDir), false);
    } finally {
      await removeDir(dir);
    }
  });
});
