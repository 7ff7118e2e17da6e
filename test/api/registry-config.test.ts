/**
 * Daemon registry settings: a --registry-mirror serves docker.io pulls (names normalized as dockerd
 * does, shown in familiar form), and --insecure-registry lets a named registry be reached over plain
 * HTTP while other non-loopback names still need TLS.
 */
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { after, before, describe, it } from 'node:test';
import { seedHubMirror, seedRegistry, startDaemon, startRegistry, withDaemonLogs, type TestDaemon, type TestRegistry } from '../harness/index.js';
import { pull, pullOk, query } from './support.js';

describe('registry configuration', () => {
  let mirror: TestRegistry;
  let insecure: TestRegistry;
  let other: TestRegistry;
  let d: TestDaemon;
  let hubBusybox = '';
  /** This host's name when it resolves to 127.0.0.1: a name that is not a loopback literal. */
  let name: string | undefined;

  before(async () => {
    [mirror, insecure, other] = await Promise.all([startRegistry('open'), startRegistry('open'), startRegistry('open')]);
    hubBusybox = (await seedHubMirror(mirror)).busybox;
    await Promise.all([seedRegistry(insecure), seedRegistry(other)]);
    const h = hostname();
    const addr = await lookup(h, { family: 4 }).catch(() => undefined);
    name = addr?.address === '127.0.0.1' && h !== 'localhost' ? h : undefined;
    const args = ['--registry-mirror', mirror.url];
    if (name) args.push('--insecure-registry', `${name}:${insecure.url.split(':').pop()}`);
    d = await startDaemon({ args });
  });
  after(async () => {
    await d?.teardown();
    await Promise.all([mirror?.stop(), insecure?.stop(), other?.stop()]);
  });

  describe('registry mirror', () => {
    it('`busybox` is pulled through the mirror and shown in familiar form', async () => {
      await withDaemonLogs(d, async () => {
        const recs = await pullOk(d, 'busybox');
        assert.deepEqual(recs[0], { status: 'Pulling from library/busybox', id: 'latest' });
        assert.deepEqual(recs.slice(-2), [{ status: `Digest: ${hubBusybox}` }, { status: 'Status: Downloaded newer image for busybox:latest' }]);
        assert.match(mirror.logs(), /\/v2\/library\/busybox\/manifests\/latest/);
        const img = (await d.request('GET', '/images/busybox/json')).json();
        assert.deepEqual(img.RepoTags, ['busybox:latest']);
        assert.deepEqual(img.RepoDigests, [`busybox@${hubBusybox}`]);
      });
    });

    const spellings = ['docker.io/library/busybox:1.35', 'library/busybox:1.35', 'index.docker.io/library/busybox:1.35', 'busybox:1.35'];
    for (const s of spellings) {
      it(`${s} names the same image`, async () => {
        const recs = await pullOk(d, s);
        assert.equal(recs[recs.length - 1]!.status!.replace(/^Status: (Downloaded newer image|Image is up to date) for /, ''), 'busybox:1.35');
        const res = await d.request('GET', `/images/${s}/json`);
        assert.equal(res.status, 200, res.text());
        assert.deepEqual([...res.json().RepoTags].sort(), ['busybox:1.35', 'busybox:latest']);
      });
    }

    it('the Go client form fromImage=docker.io/library/busybox&tag=latest', async () => {
      const recs = await pullOk(d, 'docker.io/library/busybox', { tag: 'latest' });
      assert.equal(recs[recs.length - 1]!.status, 'Status: Image is up to date for busybox:latest');
    });

    it('GET /images/json shows familiar names and filters on them', async () => {
      const res = await d.request('GET', `/images/json${query({ filters: JSON.stringify({ reference: ['busybox'] }) })}`);
      const list = res.json();
      assert.equal(list.length, 1);
      assert.deepEqual([...list[0].RepoTags].sort(), ['busybox:1.35', 'busybox:latest']);
    });

    it('a tag the mirror lacks: the mirror is asked, then Docker Hub; the pull fails without hanging', async () => {
      const before = mirror.logs().length;
      const out = await pull(d, 'busybox', { tag: 'no-such-tag', timeoutMs: 60_000 });
      assert.ok(out.status !== 200 || out.error !== undefined, out.raw);
      assert.ok(out.error && out.error.length > 0);
      assert.match(mirror.logs().slice(before), /\/v2\/library\/busybox\/manifests\/no-such-tag/);
      assert.equal((await d.request('GET', '/images/busybox:no-such-tag/json')).status, 404);
    });

    it('/info reports the mirror', async () => {
      const info = (await d.request('GET', '/info')).json();
      const mirrors = (info.RegistryConfig.Mirrors as string[]).map((m) => m.replace(/\/$/, ''));
      assert.deepEqual(mirrors, [mirror.url]);
      assert.deepEqual(info.RegistryConfig.IndexConfigs['docker.io'].Mirrors.map((m: string) => m.replace(/\/$/, '')), [mirror.url]);
    });

    it('mirrors serve docker.io only: other registries are asked directly', async () => {
      const before = mirror.logs().length;
      await pullOk(d, `${other.host}/busybox:latest`);
      assert.equal(mirror.logs().slice(before).includes('/v2/busybox/'), false);
    });
  });

  describe('insecure registries', () => {
    it('a registry named in --insecure-registry is reached over plain HTTP', async (t) => {
      if (!name) return t.skip(`${hostname()} does not resolve to 127.0.0.1 here`);
      const port = insecure.url.split(':').pop();
      const recs = await pullOk(d, `${name}:${port}/busybox:latest`);
      assert.match(recs[recs.length - 1]!.status!, new RegExp(`for ${name}:${port}/busybox:latest$`));
    });

    it('the same name on another port is not insecure: TLS is required and fails', async (t) => {
      if (!name) return t.skip(`${hostname()} does not resolve to 127.0.0.1 here`);
      const port = other.url.split(':').pop();
      const out = await pull(d, `${name}:${port}/busybox:latest`);
      assert.notEqual(out.status, 200, out.raw);
      assert.match(out.error ?? '', /https|tls|ssl|certificate|EPROTO|HTTP response/i);
    });

    it('loopback literals are insecure without configuration', async () => {
      await pullOk(d, `127.0.0.1:${other.url.split(':').pop()}/busybox:1.35`);
      await pullOk(d, `localhost:${other.url.split(':').pop()}/busybox:1.35`);
    });
  });
});
