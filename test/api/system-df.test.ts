/** GET /system/df (legacy and 1.52 forms) and `docker system prune [-a] [--volumes]` end to end, against what exists. */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useDaemon, useSeededRegistry } from '../harness/index.js';

describe('system df and prune', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let busybox = '';
  let layered = '';
  let running = '';
  let stopped = '';
  let anon = '';
  before(async () => {
    const d = daemon();
    ({ busybox, layered } = reg().seeded.refs);
    for (const ref of [busybox, layered]) assert.equal((await d.docker(['pull', '-q', ref])).code, 0);
    const s = await d.docker(['run', '--name', 'stopped', '-v', 'dfvol:/data', busybox, 'sh', '-c', 'head -c 100000 /dev/zero > /big']);
    assert.equal(s.code, 0, s.stderr);
    stopped = (await d.request('GET', '/containers/stopped/json')).json().Id;
    running = (await d.docker(['run', '-d', busybox, 'sleep', '1000'])).stdout.trim();
    const vol = (await d.request('GET', '/volumes/dfvol')).json();
    writeFileSync(join(vol.Mountpoint, 'f'), Buffer.alloc(50_000));
    anon = (await d.request('POST', '/volumes/create', { body: {} })).json().Name;
    writeFileSync(join((await d.request('GET', `/volumes/${anon}`)).json().Mountpoint, 'f'), Buffer.alloc(1000));
  });

  it('legacy form (API < 1.52): layers counted once, shared sizes, container and volume usage', async () => {
    const d = daemon();
    const df = (await d.request('GET', '/v1.50/system/df')).json();
    assert.equal(df.ImageUsage, undefined);
    const img = (ref: string) => df.Images.find((i: { RepoTags: string[] }) => i.RepoTags.includes(ref));
    const bb = img(busybox);
    const ly = img(layered);
    assert.equal(bb.Containers, 2);
    assert.equal(ly.Containers, 0);
    assert.equal(bb.SharedSize, bb.Size, 'busybox\'s only layer is layered\'s base layer too');
    assert.equal(ly.SharedSize, bb.Size);
    assert.equal(df.LayersSize, ly.Size, 'the shared layer is counted once');
    const sc = df.Containers.find((c: { Id: string }) => c.Id === stopped);
    assert.ok(sc.SizeRw >= 100_000 && sc.SizeRw < 200_000, String(sc.SizeRw));
    assert.equal(sc.SizeRootFs, sc.SizeRw + bb.Size);
    assert.deepEqual(sc.Mounts.map((m: { Name: string }) => m.Name), ['dfvol']);
    const vol = (n: string) => df.Volumes.find((v: { Name: string }) => v.Name === n).UsageData;
    assert.deepEqual(vol('dfvol'), { Size: 50_000, RefCount: 1 });
    assert.deepEqual(vol(anon), { Size: 1000, RefCount: 0 });
    assert.deepEqual(df.BuildCache, []);

    const cli = await d.docker(['system', 'df', '--format', '{{json .}}']);
    assert.equal(cli.code, 0, cli.stderr);
    const rows = Object.fromEntries(cli.stdout.trim().split('\n').map((l) => JSON.parse(l)).map((r) => [r.Type, r]));
    assert.equal(rows.Images.TotalCount, '2');
    assert.equal(rows.Images.Active, '1');
    assert.equal(rows.Containers.TotalCount, '2');
    assert.equal(rows.Containers.Active, '1');
    assert.equal(rows['Local Volumes'].TotalCount, '2');
    assert.equal(rows['Local Volumes'].Active, '1');
    assert.equal(rows['Local Volumes'].Size, '51kB');
    assert.match(rows['Local Volumes'].Reclaimable, /^1kB/);
  });

  it('API 1.52 form: per-type *Usage, the type filter, verbose drops the legacy fields', async () => {
    const d = daemon();
    const df = (await d.request('GET', '/v1.52/system/df?type=volume&type=container')).json();
    assert.deepEqual(Object.keys(df).sort(), ['ContainerUsage', 'Containers', 'VolumeUsage', 'Volumes']);
    assert.deepEqual({ ...df.VolumeUsage, Items: undefined }, { ActiveCount: 1, TotalCount: 2, Reclaimable: 1000, TotalSize: 51_000, Items: undefined });
    assert.equal(df.ContainerUsage.ActiveCount, 1);
    assert.equal(df.ContainerUsage.TotalCount, 2);
    assert.ok(df.ContainerUsage.Reclaimable >= 100_000);
    const v = (await d.request('GET', '/v1.52/system/df?type=image&verbose=1')).json();
    assert.deepEqual(Object.keys(v), ['ImageUsage']);
    assert.equal(v.ImageUsage.TotalCount, 2);
    assert.equal(v.ImageUsage.ActiveCount, 1);
    assert.equal(v.ImageUsage.Items.length, 2);
    const bad = await d.request('GET', '/v1.52/system/df?type=bogus');
    assert.equal(bad.status, 400);
    assert.equal(bad.json().message, 'unknown object type: bogus');
  });

  it('docker system prune removes stopped containers and unused networks, --volumes anonymous volumes, -a unused images; nothing in use', async () => {
    const d = daemon();
    assert.equal((await d.docker(['network', 'create', 'unusednet'])).code, 0);
    assert.equal((await d.docker(['volume', 'create', 'named-unused'])).code, 0);
    const p1 = await d.docker(['system', 'prune', '-f']);
    assert.equal(p1.code, 0, p1.stderr);
    assert.match(p1.stdout, new RegExp(stopped));
    assert.match(p1.stdout, /unusednet/);
    assert.equal((await d.request('GET', `/containers/${running}/json`)).status, 200);
    assert.equal((await d.request('GET', '/volumes/dfvol')).status, 200, 'volumes stay without --volumes');
    assert.equal((await d.request('GET', `/volumes/${anon}`)).status, 200);

    const p2 = await d.docker(['system', 'prune', '-f', '-a', '--volumes']);
    assert.equal(p2.code, 0, p2.stderr);
    assert.equal((await d.request('GET', `/volumes/${anon}`)).status, 404, 'the anonymous volume went');
    assert.equal((await d.request('GET', '/volumes/dfvol')).status, 200, 'named volumes stay (API >= 1.42)');
    assert.equal((await d.request('GET', '/volumes/named-unused')).status, 200);
    const tags = (await d.request('GET', '/images/json')).json().flatMap((i: { RepoTags: string[] }) => i.RepoTags);
    assert.deepEqual(tags, [busybox], 'the unused image went, the one a running container uses stayed');
    assert.equal((await d.request('GET', `/containers/${running}/json`)).json().State.Running, true);
    assert.equal((await d.request('POST', '/build/prune')).json().SpaceReclaimed, 0);
    await d.docker(['rm', '-f', running]);
  });
});
