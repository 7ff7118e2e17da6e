/**
 * The local image store through raw HTTP: list (fields and every filter), inspect and history by
 * every name dockerd accepts (tags, digests, full and short ids), tag, delete (untag vs delete,
 * conflicts, force) and prune. One daemon and one seeded registry for the whole file; the tests
 * run in order and later ones build on the images earlier ones pulled.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { pushImage, useDaemon, useSeededRegistry, type BuiltManifest } from '../harness/index.js';
import { datedImage, filtersParam, imageIds, listImages, pullOk, query, short, storeSnapshot, type ImageSummary } from './support.js';

describe('images', () => {
  const d = useDaemon();
  const reg = useSeededRegistry('open');

  const FIXTURE_CREATED_UNIX = Date.parse('2024-01-01T00:00:00Z') / 1000;
  const DATED = { old: '2020-01-01T00:00:00Z', mid: '2022-06-01T00:00:00Z', new: '2025-03-01T00:00:00Z' } as const;

  let host = '';
  let busyboxId = '';
  let layeredId = '';
  const dated: Record<keyof typeof DATED, BuiltManifest> = {} as never;

  function byId(list: ImageSummary[], id: string): ImageSummary | undefined {
    return list.find((i) => i.Id === id);
  }

  before(async () => {
    const { registry, seeded } = reg();
    host = registry.host;
    busyboxId = seeded.images.busybox.config.digest;
    layeredId = seeded.images.layered.config.digest;
    for (const [name, created] of Object.entries(DATED) as [keyof typeof DATED, string][]) {
      dated[name] = await datedImage(name, created);
      await pushImage(registry, 'dated', name, dated[name]);
    }
    await pullOk(d(), `${host}/busybox`, { tag: 'latest' });
    await pullOk(d(), `${host}/busybox:1.35`);
    await pullOk(d(), `${host}/layered`);
    for (const name of Object.keys(DATED)) await pullOk(d(), `${host}/dated`, { tag: name });
  });

  describe('GET /images/json', () => {
    it('lists every pulled image once, with dockerd fields', async () => {
      const list = await listImages(d());
      const ids = list.map((i) => i.Id);
      assert.equal(new Set(ids).size, ids.length, 'no duplicates');
      const expected = [busyboxId, layeredId, ...Object.values(dated).map((m) => m.config.digest)].sort();
      assert.deepEqual([...ids].sort(), expected);
      const bb = byId(list, busyboxId)!;
      assert.match(bb.Id, /^sha256:[a-f0-9]{64}$/);
      assert.equal(bb.ParentId, '');
      assert.deepEqual([...bb.RepoTags].sort(), [`${host}/busybox:1.35`, `${host}/busybox:latest`]);
      assert.deepEqual(bb.RepoDigests, [`${host}/busybox@${reg().seeded.digests.busybox}`]);
      assert.equal(bb.Created, FIXTURE_CREATED_UNIX);
      assert.equal(typeof bb.Size, 'number');
      assert.ok(bb.Size > 1000, `Size ${bb.Size}`);
      assert.equal(typeof bb.Containers, 'number');
      const layered = byId(list, layeredId)!;
      assert.deepEqual(layered.Labels, { 'org.berth.fixture': 'layered', 'org.berth.layers': '3' });
      assert.ok(layered.Size > bb.Size, 'three layers weigh more than one');
      assert.equal(byId(list, dated.old.config.digest)!.Created, Date.parse(DATED.old) / 1000);
    });

    it('the image id is the sha256 of the config blob', async () => {
      const { seeded } = reg();
      for (const img of [seeded.images.busybox, seeded.images.layered]) {
        const res = await d().request('GET', `/images/${img.config.digest}/json`);
        assert.equal(res.status, 200);
        assert.equal(res.json().Id, img.config.digest);
      }
    });

    it('API 1.43 adds VirtualSize; 1.44 and later do not', async () => {
      const old = (await d().request('GET', '/v1.43/images/json')).json<Record<string, unknown>[]>();
      assert.ok(old.every((i) => typeof i.VirtualSize === 'number'));
      const cur = (await d().request('GET', '/v1.44/images/json')).json<Record<string, unknown>[]>();
      assert.ok(cur.every((i) => !('VirtualSize' in i)));
    });

    const filterCases: { name: string; filters: Record<string, string[]>; expect: () => string[] }[] = [
      { name: 'label key=value', filters: { label: ['org.berth.fixture=layered'] }, expect: () => [layeredId] },
      { name: 'label key only', filters: { label: ['org.berth.dated'] }, expect: () => Object.values(dated).map((m) => m.config.digest) },
      { name: 'two labels are ANDed', filters: { label: ['org.berth.dated=yes', 'org.berth.fixture=dated-mid'] }, expect: () => [dated.mid.config.digest] },
      { name: 'label with no match', filters: { label: ['org.berth.fixture=nothing'] }, expect: () => [] },
      { name: 'reference by name', filters: { reference: [`${'HOST'}/busybox`] }, expect: () => [busyboxId] },
      { name: 'reference by name:tag', filters: { reference: [`${'HOST'}/dated:mid`] }, expect: () => [dated.mid.config.digest] },
      { name: 'reference glob on the tag', filters: { reference: [`${'HOST'}/dated:*`] }, expect: () => Object.values(dated).map((m) => m.config.digest) },
      { name: 'reference with no match', filters: { reference: ['nothing-here'] }, expect: () => [] },
      { name: 'dangling=true with nothing dangling', filters: { dangling: ['true'] }, expect: () => [] },
      { name: 'dangling=false', filters: { dangling: ['false'] }, expect: () => [busyboxId, layeredId, ...Object.values(dated).map((m) => m.config.digest)] },
      // before/since compare the images' creation times, as dockerd does.
      { name: 'before', filters: { before: [`${'HOST'}/dated:mid`] }, expect: () => [dated.old.config.digest] },
      { name: 'since', filters: { since: [`${'HOST'}/dated:mid`] }, expect: () => [busyboxId, layeredId, dated.new.config.digest] },
      { name: 'since and before', filters: { since: [`${'HOST'}/dated:old`], before: [`${'HOST'}/dated:new`] }, expect: () => [busyboxId, layeredId, dated.mid.config.digest] },
      { name: 'before by id', filters: { before: ['DATED_MID_ID'] }, expect: () => [dated.old.config.digest] },
      { name: 'until an RFC 3339 time', filters: { until: ['2023-01-01T00:00:00Z'] }, expect: () => [dated.old.config.digest, dated.mid.config.digest] },
      { name: 'until a Unix timestamp', filters: { until: [String(Date.parse('2021-01-01T00:00:00Z') / 1000)] }, expect: () => [dated.old.config.digest] },
      {
        name: 'until a Go duration back from now',
        // The cut-off lands just before 2024-06-01, whenever the test runs.
        filters: { until: [`${Math.floor((Date.now() - Date.parse('2024-06-01T00:00:00Z')) / 3600e3)}h30m`] },
        expect: () => [busyboxId, layeredId, dated.old.config.digest, dated.mid.config.digest],
      },
    ];
    for (const c of filterCases) {
      it(`filter: ${c.name}`, async () => {
        const raw = filtersParam(c.filters).replaceAll('HOST', host).replaceAll('DATED_MID_ID', short(dated.mid.config.digest));
        const list = await listImages(d(), { filters: raw });
        assert.deepEqual(list.map((i) => i.Id).sort(), c.expect().sort(), raw);
      });
    }

    it('reference filter keeps only the matching names in RepoTags', async () => {
      const list = await listImages(d(), { filters: filtersParam({ reference: [`${host}/busybox:1.35`] }) });
      assert.equal(list.length, 1);
      assert.deepEqual(list[0]!.RepoTags, [`${host}/busybox:1.35`]);
      assert.deepEqual(list[0]!.RepoDigests, [], 'the digest reference does not match busybox:1.35');
    });

    it('reference filter on a digest reference shows just that reference', async () => {
      const digestRef = `${host}/busybox@${reg().seeded.digests.busybox}`;
      const list = await listImages(d(), { filters: filtersParam({ reference: [digestRef] }) });
      assert.equal(list.length, 1);
      assert.equal(list[0]!.Id, busyboxId);
      assert.deepEqual(list[0]!.RepoTags, []);
      assert.deepEqual(list[0]!.RepoDigests, [digestRef]);
    });

    it('API < 1.41 takes the legacy filter=<name> as a reference filter; later versions ignore it', async () => {
      const old = (await d().request('GET', `/v1.40/images/json${query({ filter: `${host}/layered` })}`)).json<ImageSummary[]>();
      assert.deepEqual(old.map((i) => i.Id), [layeredId]);
      const cur = (await d().request('GET', `/v1.41/images/json${query({ filter: `${host}/layered` })}`)).json<ImageSummary[]>();
      assert.ok(cur.length > 1);
    });

    it('a filter naming a missing image for before/since is a 404', async () => {
      const res = await d().request('GET', `/images/json${query({ filters: filtersParam({ before: ['no-such-image:x'] }) })}`);
      assert.equal(res.status, 404);
      assert.equal(res.json().message, 'No such image: no-such-image:x');
    });
  });

  describe('GET /images/{name}/json', () => {
    const names: [string, () => string, () => string][] = [
      ['repo (latest implied)', () => `${host}/busybox`, () => busyboxId],
      ['repo:tag', () => `${host}/busybox:1.35`, () => busyboxId],
      ['repo@digest', () => `${host}/busybox@${reg().seeded.digests.busybox}`, () => busyboxId],
      ['full id', () => busyboxId, () => busyboxId],
      ['full id without sha256:', () => busyboxId.slice(7), () => busyboxId],
      ['short id', () => short(layeredId), () => layeredId],
      ['sha256: + short id', () => `sha256:${short(layeredId)}`, () => layeredId],
      ['tag on another repo', () => `${host}/dated:new`, () => dated.new.config.digest],
      ['percent-encoded name', () => encodeURIComponent(`${host}/busybox:1.35`), () => busyboxId],
      ['percent-encoded @ (docker-py)', () => `${host}/busybox%40${reg().seeded.digests.busybox}`, () => busyboxId],
    ];
    for (const [what, name, id] of names) {
      it(`by ${what}`, async () => {
        const res = await d().request('GET', `/images/${name()}/json`);
        assert.equal(res.status, 200, `${name()}: ${res.text()}`);
        assert.equal(res.json().Id, id());
      });
    }

    const missing: [string, () => string, () => string][] = [
      ['an unknown tag', () => `${host}/busybox:nope`, () => `No such image: ${host}/busybox:nope`],
      ['an unknown repo', () => 'nonexistent', () => 'No such image: nonexistent:latest'],
      ['a hex prefix that matches nothing', () => 'fedcba9876', () => 'No such image: fedcba9876:latest'],
      ['an unknown digest', () => `${host}/busybox@sha256:${'0'.repeat(64)}`, () => `No such image: ${host}/busybox@sha256:${'0'.repeat(64)}`],
      ['an unknown full id', () => `sha256:${'e'.repeat(64)}`, () => `No such image: sha256:${'e'.repeat(64)}`],
    ];
    for (const [what, name] of [
      ['uppercase', 'UPPER'],
      ['a malformed digest', 'busybox@sha256:xyz'],
      ['two @', 'busybox@@x'],
      ['an empty tag', 'busybox:'],
    ] as const) {
      it(`400 for a name that is not a reference (${what}), as dockerd parses it first`, async () => {
        for (const [method, path] of [
          ['GET', `/images/${encodeURIComponent(name)}/json`],
          ['GET', `/images/${encodeURIComponent(name)}/history`],
          ['DELETE', `/images/${encodeURIComponent(name)}`],
          ['POST', `/images/${encodeURIComponent(name)}/tag?repo=x&tag=y`],
        ] as const) {
          const res = await d().request(method, path);
          assert.equal(res.status, 400, `${method} ${path}: ${res.text()}`);
          assert.match(res.json().message, /invalid reference format/);
        }
      });
    }

    for (const [what, name, message] of missing) {
      it(`404 for ${what}`, async () => {
        const res = await d().request('GET', `/images/${name()}/json`);
        assert.equal(res.status, 404, res.text());
        assert.deepEqual(res.json(), { message: message() });
      });
    }

    it('shows the config, the rootfs and where the layers are', async () => {
      const res = await d().request('GET', `/images/${host}/layered/json`);
      const img = res.json();
      const { seeded } = reg();
      const cfg = seeded.images.layered.configJson;
      assert.deepEqual(img.RepoTags, [`${host}/layered:latest`]);
      assert.deepEqual(img.RepoDigests, [`${host}/layered@${seeded.digests.layered}`]);
      assert.equal(img.Os, 'linux');
      assert.equal(img.Architecture, cfg.architecture);
      assert.deepEqual(img.Config.Entrypoint, ['/bin/sh', '-c']);
      assert.deepEqual(img.Config.Cmd, ['cat /data/keep']);
      assert.equal(img.Config.WorkingDir, '/data');
      assert.deepEqual(img.Config.Env, cfg.config!.Env);
      assert.deepEqual(img.Config.ExposedPorts, { '8080/tcp': {}, '5353/udp': {} });
      assert.deepEqual(img.Config.Labels, { 'org.berth.fixture': 'layered', 'org.berth.layers': '3' });
      assert.deepEqual(img.RootFS, { Type: 'layers', Layers: cfg.rootfs.diff_ids });
      assert.equal(Date.parse(img.Created), Date.parse('2024-01-01T00:00:00Z'));
      assert.equal(typeof img.Size, 'number');
      assert.equal(img.GraphDriver.Name, 'overlay2');
      assert.equal(typeof img.GraphDriver.Data.UpperDir, 'string');
      assert.ok(existsSync(img.GraphDriver.Data.UpperDir), 'the top layer dir exists');
      const lowers = String(img.GraphDriver.Data.LowerDir).split(':');
      assert.equal(lowers.length, 2);
      for (const l of lowers) assert.ok(existsSync(l), l);
      assert.ok(img.Metadata, 'Metadata');
    });

    it('API 1.52 leaves out an empty Parent; older versions send ""', async () => {
      const cur = (await d().request('GET', `/v1.52/images/${host}/busybox/json`)).json();
      assert.equal('Parent' in cur, false);
      const old = (await d().request('GET', `/v1.51/images/${host}/busybox/json`)).json();
      assert.equal(old.Parent, '');
    });
  });

  describe('GET /images/{name}/history', () => {
    it('lists the config history newest first, with layer sizes', async () => {
      const res = await d().request('GET', `/images/${host}/layered/history`);
      assert.equal(res.status, 200);
      const hist = res.json<{ Id: string; Created: number; CreatedBy: string; Tags: string[] | null; Size: number; Comment: string }[]>();
      const cfgHist = reg().seeded.images.layered.configJson.history!;
      assert.equal(hist.length, cfgHist.length);
      assert.deepEqual(hist.map((h) => h.CreatedBy), [...cfgHist].reverse().map((h) => h.created_by));
      assert.equal(hist[0]!.Id, layeredId);
      assert.deepEqual(hist[0]!.Tags, [`${host}/layered:latest`]);
      for (const h of hist.slice(1)) assert.equal(h.Id, '<missing>');
      for (const h of hist) assert.equal(h.Created, FIXTURE_CREATED_UNIX);
      // WORKDIR and ENTRYPOINT are empty layers; the busybox layer is the big one.
      assert.equal(hist[0]!.Size, 0);
      assert.equal(hist[1]!.Size, 0);
      assert.ok(hist[4]!.Size > 100_000, `busybox layer size ${hist[4]!.Size}`);
      assert.ok(hist[3]!.Size > 0);
    });

    it('works by short id and 404s for a missing image', async () => {
      assert.equal((await d().request('GET', `/images/${short(busyboxId)}/history`)).status, 200);
      const res = await d().request('GET', '/images/no-such-image/history');
      assert.equal(res.status, 404);
      assert.deepEqual(res.json(), { message: 'No such image: no-such-image:latest' });
    });
  });

  describe('POST /images/{name}/tag', () => {
    const cases: { what: string; source: () => string; repo: () => string; tag?: string; shows: () => string }[] = [
      { what: 'repo and tag', source: () => `${host}/busybox`, repo: () => 'berth-test/tagged', tag: 'v1', shows: () => 'berth-test/tagged:v1' },
      { what: 'repo only (latest)', source: () => `${host}/busybox:1.35`, repo: () => 'berth-test/tagged', shows: () => 'berth-test/tagged:latest' },
      { what: 'repo:tag in repo', source: () => short(busyboxId), repo: () => 'berth-test/tagged:v2', shows: () => 'berth-test/tagged:v2' },
      { what: 'a registry host in repo', source: () => busyboxId, repo: () => `${host}/copy`, tag: 'x', shows: () => `${host}/copy:x` },
      { what: 'a docker.io name (shown familiar)', source: () => `${host}/busybox@${reg().seeded.digests.busybox}`, repo: () => 'docker.io/library/bbcopy', tag: 't', shows: () => 'bbcopy:t' },
    ];
    for (const c of cases) {
      it(`${c.what} → 201 and the new name resolves`, async () => {
        const res = await d().request('POST', `/images/${c.source()}/tag${query({ repo: c.repo(), tag: c.tag })}`);
        assert.equal(res.status, 201, res.text());
        const img = await d().request('GET', `/images/${c.shows()}/json`);
        assert.equal(img.status, 200);
        assert.equal(img.json().Id, busyboxId);
        assert.ok(img.json().RepoTags.includes(c.shows()), JSON.stringify(img.json().RepoTags));
      });
    }

    it('moving a tag to another image takes it from the first', async () => {
      assert.equal((await d().request('POST', `/images/${host}/busybox/tag${query({ repo: 'berth-test/moving', tag: '1' })}`)).status, 201);
      assert.equal((await d().request('POST', `/images/${host}/layered/tag${query({ repo: 'berth-test/moving', tag: '1' })}`)).status, 201);
      assert.equal((await d().request('GET', '/images/berth-test/moving:1/json')).json().Id, layeredId);
      const bb = (await d().request('GET', `/images/${busyboxId}/json`)).json();
      assert.equal(bb.RepoTags.includes('berth-test/moving:1'), false);
    });

    const bad: { what: string; path: () => string; status: number; message?: RegExp }[] = [
      { what: 'missing source', path: () => `/images/no-such-image/tag${query({ repo: 'x', tag: 'y' })}`, status: 404, message: /^No such image: no-such-image:latest$/ },
      { what: 'no repo', path: () => `/images/${host}/busybox/tag`, status: 400 },
      { what: 'uppercase repo', path: () => `/images/${host}/busybox/tag${query({ repo: 'Upper', tag: 'x' })}`, status: 400, message: /invalid reference format/ },
      { what: 'bad tag', path: () => `/images/${host}/busybox/tag${query({ repo: 'ok', tag: '-bad' })}`, status: 400, message: /invalid/ },
      { what: 'a digest as repo', path: () => `/images/${host}/busybox/tag${query({ repo: `ok@sha256:${'a'.repeat(64)}` })}`, status: 400 },
      { what: 'a 64-hex repo', path: () => `/images/${host}/busybox/tag${query({ repo: 'a'.repeat(64) })}`, status: 400 },
    ];
    for (const c of bad) {
      it(`${c.what} → ${c.status}`, async () => {
        const res = await d().request('POST', c.path());
        assert.equal(res.status, c.status, res.text());
        if (c.message) assert.match(res.json().message, c.message);
      });
    }

    it('publishes tag events', async () => {
      const since = Date.now() / 1000 - 1;
      assert.equal((await d().request('POST', `/images/${host}/busybox/tag${query({ repo: 'berth-test/evented', tag: 'e' })}`)).status, 201);
      const res = await d().request('GET', `/events${query({ since: since.toFixed(3), until: (Date.now() / 1000 + 0.5).toFixed(3), filters: filtersParam({ type: ['image'] }) })}`);
      const events = res.text().split('\n').filter(Boolean).map((l) => JSON.parse(l));
      const tag = events.find((e) => e.Action === 'tag' && e.Actor.Attributes.name === 'berth-test/evented:e');
      assert.ok(tag, JSON.stringify(events));
      assert.equal(tag.Type, 'image');
      assert.equal(tag.Actor.ID, busyboxId);
    });
  });

  describe('DELETE /images/{name}', () => {
    it('by one of several tags only untags', async () => {
      const res = await d().request('DELETE', `/images/${host}/busybox:1.35`);
      assert.equal(res.status, 200, res.text());
      assert.deepEqual(res.json(), [{ Untagged: `${host}/busybox:1.35` }]);
      const img = (await d().request('GET', `/images/${busyboxId}/json`)).json();
      assert.equal(img.RepoTags.includes(`${host}/busybox:1.35`), false);
      assert.ok(img.RepoTags.includes(`${host}/busybox:latest`));
    });

    it('by id while several repositories name it → 409 unless forced', async () => {
      const res = await d().request('DELETE', `/images/${short(busyboxId)}`);
      assert.equal(res.status, 409, res.text());
      assert.equal(res.json().message, `conflict: unable to delete ${short(busyboxId)} (must be forced) - image is referenced in multiple repositories`);
      assert.equal((await d().request('GET', `/images/${busyboxId}/json`)).status, 200, 'still there');
    });

    it('a digest reference untags just that reference', async () => {
      // A second image with a tag and a digest reference in the same repository.
      const digestRef = `${host}/dated@${dated.old.digest}`;
      const res = await d().request('DELETE', `/images/${digestRef}`);
      assert.equal(res.status, 200, res.text());
      assert.deepEqual(res.json(), [{ Untagged: digestRef }]);
      const img = (await d().request('GET', `/images/${host}/dated:old/json`)).json();
      assert.deepEqual(img.RepoDigests, []);
    });

    it('the last tag: untag, then delete the image and its own layers', async () => {
      const id = dated.mid.config.digest;
      const chainId = dated.mid.configJson.rootfs.diff_ids[0]!; // one layer: chain id = diff id
      const layerDir = join(d().dataRoot, 'layers', chainId.slice(7));
      assert.ok(existsSync(layerDir), 'layer dir before');
      const res = await d().request('DELETE', `/images/${host}/dated:mid`);
      assert.equal(res.status, 200, res.text());
      assert.deepEqual(res.json(), [
        { Untagged: `${host}/dated:mid` },
        { Untagged: `${host}/dated@${dated.mid.digest}` },
        { Deleted: id },
        { Deleted: chainId },
      ]);
      assert.equal((await d().request('GET', `/images/${id}/json`)).status, 404);
      assert.equal(existsSync(layerDir), false, 'layer dir removed');
    });

    it('shared layers stay while another image uses them', async () => {
      // berth-test/moving:1 and layered:latest name the layered image; busybox shares its base layer.
      const baseChain = reg().seeded.images.busybox.configJson.rootfs.diff_ids[0]!;
      const baseDir = join(d().dataRoot, 'layers', baseChain.slice(7));
      const res = await d().request('DELETE', `/images/${layeredId}?force=1`);
      assert.equal(res.status, 200, res.text());
      const items = res.json<{ Untagged?: string; Deleted?: string }[]>();
      assert.ok(items.some((i) => i.Untagged === `${host}/layered:latest`));
      assert.ok(items.some((i) => i.Untagged === 'berth-test/moving:1'));
      assert.ok(items.some((i) => i.Deleted === layeredId));
      // The two layered-only layers go, the busybox base stays for busybox.
      assert.equal(items.filter((i) => i.Deleted && i.Deleted !== layeredId).length, 2, JSON.stringify(items));
      assert.equal(items.some((i) => i.Deleted === baseChain), false);
      assert.ok(existsSync(baseDir), 'shared base layer kept');
      assert.equal((await d().request('GET', `/images/${layeredId}/json`)).status, 404);
      const busybox = await d().request('GET', `/images/${busyboxId}/json`);
      assert.equal(busybox.status, 200);
    });

    const missing: [string, string, number][] = [
      ['no-such-image', 'No such image: no-such-image:latest', 404],
      [`sha256:${'f'.repeat(64)}`, `No such image: sha256:${'f'.repeat(64)}`, 404],
    ];
    for (const [name, message, status] of missing) {
      it(`${name} → ${status}`, async () => {
        const res = await d().request('DELETE', `/images/${name}`);
        assert.equal(res.status, status);
        assert.deepEqual(res.json(), { message });
      });
    }

    it('409 while a container uses the image, unless forced (skipped without containers)', async (t) => {
      const create = await d().request('POST', `/containers/create${query({ name: `berth-img-user-${process.pid}` })}`, {
        body: { Image: `${host}/dated:new`, Cmd: ['true'] },
      });
      if (create.status === 404 && create.json().message === 'page not found') {
        t.skip('POST /containers/create is not served by this daemon');
        return;
      }
      assert.equal(create.status, 201, create.text());
      const cid = create.json().Id as string;
      try {
        const id = dated.new.config.digest;
        const res = await d().request('DELETE', `/images/${id}`);
        assert.equal(res.status, 409, res.text());
        assert.equal(res.json().message, `conflict: unable to delete ${short(id)} (must be forced) - image is being used by stopped container ${cid.slice(0, 12)}`);
        const byName = await d().request('DELETE', `/images/${host}/dated:new`);
        assert.equal(byName.status, 409, byName.text());
        const list = await listImages(d());
        assert.equal(byId(list, id)!.Containers, 1);
      } finally {
        await d().request('DELETE', `/containers/${cid}?force=1`);
      }
    });
  });

  describe('local parents (commit)', () => {
    /** Commits a new container made from `image`; the container is removed again. */
    async function commitFrom(image: string, params: Record<string, string> = {}): Promise<string> {
      const create = await d().request('POST', `/containers/create${query({ name: `berth-commit-${process.pid}-${Math.random().toString(16).slice(2, 8)}` })}`, {
        body: { Image: image, Cmd: ['true'] },
      });
      assert.equal(create.status, 201, create.text());
      const cid = create.json().Id as string;
      try {
        const res = await d().request('POST', `/commit${query({ container: cid, ...params })}`);
        assert.equal(res.status, 201, res.text());
        return res.json().Id as string;
      } finally {
        await d().request('DELETE', `/containers/${cid}?force=1`);
      }
    }

    let parent = '';
    let child = '';
    it('set-up: an untagged image with a tagged child (skipped without /commit)', async (t) => {
      const probe = await d().request('POST', '/commit');
      if (probe.status === 404 && probe.json().message === 'page not found') return t.skip('POST /commit is not served by this daemon');
      parent = await commitFrom(`${host}/busybox:latest`);
      child = await commitFrom(parent, { repo: 'berth-test/child', tag: '1' });
      assert.match(parent, /^sha256:[a-f0-9]{64}$/);
    });

    it('the untagged parent is hidden from the list, shown with all=1; ParentId links them', async (t) => {
      if (!parent) return t.skip('no /commit');
      const top = await listImages(d());
      assert.ok(byId(top, child), 'the child is listed');
      assert.equal(byId(top, parent), undefined, 'the untagged parent is not');
      const dangling = await listImages(d(), { filters: filtersParam({ dangling: ['true'] }) });
      assert.equal(byId(dangling, parent), undefined, 'an image with children is not dangling');
      const all = await listImages(d(), { all: '1' });
      assert.equal(byId(all, parent)?.ParentId, busyboxId);
      assert.equal(byId(all, child)?.ParentId, parent);
      assert.equal((await d().request('GET', `/v1.51/images/berth-test/child:1/json`)).json().Parent, parent);
      assert.equal((await d().request('GET', `/images/berth-test/child:1/json`)).json().Parent, parent);
    });

    it('deleting the parent is refused, even forced', async (t) => {
      if (!parent) return t.skip('no /commit');
      for (const force of ['0', '1']) {
        const res = await d().request('DELETE', `/images/${parent}?force=${force}`);
        assert.equal(res.status, 409, res.text());
        assert.equal(res.json().message, `conflict: unable to delete ${short(parent)} (cannot be forced) - image has dependent child images`);
      }
    });

    it('image prune leaves a parent with children alone', async (t) => {
      if (!parent) return t.skip('no /commit');
      const res = await d().request('POST', `/images/prune${query({ filters: filtersParam({ dangling: ['false'], label: ['no.such.label'] }) })}`);
      assert.equal(res.status, 200);
      await d().request('POST', '/images/prune');
      assert.equal((await d().request('GET', `/images/${parent}/json`)).status, 200);
    });

    it('deleting the child with noprune keeps the parent, which becomes dangling', async (t) => {
      if (!parent) return t.skip('no /commit');
      const res = await d().request('DELETE', '/images/berth-test/child:1?noprune=1');
      assert.equal(res.status, 200, res.text());
      const items = res.json<{ Untagged?: string; Deleted?: string }[]>();
      assert.deepEqual(items[0], { Untagged: 'berth-test/child:1' });
      assert.ok(items.some((i) => i.Deleted === child));
      assert.equal(items.some((i) => i.Deleted === parent), false);
      const dangling = await listImages(d(), { filters: filtersParam({ dangling: ['true'] }) });
      assert.ok(byId(dangling, parent), 'the parent is now dangling');
    });

    it('deleting a child without noprune removes its untagged parent too', async (t) => {
      if (!parent) return t.skip('no /commit');
      child = await commitFrom(parent, { repo: 'berth-test/child', tag: '2' });
      const res = await d().request('DELETE', '/images/berth-test/child:2');
      assert.equal(res.status, 200, res.text());
      const deleted = res.json<{ Deleted?: string }[]>().map((i) => i.Deleted);
      assert.ok(deleted.includes(child), JSON.stringify(deleted));
      assert.ok(deleted.includes(parent), JSON.stringify(deleted));
      assert.equal((await d().request('GET', `/images/${parent}/json`)).status, 404);
      assert.equal((await d().request('GET', `/images/${busyboxId}/json`)).status, 200, 'a tagged grandparent stays');
    });
  });

  describe('events', () => {
    it('pull, tag, untag and delete are published as dockerd names them', async () => {
      const since = ((Date.now() - 2) / 1000).toFixed(3);
      await pullOk(d(), `${host}/dated:mid`);
      const id = dated.mid.config.digest;
      assert.equal((await d().request('POST', `/images/${host}/dated:mid/tag${query({ repo: 'berth-test/ev', tag: 'x' })}`)).status, 201);
      assert.equal((await d().request('DELETE', `/images/${id}?force=1`)).status, 200);
      const res = await d().request('GET', `/events${query({ since, until: (Date.now() / 1000 + 0.5).toFixed(3), filters: filtersParam({ type: ['image'] }) })}`);
      const events = res.text().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { Action: string; Actor: { ID: string; Attributes: Record<string, string> } });
      const mine = events.filter((e) => e.Actor.ID === id || e.Actor.ID === `${host}/dated:mid`);
      const find = (action: string) => mine.find((e) => e.Action === action);
      assert.deepEqual(find('pull')?.Actor, { ID: `${host}/dated:mid`, Attributes: { name: `${host}/dated:mid` } });
      assert.deepEqual(find('tag')?.Actor, { ID: id, Attributes: { name: 'berth-test/ev:x' } });
      assert.deepEqual(find('untag')?.Actor, { ID: id, Attributes: { name: id } });
      assert.deepEqual(find('delete')?.Actor, { ID: id, Attributes: { name: id } });
      assert.deepEqual(mine.map((e) => e.Action), ['pull', 'tag', 'untag', 'untag', 'untag', 'delete']);
    });
  });

  describe('POST /images/prune', () => {
    it('dangling only by default: an image that lost its tags goes, tagged ones stay', async () => {
      // Move dated:old's only tag to another image: it keeps no tag and becomes dangling.
      const oldId = dated.old.config.digest;
      assert.equal((await d().request('POST', `/images/${host}/dated:new/tag${query({ repo: `${host}/dated`, tag: 'old' })}`)).status, 201);
      const dangling = await listImages(d(), { filters: filtersParam({ dangling: ['true'] }) });
      assert.deepEqual(dangling.map((i) => i.Id), [oldId]);
      assert.deepEqual(dangling[0]!.RepoTags, []);
      const before = await imageIds(d());
      const res = await d().request('POST', '/images/prune');
      assert.equal(res.status, 200, res.text());
      const body = res.json();
      assert.ok(body.ImagesDeleted.some((i: { Deleted?: string }) => i.Deleted === oldId), JSON.stringify(body));
      assert.ok(body.SpaceReclaimed > 0);
      assert.deepEqual(await imageIds(d()), before.filter((i) => i !== oldId));
    });

    it('nothing to prune → ImagesDeleted null', async () => {
      const res = await d().request('POST', '/images/prune');
      assert.deepEqual(res.json(), { ImagesDeleted: null, SpaceReclaimed: 0 });
    });

    it('dangling=false with a label prunes unused tagged images that match', async () => {
      const newId = dated.new.config.digest;
      const snap = storeSnapshot(d());
      const res = await d().request('POST', `/images/prune${query({ filters: filtersParam({ dangling: ['false'], label: ['org.berth.fixture=dated-new'] }) })}`);
      assert.equal(res.status, 200, res.text());
      const body = res.json();
      const deleted = body.ImagesDeleted.filter((i: { Deleted?: string }) => i.Deleted).map((i: { Deleted: string }) => i.Deleted);
      assert.ok(deleted.includes(newId), JSON.stringify(body));
      assert.ok(body.ImagesDeleted.some((i: { Untagged?: string }) => i.Untagged === `${host}/dated:new`));
      assert.equal((await d().request('GET', `/images/${newId}/json`)).status, 404);
      assert.equal((await d().request('GET', `/images/${busyboxId}/json`)).status, 200, 'busybox did not match the label');
      assert.equal(storeSnapshot(d()).layers.length, snap.layers.length - 1);
    });

    it('until keeps images created after the cut-off', async () => {
      await pullOk(d(), `${host}/dated`, { tag: 'mid' });
      await pullOk(d(), `${host}/dated`, { tag: 'new' });
      // Everything but the 2025 image was created before 2024-06.
      const res = await d().request('POST', `/images/prune${query({ filters: filtersParam({ dangling: ['false'], until: ['2023-01-01T00:00:00Z'], label: ['org.berth.dated'] }) })}`);
      assert.equal(res.status, 200, res.text());
      const deleted = (res.json().ImagesDeleted ?? []).filter((i: { Deleted?: string }) => i.Deleted).map((i: { Deleted: string }) => i.Deleted);
      assert.ok(deleted.includes(dated.mid.config.digest), JSON.stringify(res.json()));
      assert.equal(deleted.includes(dated.new.config.digest), false, 'created after until');
      assert.equal((await d().request('GET', `/images/${host}/dated:new/json`)).status, 200);
    });
  });
});
