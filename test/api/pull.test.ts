/**
 * POST /images/create against a real registry (open, no auth): dockerd's progress stream, schema2
 * and OCI manifests, manifest lists and OCI indexes with platform selection, gzip and zstd layers,
 * reference forms (tag parameter, digests), errors before and during the stream, digest verification
 * through a corrupting proxy (a failed pull leaves nothing behind), and the unpacked layer store
 * (whiteouts, opaque directories, one directory per chain id).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  assembleIndex,
  assembleManifest,
  buildLayer,
  busyboxImage,
  busyboxLayer,
  bigImage,
  FIXTURE_CREATED,
  LAYERED_EXPECT,
  otherPlatform,
  hostPlatform,
  pushImage,
  run,
  startCorruptingProxy,
  useDaemon,
  useSeededRegistry,
  type BuiltIndex,
  type BuiltManifest,
  type CorruptingProxy,
} from '../harness/index.js';
import {
  assertStoreUnchanged,
  imageIds,
  manifestWithConfig,
  pull,
  pullOk,
  query,
  short,
  startSlowProxy,
  statuses,
  storeSnapshot,
  type ProgressRecord,
} from './support.js';

const LAYER_ACTIONS = ['Pulling fs layer', 'Waiting', 'Downloading', 'Verifying Checksum', 'Download complete', 'Extracting', 'Pull complete', 'Already exists'];

/** Records about one layer, in stream order. */
function layerRecords(records: ProgressRecord[], id: string): ProgressRecord[] {
  return records.filter((r) => r.id === id && r.status !== undefined && LAYER_ACTIONS.includes(r.status));
}

/** Asserts `sub` appears in `seq` in this order (other items may sit between). */
function assertSubsequence(seq: string[], sub: string[], what: string): void {
  let i = 0;
  for (const s of seq) if (s === sub[i]) i++;
  assert.equal(i, sub.length, `${what}: expected ${JSON.stringify(sub)} in order within ${JSON.stringify(seq)}`);
}

function layerDirOf(dataRoot: string, chainId: string): string {
  return join(dataRoot, 'layers', chainId.replace(/^sha256:/, ''), 'diff');
}

describe('pull', () => {
  const d = useDaemon();
  const reg = useSeededRegistry('open');
  let proxy: CorruptingProxy;
  let host = '';
  let fiveLayers: BuiltManifest;
  let wrongDiffId: BuiltManifest;
  let dockerList: BuiltIndex;
  let zstdPlus: BuiltManifest;
  let plainTar: BuiltManifest;

  before(async () => {
    const { registry } = reg();
    host = registry.host;
    proxy = await startCorruptingProxy(registry, { blobs: false, manifests: false });
    const layers = [];
    for (let i = 1; i <= 5; i++) layers.push(await buildLayer([{ type: 'file', path: `five-${i}`, content: `layer ${i}\n` }]));
    fiveLayers = assembleManifest({ format: 'docker', layers, config: { Cmd: ['sh'], Labels: { 'org.berth.fixture': 'five' } } });
    await pushImage(registry, 'five', 'latest', fiveLayers);
    // A config whose diff_id does not match its layer: only the uncompressed digest check catches it.
    const l = await buildLayer([{ type: 'file', path: 'diffid', content: 'the real content\n' }]);
    wrongDiffId = manifestWithConfig([l], {
      created: FIXTURE_CREATED,
      architecture: hostPlatform().architecture,
      os: 'linux',
      config: { Cmd: ['sh'] },
      rootfs: { type: 'layers', diff_ids: [`sha256:${'1'.repeat(64)}`] },
      history: [{ created: FIXTURE_CREATED, created_by: 'wrong diff id' }],
    });
    await pushImage(registry, 'wrong-diffid', 'latest', wrongDiffId);
    dockerList = assembleIndex('docker', [await busyboxImage()]);
    zstdPlus = assembleManifest({
      format: 'oci',
      layers: [await busyboxLayer('zstd'), await buildLayer([{ type: 'file', path: 'plus', content: 'plus\n' }], { compression: 'zstd' })],
      config: { Cmd: ['sh'], Labels: { 'org.berth.fixture': 'zstd-plus' } },
    });
    await pushImage(registry, 'zstd-plus', 'latest', zstdPlus);
    plainTar = assembleManifest({
      format: 'oci',
      layers: [await buildLayer([{ type: 'file', path: 'plain', content: 'uncompressed\n' }], { compression: 'none' })],
      config: { Cmd: ['sh'], Labels: { 'org.berth.fixture': 'plain-tar' } },
    });
    await pushImage(registry, 'plain-tar', 'latest', plainTar);
    await pushImage(registry, 'docker-list', 'latest', dockerList);
  });
  after(async () => {
    await proxy?.stop();
  });

  describe('progress stream', () => {
    it('a fresh pull streams dockerd messages for every layer, then Digest and Status', async () => {
      const out = await pull(d(), `${host}/layered`, { tag: 'latest' });
      assert.equal(out.status, 200, out.error);
      assert.equal(out.contentType, 'application/json');
      assert.equal(out.error, undefined);
      const { seeded } = reg();
      const recs = out.records;
      assert.deepEqual(recs[0], { status: 'Pulling from layered', id: 'latest' });
      const ids = seeded.images.layered.layers.map((l) => short(l.digest));
      for (const [i, id] of ids.entries()) {
        const mine = layerRecords(recs, id);
        const seq = mine.map((r) => r.status!);
        assertSubsequence(seq, ['Pulling fs layer', 'Downloading', 'Verifying Checksum', 'Download complete', 'Extracting', 'Pull complete'], `layer ${i}`);
        assert.equal(seq.filter((s) => s === 'Pull complete').length, 1);
        for (const r of mine) assert.ok(r.progressDetail !== undefined, `progressDetail on ${r.status}`);
        const downloads = mine.filter((r) => r.status === 'Downloading');
        const size = seeded.images.layered.layers[i]!.size;
        for (const dl of downloads) {
          assert.equal(dl.progressDetail!.total, size);
          assert.ok(dl.progressDetail!.current! <= size);
        }
        assert.equal(downloads[downloads.length - 1]!.progressDetail!.current, size, 'the last update reports the whole layer');
        const currents = downloads.map((x) => x.progressDetail!.current!);
        assert.deepEqual(currents, [...currents].sort((a, b) => a - b), 'progress only grows');
        assert.equal(new Set(currents).size, currents.length, 'no repeated progress figures');
      }
      // Layer records only carry ids of this image's layers.
      for (const r of recs) if (r.status && LAYER_ACTIONS.includes(r.status)) assert.ok(ids.includes(r.id!), `unexpected id ${r.id}`);
      assert.deepEqual(recs.slice(-2), [
        { status: `Digest: ${seeded.digests.layered}` },
        { status: `Status: Downloaded newer image for ${host}/layered:latest` },
      ]);
    });

    it('pulling it again: no layer lines, "Image is up to date"', async () => {
      const recs = await pullOk(d(), `${host}/layered`, { tag: 'latest' });
      assert.deepEqual(recs, [
        { status: 'Pulling from layered', id: 'latest' },
        { status: `Digest: ${reg().seeded.digests.layered}` },
        { status: `Status: Image is up to date for ${host}/layered:latest` },
      ]);
    });

    it('layers beyond three downloads at once are reported Waiting first', async () => {
      const recs = await pullOk(d(), `${host}/five`);
      const ids = fiveLayers.layers.map((l) => short(l.digest));
      const waiting = recs.filter((r) => r.status === 'Waiting').map((r) => r.id);
      assert.deepEqual(waiting.sort(), ids.slice(3).sort());
      for (const id of ids) assertSubsequence(layerRecords(recs, id).map((r) => r.status!), ['Pulling fs layer', 'Pull complete'], id);
    });

    it('a layer already stored shows "Already exists" and is not fetched again', async () => {
      // busybox's only layer is layered's first.
      const before = proxy.requests.length;
      const recs = await pullOk(d(), `${proxy.host}/busybox`, { tag: 'latest' });
      const id = short(reg().seeded.images.busybox.layers[0]!.digest);
      assert.deepEqual(layerRecords(recs, id).map((r) => r.status), ['Already exists']);
      const fetched = proxy.requests.slice(before).filter((r) => r.includes('/blobs/') && r.startsWith('GET'));
      assert.ok(!fetched.some((r) => r.includes(reg().seeded.images.busybox.layers[0]!.digest)), fetched.join('\n'));
      assert.match(recs[recs.length - 1]!.status!, /^Status: Downloaded newer image for /);
    });

    it('a second tag for an image already here: Downloaded newer image, no layers', async () => {
      const recs = await pullOk(d(), `${host}/busybox:1.35`);
      assert.deepEqual(statuses(recs), ['Pulling from busybox', `Digest: ${reg().seeded.digests.busybox}`, `Status: Downloaded newer image for ${host}/busybox:1.35`]);
    });

    it('old API versions get the same stream', async () => {
      const recs = await pullOk(d(), `${host}/busybox:1.35`, { version: '1.24' });
      assert.equal(recs[recs.length - 1]!.status, `Status: Image is up to date for ${host}/busybox:1.35`);
    });
  });

  describe('references', () => {
    const forms: { what: string; fromImage: () => string; tag?: () => string; id: () => string; status: () => string }[] = [
      { what: 'fromImage repo, tag param', fromImage: () => `${host}/busybox`, tag: () => 'latest', id: () => 'latest', status: () => `${host}/busybox:latest` },
      { what: 'tag param overrides the tag in fromImage', fromImage: () => `${host}/busybox:no-such-tag`, tag: () => '1.35', id: () => '1.35', status: () => `${host}/busybox:1.35` },
      { what: 'a trailing ":" is trimmed', fromImage: () => `${host}/busybox:`, tag: () => 'latest', id: () => 'latest', status: () => `${host}/busybox:latest` },
      { what: 'no tag at all means latest', fromImage: () => `${host}/busybox`, id: () => 'latest', status: () => `${host}/busybox:latest` },
      {
        what: 'a digest in the tag param',
        fromImage: () => `${host}/busybox`,
        tag: () => reg().seeded.digests.busybox,
        id: () => reg().seeded.digests.busybox,
        status: () => `${host}/busybox@${reg().seeded.digests.busybox}`,
      },
      {
        what: 'a digest in fromImage',
        fromImage: () => `${host}/busybox@${reg().seeded.digests.busybox}`,
        id: () => reg().seeded.digests.busybox,
        status: () => `${host}/busybox@${reg().seeded.digests.busybox}`,
      },
    ];
    for (const f of forms) {
      it(f.what, async () => {
        const recs = await pullOk(d(), f.fromImage(), { tag: f.tag?.() });
        assert.deepEqual(recs[0], { status: 'Pulling from busybox', id: f.id() });
        assert.match(recs[recs.length - 1]!.status!, new RegExp(`^Status: (Downloaded newer image|Image is up to date) for ${f.status().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`));
      });
    }

    it('a digest pull adds a digest reference, not a tag', async () => {
      const digestRef = `${host}/five@${fiveLayers.digest}`;
      await pullOk(d(), digestRef);
      const img = (await d().request('GET', `/images/${digestRef}/json`)).json();
      assert.ok(img.RepoDigests.includes(digestRef), JSON.stringify(img.RepoDigests));
      assert.deepEqual(img.RepoTags, [`${host}/five:latest`], 'only the tag pulled before');
      await d().request('DELETE', `/images/${host}/five:latest`);
      const after = (await d().request('GET', `/images/${digestRef}/json`));
      assert.equal(after.status, 404, 'untagging the last tag removed the same-repository digest reference too');
      await pullOk(d(), digestRef);
      const byDigest = (await d().request('GET', `/images/${digestRef}/json`)).json();
      assert.deepEqual(byDigest.RepoTags, []);
      assert.deepEqual(byDigest.RepoDigests, [digestRef]);
    });
  });

  describe('manifest formats and platforms', () => {
    it('OCI manifest with a zstd layer', async () => {
      await pullOk(d(), `${host}/zstd:latest`);
      const img = (await d().request('GET', `/images/${host}/zstd:latest/json`)).json();
      assert.equal(img.Id, reg().seeded.images.zstd.config.digest);
      const upper = img.GraphDriver.Data.UpperDir as string;
      assert.ok(lstatSync(join(upper, 'bin', 'busybox')).isFile(), 'busybox unpacked from zstd');
    });

    it('OCI manifest with an uncompressed tar layer', async () => {
      assert.equal(plainTar.manifest.layers[0]!.mediaType, 'application/vnd.oci.image.layer.v1.tar');
      await pullOk(d(), `${host}/plain-tar:latest`);
      const img = (await d().request('GET', `/images/${host}/plain-tar:latest/json`)).json();
      assert.equal(img.Id, plainTar.config.digest);
      assert.equal(readFileSync(join(img.GraphDriver.Data.UpperDir, 'plain'), 'utf8'), 'uncompressed\n');
    });

    it('an OCI index: the host platform by default; RepoDigests name the index', async () => {
      const { seeded } = reg();
      await pullOk(d(), `${host}/multiarch`);
      const img = (await d().request('GET', `/images/${host}/multiarch/json`)).json();
      assert.equal(img.Id, seeded.images.busybox.config.digest, 'the host entry is busybox');
      assert.ok(img.RepoDigests.includes(`${host}/multiarch@${seeded.digests.multiarch}`), JSON.stringify(img.RepoDigests));
      assert.equal(img.Architecture, hostPlatform().architecture);
    });

    it('an OCI index with platform= picks the other entry', async () => {
      const other = otherPlatform();
      const platform = [other.os, other.architecture, other.variant].filter(Boolean).join('/');
      const recs = await pullOk(d(), `${host}/multiarch`, { platform });
      assert.equal(recs[recs.length - 2]!.status, `Digest: ${reg().seeded.digests.multiarch}`, 'Digest: is the index digest');
      const img = (await d().request('GET', `/images/${host}/multiarch/json`)).json();
      assert.equal(img.Architecture, other.architecture);
      const upper = img.GraphDriver.Data.UpperDir as string;
      assert.equal(readFileSync(join(upper, 'arch'), 'utf8'), `${other.architecture}\n`);
    });

    const otherSpellings = () =>
      otherPlatform().architecture === 'arm64' ? ['linux/arm64', 'linux/arm64/v8', 'linux/aarch64', 'LINUX/ARM64'] : ['linux/amd64', 'linux/x86_64', 'Linux/AMD64'];
    for (const i of [0, 1, 2]) {
      it(`platform spelling #${i + 1} of the other architecture selects it`, async () => {
        const spelling = otherSpellings()[i]!;
        await pullOk(d(), `${host}/multiarch`, { platform: spelling });
        const img = (await d().request('GET', `/images/${host}/multiarch/json`)).json();
        assert.equal(img.Architecture, otherPlatform().architecture, spelling);
      });
    }

    it('platform=linux means this host\'s architecture', async () => {
      await pullOk(d(), `${host}/multiarch`, { platform: 'linux' });
      const img = (await d().request('GET', `/images/${host}/multiarch/json`)).json();
      assert.equal(img.Architecture, hostPlatform().architecture);
    });

    it('a Docker manifest list resolves to its schema2 manifest', async () => {
      const recs = await pullOk(d(), `${host}/docker-list`);
      assert.equal(recs[recs.length - 2]!.status, `Digest: ${dockerList.digest}`);
      const img = (await d().request('GET', `/images/${host}/docker-list/json`)).json();
      assert.equal(img.Id, (await busyboxImage()).config.digest);
    });

    it('a platform the index lacks fails with dockerd\'s message', async () => {
      const out = await pull(d(), `${host}/multiarch`, { platform: 'linux/s390x' });
      assert.ok(out.error, `expected a failure, got ${out.raw}`);
      assert.match(out.error!, /no matching manifest for linux\/s390x in the manifest list entries/);
    });
  });

  describe('errors', () => {
    const cases: { what: string; fromImage: () => string; tag?: string; status: number; message: () => RegExp }[] = [
      {
        what: 'a missing tag',
        fromImage: () => `${host}/busybox`,
        tag: 'no-such-tag',
        status: 404,
        message: () => new RegExp(`^manifest for ${host}/busybox:no-such-tag not found: manifest unknown`),
      },
      {
        what: 'a missing repository',
        fromImage: () => `${host}/no-such-repo`,
        status: 404,
        message: () => new RegExp(`${host}/no-such-repo`),
      },
      {
        what: 'a missing digest',
        fromImage: () => `${host}/busybox@sha256:${'0'.repeat(64)}`,
        status: 404,
        message: () => /not found|unknown/,
      },
      { what: 'an invalid reference', fromImage: () => `${host}/Bad_Name`, status: 400, message: () => /invalid reference format/ },
      { what: 'a malformed digest', fromImage: () => `${host}/busybox@sha256:xyz`, status: 400, message: () => /invalid reference format/ },
      { what: 'a registry nobody listens on', fromImage: () => '127.0.0.1:1/busybox', status: 500, message: () => /connection refused|ECONNREFUSED/ },
    ];
    for (const c of cases) {
      it(`${c.what} → HTTP ${c.status} before any stream`, async () => {
        const out = await pull(d(), c.fromImage(), { tag: c.tag });
        assert.equal(out.status, c.status, out.raw);
        assert.match(out.error ?? '', c.message());
      });
    }

    it('errors keep the daemon healthy and change nothing', async () => {
      const before = await imageIds(d());
      await pull(d(), `${host}/no-such-repo`);
      assert.deepEqual(await imageIds(d()), before);
      assert.equal((await d().request('GET', '/_ping')).status, 200);
    });
  });

  describe('verification', () => {
    const failCases: {
      what: string;
      ref: () => string;
      configure: () => Parameters<CorruptingProxy['configure']>[0];
      message: () => RegExp;
    }[] = [
      {
        what: 'a corrupted layer blob (the third of three)',
        ref: () => `${proxy.host}/layered:latest`,
        configure: () => ({ blobs: true, manifests: false, match: new RegExp(reg().seeded.images.layered.layers[2]!.digest) }),
        message: () => new RegExp(`filesystem layer verification failed for digest ${reg().seeded.images.layered.layers[2]!.digest}`),
      },
      {
        what: 'a corrupted config blob',
        ref: () => `${proxy.host}/layered:latest`,
        configure: () => ({ blobs: true, manifests: false, match: new RegExp(reg().seeded.images.layered.config.digest) }),
        message: () => /verification failed/,
      },
      {
        what: 'a corrupted manifest fetched by tag',
        ref: () => `${proxy.host}/layered:latest`,
        configure: () => ({ blobs: false, manifests: true, match: /\/manifests\/latest$/ }),
        message: () => /verification failed|digest/,
      },
      {
        what: 'a corrupted manifest fetched by digest',
        ref: () => `${proxy.host}/layered@${reg().seeded.digests.layered}`,
        configure: () => ({ blobs: false, manifests: true, match: /\/manifests\/sha256:/ }),
        message: () => new RegExp(`manifest verification failed for digest ${reg().seeded.digests.layered}`),
      },
      {
        what: "a corrupted index entry's manifest",
        ref: () => `${proxy.host}/multiarch:latest`,
        configure: () => ({ blobs: false, manifests: true, match: new RegExp(`/manifests/${reg().seeded.multiarchChildren[otherPlatform().architecture]}$`) }),
        message: () => /verification failed/,
      },
    ];

    for (const c of failCases) {
      it(`${c.what}: the pull fails clearly and leaves nothing behind`, async () => {
        // Start without the images the corrupted pull would produce, so leftovers would show.
        for (const name of [`${host}/layered:latest`, `${host}/multiarch:latest`]) await d().request('DELETE', `/images/${name}?force=1`);
        await d().request('POST', `/images/prune?filters=${encodeURIComponent('{"dangling":["false"],"label":["org.berth.fixture=layered"]}')}`);
        const ids = await imageIds(d());
        const snap = storeSnapshot(d());
        proxy.configure(c.configure());
        const corruptedBefore = proxy.corrupted;
        let out;
        try {
          const platform = c.ref().includes('multiarch') ? [otherPlatform().os, otherPlatform().architecture, otherPlatform().variant].filter(Boolean).join('/') : undefined;
          out = await pull(d(), c.ref(), { platform });
        } finally {
          proxy.configure({ blobs: false, manifests: false, match: /^$/ });
        }
        assert.ok(proxy.corrupted > corruptedBefore, 'the proxy damaged something');
        assert.ok(out.error, `expected a failure: ${out.raw.slice(-500)}`);
        assert.match(out.error!, c.message());
        assert.deepEqual(await imageIds(d()), ids, 'no image recorded');
        assertStoreUnchanged(snap, storeSnapshot(d()), c.what);
      });
    }

    it('after a failed pull, pulling from the real registry works', async () => {
      await pullOk(d(), `${host}/layered:latest`);
      await pullOk(d(), `${host}/multiarch:latest`);
    });

    it('a layer whose uncompressed digest is not its diff_id is refused', async () => {
      const snap = storeSnapshot(d());
      const ids = await imageIds(d());
      const out = await pull(d(), `${host}/wrong-diffid`);
      assert.ok(out.error, out.raw);
      assert.match(out.error!, /sha256:1{64}|diff|verification|digest/i);
      assert.deepEqual(await imageIds(d()), ids);
      assertStoreUnchanged(snap, storeSnapshot(d()), 'wrong diff id');
    });
  });

  describe('layer store', () => {
    it('the layered image: whiteouts are 0/0 char devices, opaque dirs carry trusted.overlay.opaque=y', async () => {
      await pullOk(d(), `${host}/layered:latest`);
      const img = (await d().request('GET', `/images/${host}/layered:latest/json`)).json();
      const chain = img.RootFS.Layers.length;
      assert.equal(chain, 3);
      const top = img.GraphDriver.Data.UpperDir as string;
      const whiteout = lstatSync(join(top, 'etc', 'removeme'));
      assert.ok(whiteout.isCharacterDevice(), 'etc/removeme is a whiteout device');
      assert.equal(whiteout.rdev, 0, 'device 0/0');
      assert.equal(existsSync(join(top, 'etc', '.wh.removeme')), false, 'no .wh. file left');
      assert.equal(existsSync(join(top, 'data', 'dir', '.wh..wh..opq')), false, 'no opaque marker file left');
      const xattr = spawnSync('getfattr', ['--only-values', '-n', 'trusted.overlay.opaque', join(top, 'data', 'dir')], { encoding: 'utf8' });
      assert.equal(xattr.status, 0, xattr.stderr);
      assert.equal(xattr.stdout, 'y');
      const middle = String(img.GraphDriver.Data.LowerDir).split(':')[0]!;
      assert.equal(readFileSync(join(middle, 'data', 'keep'), 'utf8'), 'keep\n');
      assert.ok(lstatSync(join(middle, 'data', 'link')).isSymbolicLink());
      assert.equal(lstatSync(join(middle, 'data', 'hardlink')).ino, lstatSync(join(middle, 'data', 'keep')).ino, 'hardlink shares the inode');
    });

    it('the layered image mounted as overlayfs shows what LAYERED_EXPECT says', async () => {
      const img = (await d().request('GET', `/images/${host}/layered:latest/json`)).json();
      const lowers = [img.GraphDriver.Data.UpperDir, ...String(img.GraphDriver.Data.LowerDir).split(':')].join(':');
      const mnt = mkdtempSync(join(d().dir, 'mnt-'));
      const m = await run('mount', ['-t', 'overlay', 'overlay', '-o', `ro,lowerdir=${lowers}`, mnt]);
      assert.equal(m.code, 0, m.stderr);
      try {
        for (const [path, content] of Object.entries(LAYERED_EXPECT)) {
          const p = join(mnt, path);
          if (content === null) assert.equal(existsSync(p), false, `${path} must be absent`);
          else assert.equal(readFileSync(p, 'utf8'), content, path);
        }
        assert.ok(lstatSync(join(mnt, 'bin', 'busybox')).isFile());
        assert.deepEqual(readdirSync(join(mnt, 'data', 'dir')), ['new']);
      } finally {
        await run('umount', [mnt]);
        rmSync(mnt, { recursive: true, force: true });
      }
    });

    it('a layer is unpacked once per chain id, whatever its compression', async () => {
      const { seeded } = reg();
      const diffId = seeded.images.busybox.configJson.rootfs.diff_ids[0]!;
      assert.equal(zstdPlus.configJson.rootfs.diff_ids[0], diffId, 'fixture: the zstd and gzip busybox layers are the same tar');
      await pullOk(d(), `${host}/busybox:latest`);
      const marker = lstatSync(join(d().dataRoot, 'layers', diffId.slice(7), 'layer.json'));
      const layersBefore = storeSnapshot(d()).layers;
      const recs = await pullOk(d(), `${host}/zstd-plus:latest`);
      assert.deepEqual(layerRecords(recs, short(zstdPlus.layers[0]!.digest)).map((r) => r.status), ['Already exists']);
      assertSubsequence(layerRecords(recs, short(zstdPlus.layers[1]!.digest)).map((r) => r.status!), ['Pulling fs layer', 'Pull complete'], 'new layer');
      const again = lstatSync(join(d().dataRoot, 'layers', diffId.slice(7), 'layer.json'));
      assert.equal(again.ino, marker.ino, 'the base layer was not unpacked again');
      assert.equal(storeSnapshot(d()).layers.length, layersBefore.length + 1, 'one new layer dir');
      const img = (await d().request('GET', `/images/${host}/zstd-plus:latest/json`)).json();
      assert.equal(readFileSync(join(img.GraphDriver.Data.UpperDir, 'plus'), 'utf8'), 'plus\n');
    });

    it('concurrent pulls of one image: both succeed, one image, nothing half-done', async () => {
      await d().request('DELETE', `/images/${host}/five:latest`);
      const [a, b] = await Promise.all([pull(d(), `${host}/five:latest`), pull(d(), `${host}/five:latest`)]);
      for (const out of [a, b]) {
        assert.equal(out.status, 200, out.error);
        assert.equal(out.error, undefined, out.error);
      }
      const img = (await d().request('GET', `/images/${host}/five:latest/json`)).json();
      assert.equal(img.Id, fiveLayers.config.digest);
      for (const dir of [img.GraphDriver.Data.UpperDir, ...String(img.GraphDriver.Data.LowerDir).split(':')]) assert.ok(existsSync(dir), dir);
      assert.deepEqual(readdirSync(join(d().dataRoot, 'layers')).filter((n) => n.startsWith('.tmp')), []);
      for (let i = 0; i < 5; i++) {
        const dir = layerDirOf(d().dataRoot, chainOf(fiveLayers, i));
        assert.equal(readFileSync(join(dir, `five-${i + 1}`), 'utf8'), `layer ${i + 1}\n`);
      }
    });
  });

  describe('cancellation', () => {
    it('a client that hangs up mid-pull cancels it: no image, no layer dirs, no temp files', async () => {
      const { registry } = reg();
      const big = await bigImage(8);
      await pushImage(registry, 'big', 'latest', big);
      const slow = await startSlowProxy(registry.url);
      try {
        const snap = storeSnapshot(d());
        const ids = await imageIds(d());
        const res = await d().stream('POST', `/images/create${query({ fromImage: `${slow.host}/big`, tag: 'latest' })}`);
        assert.equal(res.statusCode, 200);
        await new Promise<void>((resolve) => {
          res.on('data', (chunk: Buffer) => {
            if (chunk.toString('utf8').includes('"Downloading"')) {
              res.destroy();
              resolve();
            }
          });
          res.on('close', () => resolve());
        });
        // The daemon notices the hang-up, stops the downloads and cleans up.
        const deadline = Date.now() + 10_000;
        let now = storeSnapshot(d());
        while (Date.now() < deadline && (now.layers.join() !== snap.layers.join() || now.ingest.length > 0)) {
          await new Promise((r) => setTimeout(r, 100));
          now = storeSnapshot(d());
        }
        assertStoreUnchanged(snap, now, 'cancelled pull');
        assert.deepEqual(await imageIds(d()), ids);
        assert.equal((await d().request('GET', '/_ping')).status, 200);
        await pullOk(d(), `${host}/big:latest`);
      } finally {
        await slow.stop();
      }
    });
  });
});

/** The chain id of layer i of an image (OCI rules). */
function chainOf(img: BuiltManifest, i: number): string {
  const diffIds = img.configJson.rootfs.diff_ids;
  let chain: string = diffIds[0]!;
  for (let k = 1; k <= i; k++) {
    chain = `sha256:${createHashHex(`${chain} ${diffIds[k]}`)}`;
  }
  return chain;
}

function createHashHex(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}
