/**
 * What the daemon acknowledged survives a kill -9, and a pull killed at any point leaves either no
 * image or a complete one, with pulling again finishing the job. berthd is SIGKILLed at stream
 * milestones (first record, first download, first finished layer, the Digest line) and after random
 * delays, restarted on the same data root, and checked.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { bigImage, pushImage, useDaemon, useSeededRegistry, type BuiltManifest, type TestDaemon } from '../harness/index.js';
import { pullOk, query, startSlowProxy } from './support.js';

/** Starts a pull and SIGKILLs berthd once `when` says so (given each record as it arrives) or after `afterMs`. */
async function pullAndKill(d: TestDaemon, fromImage: string, when: { record?: (r: { status?: string }) => boolean; afterMs?: number }): Promise<string[]> {
  const seen: string[] = [];
  const res = await d.stream('POST', `/images/create${query({ fromImage })}`);
  let killed = false;
  const kill = () => {
    if (killed) return;
    killed = true;
    void d.kill9();
  };
  const timer = when.afterMs !== undefined ? setTimeout(kill, when.afterMs) : undefined;
  let buf = '';
  await new Promise<void>((resolve) => {
    res.on('data', (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      let i: number;
      while ((i = buf.indexOf('\r\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (!line) continue;
        const rec = JSON.parse(line) as { status?: string };
        seen.push(rec.status ?? '?');
        if (when.record?.(rec)) kill();
      }
    });
    res.on('error', () => resolve());
    res.on('close', () => resolve());
  });
  if (timer) clearTimeout(timer);
  // The stream may have ended before the kill fired: kill anyway, that is a point too.
  kill();
  while (d.running) await new Promise((r) => setTimeout(r, 20));
  return seen;
}

/** No image, or one whose every layer is whole on disk; and no half-done files are visible. */
async function assertNoneOrComplete(d: TestDaemon, ref: string, img: BuiltManifest, context: string): Promise<'absent' | 'complete'> {
  const res = await d.request('GET', `/images/${ref}/json`);
  const layersDir = join(d.dataRoot, 'layers');
  assert.deepEqual(readdirSync(layersDir).filter((n) => n.startsWith('.tmp')), [], `${context}: temp dirs left after restart`);
  assert.deepEqual(existsSync(join(d.dataRoot, 'ingest')) ? readdirSync(join(d.dataRoot, 'ingest')) : [], [], `${context}: ingest files left`);
  for (const n of readdirSync(layersDir)) {
    assert.ok(existsSync(join(layersDir, n, 'layer.json')), `${context}: visible layer ${n} has no layer.json`);
  }
  if (res.status === 404) {
    const list = (await d.request('GET', '/images/json')).json<{ Id: string }[]>();
    assert.equal(list.some((i) => i.Id === img.config.digest), false, `${context}: listed but not inspectable`);
    return 'absent';
  }
  assert.equal(res.status, 200, `${context}: ${res.text()}`);
  const info = res.json();
  assert.equal(info.Id, img.config.digest);
  assert.deepEqual(info.RootFS.Layers, img.configJson.rootfs.diff_ids);
  const dirs = [info.GraphDriver.Data.UpperDir, ...String(info.GraphDriver.Data.LowerDir).split(':')] as string[];
  assert.equal(dirs.length, 3);
  for (const dir of dirs) assert.ok(existsSync(dir), `${context}: layer dir ${dir} missing`);
  // Every big part is there with its full size: the image is whole.
  for (let i = 1; i <= 3; i++) {
    const holder = dirs.find((dir) => existsSync(join(dir, 'big', `part${i}.bin`)));
    assert.ok(holder, `${context}: big/part${i}.bin in no layer`);
    assert.ok(statSync(join(holder!, 'big', `part${i}.bin`)).size > 0);
  }
  return 'complete';
}

describe('durability', () => {
  const d = useDaemon();
  const reg = useSeededRegistry('open');
  let big: BuiltManifest;
  let host = '';

  before(async () => {
    big = await bigImage(12);
    host = reg().registry.host;
    await pushImage(reg().registry, 'big', 'latest', big);
  });

  it('a tag acknowledged is there after kill -9 and restart', async () => {
    await pullOk(d(), `${host}/busybox:latest`);
    const res = await d().request('POST', `/images/${host}/busybox:latest/tag${query({ repo: 'durable/tag', tag: 'kept' })}`);
    assert.equal(res.status, 201);
    await d().kill9();
    await d().restart();
    const img = await d().request('GET', '/images/durable/tag:kept/json');
    assert.equal(img.status, 200, img.text());
    assert.equal(img.json().Id, reg().seeded.images.busybox.config.digest);
  });

  it('an untag acknowledged stays undone after kill -9', async () => {
    const res = await d().request('DELETE', '/images/durable/tag:kept');
    assert.equal(res.status, 200);
    await d().kill9();
    await d().restart();
    assert.equal((await d().request('GET', '/images/durable/tag:kept/json')).status, 404);
    assert.equal((await d().request('GET', `/images/${host}/busybox:latest/json`)).status, 200);
  });

  it('a pull acknowledged (stream ended) is complete after kill -9', async () => {
    await pullOk(d(), `${host}/layered:latest`);
    await d().kill9();
    await d().restart();
    const res = await d().request('GET', `/images/${host}/layered:latest/json`);
    assert.equal(res.status, 200);
    for (const dir of [res.json().GraphDriver.Data.UpperDir, ...String(res.json().GraphDriver.Data.LowerDir).split(':')]) {
      assert.ok(existsSync(join(dir, '..', 'layer.json')), dir);
    }
  });

  it('a delete acknowledged stays done after kill -9', async () => {
    const res = await d().request('DELETE', `/images/${host}/layered:latest`);
    assert.equal(res.status, 200);
    await d().kill9();
    await d().restart();
    assert.equal((await d().request('GET', `/images/${host}/layered:latest/json`)).status, 404);
  });

  const points: { what: string; when: { record?: (r: { status?: string }) => boolean; afterMs?: number } }[] = [
    { what: 'at the first record', when: { record: (r) => r.status?.startsWith('Pulling from') === true } },
    { what: 'when a layer finished downloading', when: { record: (r) => r.status === 'Download complete' } },
    { what: 'when a layer was unpacked', when: { record: (r) => r.status === 'Pull complete' } },
    { what: 'at the Digest line', when: { record: (r) => r.status?.startsWith('Digest:') === true } },
    ...[0, 1].map((i) => {
      const ms = Math.floor(Math.random() * 700);
      return { what: `after ${ms} ms (random ${i + 1})`, when: { afterMs: ms } };
    }),
  ];
  for (const p of points) {
    it(`pull killed ${p.what}: no image or a complete one, and pulling again finishes`, async () => {
      const ref = `${host}/big:latest`;
      // Start from nothing recorded for the image (earlier kills may have left reusable layers).
      await d().request('DELETE', `/images/${ref}?force=1`);
      const seen = await pullAndKill(d(), ref, p.when);
      await d().restart();
      const state = await assertNoneOrComplete(d(), ref, big, `killed ${p.what} after ${JSON.stringify(seen.slice(-3))}`);
      const recs = await pullOk(d(), ref);
      const last = recs[recs.length - 1]!.status!;
      if (state === 'complete') assert.equal(last, `Status: Image is up to date for ${ref}`);
      else assert.equal(last, `Status: Downloaded newer image for ${ref}`);
      assert.equal(await assertNoneOrComplete(d(), ref, big, 'after pulling again'), 'complete');
    });
  }

  it('SIGTERM during a pull: a prompt clean stop, and after restart no image or a complete one', async () => {
    const slow = await startSlowProxy(reg().registry.url);
    try {
      const ref = `${slow.host}/big:latest`;
      const res = await d().stream('POST', `/images/create${query({ fromImage: ref })}`);
      await new Promise<void>((resolve) => {
        res.on('data', (chunk: Buffer) => {
          if (chunk.toString('utf8').includes('"Downloading"')) resolve();
        });
        res.on('close', () => resolve());
        res.on('error', () => resolve());
      });
      const pid = d().pid;
      const started = Date.now();
      await d().stop();
      const took = Date.now() - started;
      assert.ok(took < 8000, `SIGTERM stop took ${took} ms`);
      assert.match(d().logs(), /berthd stopped/);
      assert.equal(d().pid, pid);
      await d().restart();
      await assertNoneOrComplete(d(), ref, big, 'after SIGTERM');
    } finally {
      await slow.stop();
    }
  });

  it('after all that the store is consistent: every image inspects, the list matches', async () => {
    const list = (await d().request('GET', '/images/json?all=1')).json<{ Id: string }[]>();
    for (const i of list) assert.equal((await d().request('GET', `/images/${i.Id}/json`)).status, 200, i.Id);
    assert.ok(list.some((i) => i.Id === big.config.digest));
  });
});
