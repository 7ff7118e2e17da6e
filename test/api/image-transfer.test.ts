/**
 * Images out and in through the real docker CLI and the Engine API: push to the harness's
 * registries (open, basic auth, token auth), then rmi and pull back (same digest, same image id,
 * the image runs); committed images pushed (their layer compressed once and kept); docker save of
 * two images and docker load back, a skopeo-made OCI archive loaded, hostile archives refused.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import tarStream from 'tar-stream';
import { buildLayer, makeTempDir, removeDir, run, useDaemon, useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { registryAuth } from './support.js';
import { runDockerPy } from '../harness/python.js';

interface Line {
  status?: string;
  id?: string;
  progressDetail?: { current?: number; total?: number };
  aux?: { Tag: string; Digest: string; Size: number };
  errorDetail?: { message: string };
}

async function pushApi(d: TestDaemon, name: string, tag: string | undefined, auth?: object): Promise<{ status: number; lines: Line[]; text: string }> {
  const headers: Record<string, string> = { 'X-Registry-Auth': registryAuth(auth ?? {}) };
  const res = await d.request('POST', `/v1.45/images/${name}/push${tag ? `?tag=${tag}` : ''}`, { headers });
  const text = res.text();
  const lines = res.status === 200 ? text.split('\r\n').filter(Boolean).map((l) => JSON.parse(l) as Line) : [];
  return { status: res.status, lines, text };
}

async function docker(d: TestDaemon, args: string[], input?: string): Promise<string> {
  const r = await d.docker(args, input === undefined ? {} : { input });
  assert.equal(r.code, 0, `docker ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

async function imageId(d: TestDaemon, name: string): Promise<string> {
  return (await docker(d, ['image', 'inspect', '-f', '{{.Id}}', name])).trim();
}

describe('push', () => {
  const d = useDaemon();
  const open = useSeededRegistry('open');
  const basic = useSeededRegistry('basic');
  const token = useSeededRegistry('token');

  it('pushes a pulled image back byte for byte: same digest, rmi, pull back, same id, runs', async () => {
    const { registry, seeded } = open();
    await docker(d(), ['pull', seeded.refs.busybox]);
    const id = await imageId(d(), seeded.refs.busybox);
    const target = `${registry.host}/pushed/busybox`;
    await docker(d(), ['tag', seeded.refs.busybox, `${target}:v1`]);
    const { status, lines } = await pushApi(d(), target, 'v1');
    assert.equal(status, 200);
    assert.equal(lines[0]!.status, `The push refers to repository [${target}]`);
    assert.ok(!lines.some((l) => l.errorDetail), JSON.stringify(lines));
    const layerId = lines.find((l) => l.status === 'Preparing')!.id!;
    assert.match(layerId, /^[0-9a-f]{12}$/);
    // The blob is in the registry under busybox: mounted, not uploaded again.
    assert.ok(lines.some((l) => l.id === layerId && l.status === 'Mounted from busybox'), JSON.stringify(lines));
    const aux = lines.find((l) => l.aux)!.aux!;
    assert.equal(aux.Tag, 'v1');
    assert.equal(aux.Digest, seeded.digests.busybox);
    assert.ok(lines.some((l) => l.status === `v1: digest: ${seeded.digests.busybox} size: ${aux.Size}`));

    await docker(d(), ['rmi', `${target}:v1`, seeded.refs.busybox]);
    const pulled = await docker(d(), ['pull', `${target}:v1`]);
    assert.match(pulled, new RegExp(seeded.digests.busybox));
    assert.equal(await imageId(d(), `${target}:v1`), id);
    assert.equal((await docker(d(), ['run', '--rm', `${target}:v1`, 'echo', 'pushed-ok'])).trim(), 'pushed-ok');
    await docker(d(), ['rmi', `${target}:v1`]);
  });

  it('uploads layers to an empty registry with Pushing progress, then "Layer already exists"; all tags without a tag', async () => {
    const { seeded } = open();
    const { registry: other } = basic();
    await docker(d(), ['pull', seeded.refs.layered]);
    const target = `${other.host}/copy/layered`;
    await docker(d(), ['tag', seeded.refs.layered, `${target}:a`]);
    await docker(d(), ['tag', seeded.refs.layered, `${target}:b`]);
    const auth = { username: other.username, password: other.password, serveraddress: other.host };
    const first = await pushApi(d(), target, undefined, auth);
    assert.ok(!first.lines.some((l) => l.errorDetail), first.text);
    const pushing = first.lines.filter((l) => l.status === 'Pushing');
    assert.ok(pushing.length > 0 && pushing.every((l) => typeof l.progressDetail?.current === 'number' && typeof l.progressDetail?.total === 'number'), first.text);
    assert.equal(first.lines.filter((l) => l.status === 'Pushed').length, 3);
    assert.deepEqual(first.lines.filter((l) => l.aux).map((l) => l.aux!.Tag), ['a', 'b']);
    // Tag b's layers were pushed with tag a.
    assert.equal(first.lines.filter((l) => l.status === 'Layer already exists').length, 3);
    assert.equal(first.lines.find((l) => l.aux)!.aux!.Digest, seeded.digests.layered);

    const again = await pushApi(d(), target, 'a', auth);
    assert.ok(again.lines.filter((l) => l.status === 'Preparing').every((p) => again.lines.some((l) => l.id === p.id && l.status === 'Layer already exists')), again.text);

    // Wrong credentials: the error comes in the stream.
    const denied = await pushApi(d(), target, 'a', { ...auth, password: 'wrong' });
    assert.ok(denied.status >= 400 || denied.lines.some((l) => l.errorDetail), denied.text);
    await docker(d(), ['rmi', `${target}:a`, `${target}:b`, seeded.refs.layered]);
  });

  it('pushes a committed image through the CLI after docker login to a token registry; pulls back and runs', async () => {
    const { seeded } = open();
    const { registry } = token();
    await docker(d(), ['login', registry.host, '-u', registry.username!, '--password-stdin'], registry.password);
    await docker(d(), ['pull', seeded.refs.busybox]);
    const name = `commit-src-${process.pid}`;
    await docker(d(), ['run', '--name', name, seeded.refs.busybox, 'sh', '-c', 'echo committed > /hello.txt']);
    const target = `${registry.host}/team/committed:v2`;
    await docker(d(), ['commit', name, target]);
    await docker(d(), ['rm', name]);
    const id = await imageId(d(), target);
    const out = await docker(d(), ['push', target]);
    assert.match(out, /The push refers to repository/);
    const digest = /v2: digest: (sha256:[0-9a-f]{64}) size: \d+/.exec(out)?.[1];
    assert.ok(digest, out);
    // The token asked for carried the push action.
    assert.ok(registry.tokenServer!.requests.some((r) => r.scopes.includes('repository:team/committed:pull,push')));

    // Pushing again finds the layer kept: nothing compressed or uploaded.
    const again = await docker(d(), ['push', target]);
    assert.match(again, new RegExp(`v2: digest: ${digest}`));

    await docker(d(), ['rmi', target, seeded.refs.busybox]);
    await docker(d(), ['pull', target]);
    assert.equal(await imageId(d(), target), id);
    assert.equal((await docker(d(), ['run', '--rm', target, 'cat', '/hello.txt'])).trim(), 'committed');
    assert.deepEqual(JSON.parse(await docker(d(), ['image', 'inspect', '-f', '{{json .RepoDigests}}', target])), [`${registry.host}/team/committed@${digest}`]);
    await docker(d(), ['rmi', target]);
  });

  it('an upload cut off mid-blob is taken up again (at the offset the registry reports, or anew) and the push completes', async () => {
    const { seeded } = open();
    const { registry: target } = basic();
    // A proxy in front of the basic registry that breaks the first PATCH after 64 KiB of body.
    let cut = 0;
    const proxy = createServer((req, res) => {
      const upstream = httpRequest({ host: '127.0.0.1', port: Number(target.host.split(':')[1]), method: req.method, path: req.url, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      if (req.method === 'PATCH' && cut === 0) {
        cut++;
        let seen = 0;
        req.on('data', (chunk: Buffer) => {
          seen += chunk.length;
          if (seen > 64 * 1024) {
            upstream.destroy();
            req.socket.destroy();
          }
        });
      }
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const host = `127.0.0.1:${(proxy.address() as { port: number }).port}`;
      await docker(d(), ['pull', seeded.refs.busybox]);
      await docker(d(), ['tag', seeded.refs.busybox, `${host}/resumed/busybox:r1`]);
      const r = await pushApi(d(), `${host}/resumed/busybox`, 'r1', { username: target.username, password: target.password, serveraddress: host });
      assert.equal(cut, 1);
      assert.ok(!r.lines.some((l) => l.errorDetail), r.text);
      assert.equal(r.lines.find((l) => l.aux)!.aux!.Digest, seeded.digests.busybox);
      await docker(d(), ['rmi', `${host}/resumed/busybox:r1`, seeded.refs.busybox]);
      await docker(d(), ['login', host, '-u', target.username!, '--password-stdin'], target.password);
      await docker(d(), ['pull', `${host}/resumed/busybox:r1`]);
      assert.equal((await docker(d(), ['run', '--rm', `${host}/resumed/busybox:r1`, 'echo', 'resumed'])).trim(), 'resumed');
      await docker(d(), ['rmi', `${host}/resumed/busybox:r1`]);
    } finally {
      proxy.close();
    }
  });

  it('reports a repository or tag that does not exist locally in the stream, after the repository line', async () => {
    const none = await pushApi(d(), '127.0.0.1:1/nothing', 'x');
    assert.equal(none.status, 200);
    assert.equal(none.lines[0]!.status, 'The push refers to repository [127.0.0.1:1/nothing]');
    assert.equal(none.lines.at(-1)!.errorDetail?.message, 'An image does not exist locally with the tag: 127.0.0.1:1/nothing');
    const { seeded } = open();
    await docker(d(), ['pull', seeded.refs.busybox]);
    const repo = seeded.refs.busybox.replace(/:latest$/, '');
    const noTag = await pushApi(d(), repo, 'missing');
    assert.equal(noTag.lines.at(-1)!.errorDetail?.message, `tag does not exist: ${repo}:missing`);
    const cli = await d().docker(['push', `${repo}:missing`]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /tag does not exist/);
  });
});

interface TarItem {
  name: string;
  data?: Buffer | string;
  type?: 'file' | 'symlink' | 'link' | 'directory' | 'character-device';
  linkname?: string;
}

/** A small archive in memory (test inputs only). */
async function makeTar(items: TarItem[]): Promise<Buffer> {
  const pack = tarStream.pack();
  for (const it of items) {
    if (it.type && it.type !== 'file') pack.entry({ name: it.name, type: it.type, linkname: it.linkname, size: 0 });
    else pack.entry({ name: it.name }, typeof it.data === 'string' ? Buffer.from(it.data) : (it.data ?? Buffer.alloc(0)));
  }
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

/** Names and sizes of a tar's entries (test reading of a saved archive). */
async function tarEntries(file: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  const extract = tarStream.extract();
  const fed = pipeline(createReadStream(file), extract as unknown as NodeJS.WritableStream);
  for await (const e of extract) {
    const chunks: Buffer[] = [];
    for await (const c of e as AsyncIterable<Buffer>) chunks.push(c);
    out.set(e.header.name, Buffer.concat(chunks));
  }
  await fed;
  return out;
}

function sha256(b: Buffer): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

/** A temp dir for the tests of one describe (archives written by the CLI), removed after them. */
function useScratchDir(): () => string {
  let dir = '';
  before(() => {
    dir = makeTempDir('imagesio');
  });
  after(() => removeDir(dir));
  return () => dir;
}

async function loadApi(d: TestDaemon, body: Buffer, quiet = false): Promise<{ status: number; text: string }> {
  const res = await d.request('POST', `/images/load?quiet=${quiet ? 1 : 0}`, { body, headers: { 'Content-Type': 'application/x-tar' } });
  return { status: res.status, text: res.text() };
}

describe('save and load', () => {
  const d = useDaemon();
  const open = useSeededRegistry('open');
  const scratch = useScratchDir();

  it('docker save of two images writes the Docker and OCI layouts with shared layers once; rmi; docker load brings both back', async () => {
    const { seeded } = open();
    await docker(d(), ['pull', seeded.refs.busybox]);
    await docker(d(), ['pull', seeded.refs.layered]);
    const ids = [await imageId(d(), seeded.refs.busybox), await imageId(d(), seeded.refs.layered)];
    const file = join(scratch(), 'two.tar');
    await docker(d(), ['save', '-o', file, seeded.refs.busybox, seeded.refs.layered]);
    const entries = await tarEntries(file);
    assert.equal(entries.get('oci-layout')?.toString(), '{"imageLayoutVersion": "1.0.0"}');
    const manifest = JSON.parse(entries.get('manifest.json')!.toString()) as { Config: string; RepoTags: string[]; Layers: string[] }[];
    assert.equal(manifest.length, 2);
    const index = JSON.parse(entries.get('index.json')!.toString()) as { manifests: { digest: string; annotations?: Record<string, string> }[] };
    assert.equal(index.manifests.length, 2);
    for (const m of index.manifests) assert.ok(entries.has(`blobs/sha256/${m.digest.slice(7)}`));
    const repos = JSON.parse(entries.get('repositories')!.toString()) as Record<string, Record<string, string>>;
    assert.equal(Object.keys(repos).length, 2);
    // Every blob is named by its digest; layered's first layer is busybox's and is there once.
    for (const [name, data] of entries) if (name.startsWith('blobs/sha256/') && data.length) assert.equal(sha256(data), `sha256:${name.slice(13)}`);
    const layers = manifest.flatMap((m) => m.Layers);
    assert.equal(new Set(layers).size, layers.length - 1);
    assert.deepEqual(manifest.map((m) => m.RepoTags[0]).sort(), [seeded.refs.busybox, seeded.refs.layered].sort());

    await docker(d(), ['rmi', seeded.refs.busybox, seeded.refs.layered]);
    const out = await docker(d(), ['load', '-i', file]);
    assert.match(out, new RegExp(`Loaded image: ${seeded.refs.busybox.replace(/[.]/g, '\\.')}`));
    assert.match(out, new RegExp(`Loaded image: ${seeded.refs.layered.replace(/[.]/g, '\\.')}`));
    assert.deepEqual([await imageId(d(), seeded.refs.busybox), await imageId(d(), seeded.refs.layered)], ids);
    assert.equal((await docker(d(), ['run', '--rm', '--entrypoint', 'sh', seeded.refs.layered, '-c', 'test -f /data/keep && test ! -e /etc/removeme && echo layered-ok'])).trim(), 'layered-ok');

    // The same archive gzipped, through the API with quiet: only the Loaded lines.
    await docker(d(), ['rmi', seeded.refs.layered]);
    const quiet = await loadApi(d(), gzipSync(readFileSync(file)), true);
    assert.equal(quiet.status, 200, quiet.text);
    assert.doesNotMatch(quiet.text, /Loading layer/);
    assert.match(quiet.text, /"stream":"Loaded image: /);
    assert.equal(await imageId(d(), seeded.refs.layered), ids[1]);
  });

  it('a committed image saves (its layer compressed once) and loads back by id when untagged', async () => {
    const { seeded } = open();
    await docker(d(), ['pull', seeded.refs.busybox]);
    const name = `save-src-${process.pid}`;
    await docker(d(), ['run', '--name', name, seeded.refs.busybox, 'sh', '-c', 'echo saved > /saved.txt']);
    const id = (await docker(d(), ['commit', name])).trim();
    await docker(d(), ['rm', name]);
    const res = await d().stream('GET', `/images/${id}/get`);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'application/x-tar');
    const chunks: Buffer[] = [];
    for await (const c of res as AsyncIterable<Buffer>) chunks.push(c);
    const archive = Buffer.concat(chunks);
    await docker(d(), ['rmi', id]);
    const loaded = await loadApi(d(), archive);
    assert.equal(loaded.status, 200);
    assert.match(loaded.text, new RegExp(`Loaded image ID: ${id}`));
    assert.match(loaded.text, /"status":"Loading layer"/);
    assert.equal((await docker(d(), ['run', '--rm', id, 'cat', '/saved.txt'])).trim(), 'saved');
    await docker(d(), ['rmi', id]);
  });

  it('loads an OCI archive made by skopeo', async () => {
    const { registry, seeded } = open();
    const file = join(scratch(), 'skopeo-oci.tar');
    const r = await run('skopeo', ['copy', '--src-tls-verify=false', `docker://${registry.host}/layered:latest`, `oci-archive:${file}:skopeo/layered:oci`], { timeoutMs: 60_000 });
    assert.equal(r.code, 0, r.stderr);
    const loaded = await loadApi(d(), readFileSync(file));
    assert.equal(loaded.status, 200, loaded.text);
    assert.match(loaded.text, /Loaded image: skopeo\/layered:oci/);
    await docker(d(), ['pull', seeded.refs.layered]);
    assert.equal(await imageId(d(), 'skopeo/layered:oci'), await imageId(d(), seeded.refs.layered));
    assert.equal((await docker(d(), ['run', '--rm', '--entrypoint', 'sh', 'skopeo/layered:oci', '-c', 'test -f /data/keep && echo oci-ok'])).trim(), 'oci-ok');
    await docker(d(), ['rmi', 'skopeo/layered:oci', seeded.refs.layered]);
  });

  it('refuses hostile archives: ../ and absolute names, escaping links, wrong digests; nothing written outside, nothing visible', async () => {
    const layer = await buildLayer([{ type: 'file', path: 'hello', content: 'hi\n' }], { compression: 'none' });
    const layerTar = readFileSync(layer.path);
    const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', config: {}, rootfs: { type: 'layers', diff_ids: [layer.diffId] } }));
    const cfgName = `${sha256(config).slice(7)}.json`;
    const good = [
      { name: 'layer.tar', data: layerTar },
      { name: cfgName, data: config },
    ];
    const manifest = (tag: string, layers = ['layer.tar']) => ({ name: 'manifest.json', data: JSON.stringify([{ Config: cfgName, RepoTags: [tag], Layers: layers }]) });
    const outside = join(scratch(), `escape-${process.pid}`);
    const before = (await docker(d(), ['images', '-q', '--no-trunc'])).trim();
    const cases: [string, TarItem[]][] = [
      ['../ name', [...good, { name: `../../../../../../..${outside}`, data: 'x' }, manifest('hostile/dotdot:1')]],
      ['absolute name', [...good, { name: outside, data: 'x' }, manifest('hostile/abs:1')]],
      ['escaping symlink', [...good, { name: 'evil', type: 'symlink', linkname: '../../../../../../../etc' }, manifest('hostile/link:1', ['evil/passwd'])]],
      ['absolute hardlink', [...good, { name: 'evil', type: 'link', linkname: '/etc/passwd' }, manifest('hostile/hard:1', ['evil'])]],
      ['device', [...good, { name: 'dev', type: 'character-device' }, manifest('hostile/dev:1')]],
      ['wrong layer digest', [{ name: 'layer.tar', data: Buffer.concat([layerTar.subarray(0, 600), Buffer.from('X'), layerTar.subarray(601)]) }, { name: cfgName, data: config }, manifest('hostile/digest:1')]],
      ['OCI blob not matching its name', [
        { name: 'oci-layout', data: '{"imageLayoutVersion": "1.0.0"}' },
        { name: 'index.json', data: JSON.stringify({ schemaVersion: 2, manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: sha256(Buffer.from('{}')), size: 2 }] }) },
        { name: `blobs/sha256/${sha256(Buffer.from('{}')).slice(7)}`, data: '{"x":1}' },
      ]],
    ];
    for (const [what, items] of cases) {
      const r = await loadApi(d(), await makeTar(items), true);
      // dockerd answers 200 and reports the failure in the stream.
      assert.equal(r.status, 200, what);
      assert.match(r.text, /"errorDetail":\{"message":"[^"]+/, what);
      assert.doesNotMatch(r.text, /Loaded image/, what);
      assert.equal(existsSync(outside), false, what);
    }
    assert.equal((await docker(d(), ['images', '-q', '--no-trunc'])).trim(), before);
    // The well-formed archive the hostile ones were built from loads.
    const ok = await loadApi(d(), await makeTar([...good, manifest('hostile/none:1')]));
    assert.match(ok.text, /Loaded image: hostile\/none:1/);
    // Loading another image under a name in use moves the name, saying so as dockerd does.
    const { seeded } = open();
    await docker(d(), ['pull', seeded.refs.busybox]);
    const oldId = await imageId(d(), seeded.refs.busybox);
    const moved = await loadApi(d(), await makeTar([...good, manifest(seeded.refs.busybox)]));
    assert.ok(moved.text.includes(`The image ${seeded.refs.busybox} already exists, renaming the old one with ID ${oldId} to empty string`), moved.text);
    assert.equal(await imageId(d(), seeded.refs.busybox), sha256(config));
    await docker(d(), ['rmi', 'hostile/none:1', seeded.refs.busybox, oldId]);
  });
});

describe('kept layer blobs', () => {
  const d = useDaemon();
  const open = useSeededRegistry('open');

  it('a pulled layer blob is kept while an image uses it, goes with the last image, and a stray one goes at start-up', async () => {
    const { seeded } = open();
    await docker(d(), ['pull', seeded.refs.busybox]);
    const blobs = join(d().dataRoot, 'blobs', 'sha256');
    const manifest = JSON.parse(readFileSync(join(blobs, seeded.digests.busybox.slice(7)), 'utf8')) as { layers: { digest: string }[] };
    const layerBlob = join(blobs, manifest.layers[0]!.digest.slice(7));
    assert.ok(existsSync(layerBlob));
    await docker(d(), ['rmi', seeded.refs.busybox]);
    assert.equal(existsSync(layerBlob), false);

    // What a pull killed after keeping its blob leaves behind; JSON documents stay.
    await d().stop();
    const stray = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3]);
    const strayPath = join(blobs, sha256(stray).slice(7));
    writeFileSync(strayPath, stray);
    const doc = Buffer.from('{"schemaVersion":2}');
    const docPath = join(blobs, sha256(doc).slice(7));
    writeFileSync(docPath, doc);
    await d().restart();
    assert.equal(existsSync(strayPath), false);
    assert.equal(existsSync(docPath), true);
  });
});

describe('import', () => {
  const d = useDaemon();
  const open = useSeededRegistry('open');
  const scratch = useScratchDir();

  it('docker import of a gzipped rootfs with changes and a message; the image runs with them', async () => {
    const { registry } = open();
    // A root file system: the busybox layer plus one file, gzipped.
    const exportRes = await (async () => {
      await docker(d(), ['pull', `${registry.host}/busybox:latest`]);
      const name = `export-src-${process.pid}`;
      await docker(d(), ['create', '--name', name, `${registry.host}/busybox:latest`]);
      const res = await d().request('GET', `/containers/${name}/export`);
      await docker(d(), ['rm', name]);
      return res.body;
    })();
    const file = join(scratch(), 'rootfs.tar.gz');
    writeFileSync(file, gzipSync(exportRes));
    const out = await docker(d(), ['import', '-m', 'from a test', '-c', 'ENV GREETING=hello', '-c', 'CMD ["sh", "-c", "echo $GREETING from $(pwd)"]', '-c', 'WORKDIR /tmp', '-c', 'LABEL a=b', '-c', 'EXPOSE 8080', file, 'imported/rootfs:v1']);
    const id = out.trim();
    assert.match(id, /^sha256:[0-9a-f]{64}$/);
    const inspect = JSON.parse(await docker(d(), ['image', 'inspect', 'imported/rootfs:v1']))[0] as { Id: string; Comment: string; Config: { Env: string[]; Cmd: string[]; WorkingDir: string; Labels: Record<string, string>; ExposedPorts: Record<string, object> }; RootFS: { Layers: string[] } };
    assert.equal(inspect.Id, id);
    assert.equal(inspect.Comment, 'from a test');
    assert.deepEqual(inspect.Config.Cmd, ['sh', '-c', 'echo $GREETING from $(pwd)']);
    assert.ok(inspect.Config.Env.includes('GREETING=hello'));
    assert.equal(inspect.Config.WorkingDir, '/tmp');
    assert.deepEqual(inspect.Config.Labels, { a: 'b' });
    assert.ok('8080/tcp' in inspect.Config.ExposedPorts);
    assert.equal(inspect.RootFS.Layers.length, 1);
    assert.equal((await docker(d(), ['run', '--rm', 'imported/rootfs:v1'])).trim(), 'hello from /tmp');
    const history = await docker(d(), ['history', '--format', '{{.Comment}}', 'imported/rootfs:v1']);
    assert.match(history, /from a test/);
  });

  it('docker export | import through the API (fromSrc=-), fromSrc=<url>, and a save of the imported image', async () => {
    const { registry } = open();
    await docker(d(), ['pull', `${registry.host}/busybox:latest`]);
    const name = `export-pipe-${process.pid}`;
    await docker(d(), ['run', '--name', name, `${registry.host}/busybox:latest`, 'sh', '-c', 'echo piped > /piped.txt']);
    const tar = (await d().request('GET', `/containers/${name}/export`)).body;
    await docker(d(), ['rm', name]);
    const res = await d().request('POST', '/images/create?fromSrc=-&repo=imported/pipe&tag=v2', { body: tar, headers: { 'Content-Type': 'application/x-tar' } });
    assert.equal(res.status, 200, res.text());
    const id = (JSON.parse(res.text().trim().split('\r\n').pop()!) as { status: string }).status;
    assert.equal(await imageId(d(), 'imported/pipe:v2'), id);
    assert.equal((await docker(d(), ['run', '--rm', 'imported/pipe:v2', 'cat', '/piped.txt'])).trim(), 'piped');

    // The CLI pipe itself: docker export | docker import -.
    await docker(d(), ['create', '--name', `${name}-2`, 'imported/pipe:v2', 'true']);
    const env = { ...process.env, DOCKER_HOST: `unix://${d().socket}`, DOCKER_CONFIG: scratch() };
    const piped = await run('sh', ['-c', `docker export ${name}-2 | docker import -c 'CMD ["cat", "/piped.txt"]' - imported/pipe-cli:v3`], { env, timeoutMs: 120_000 });
    assert.equal(piped.code, 0, piped.stderr);
    await docker(d(), ['rm', `${name}-2`]);
    assert.equal((await docker(d(), ['run', '--rm', 'imported/pipe-cli:v3'])).trim(), 'piped');
    // Bad changes and platforms are refused before the body is read. The body sent is only a head of
    // the tar: a client still writing megabytes when the refusal closes the connection gets EPIPE
    // instead of the answer (with dockerd too), which is not what these lines test.
    const head = tar.subarray(0, 16 * 1024);
    const badChange = await d().request('POST', `/images/create?fromSrc=-&changes=${encodeURIComponent('FROM busybox')}`, { body: head });
    assert.equal(badChange.status, 400, badChange.text());
    const badPlatform = await d().request('POST', '/images/create?fromSrc=-&platform=a/b/c/d', { body: head });
    assert.equal(badPlatform.status, 400, badPlatform.text());

    // The same tar from a URL.
    const server = createServer((_req, r) => {
      r.writeHead(200, { 'content-length': tar.length });
      r.end(tar);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/rootfs.tar`;
      const r2 = await d().request('POST', `/images/create?fromSrc=${encodeURIComponent(url)}&repo=imported/url`, { body: '' });
      assert.equal(r2.status, 200, r2.text());
      assert.equal((await docker(d(), ['run', '--rm', 'imported/url', 'cat', '/piped.txt'])).trim(), 'piped');
    } finally {
      server.close();
    }

    // An imported layer saves as the tar it came as, and loads back under the same id.
    const file = join(scratch(), 'imported.tar');
    await docker(d(), ['save', '-o', file, 'imported/pipe:v2']);
    await docker(d(), ['rmi', 'imported/pipe:v2']);
    await docker(d(), ['load', '-i', file]);
    assert.equal(await imageId(d(), 'imported/pipe:v2'), id);

    // A tar that is not one, and a hostile one: refused, nothing new.
    const before = (await docker(d(), ['images', '-q', '--no-trunc'])).trim();
    const bad = await d().request('POST', '/images/create?fromSrc=-&repo=imported/bad', { body: Buffer.from('not a tar at all, not even close'.repeat(40)) });
    assert.ok(bad.status >= 400 || /errorDetail/.test(bad.text()), bad.text());
    const hostile = await makeTar([{ name: '../../escape-import', data: 'x' }]);
    const h = await d().request('POST', '/images/create?fromSrc=-&repo=imported/hostile', { body: hostile });
    assert.ok(h.status >= 400 || /errorDetail/.test(h.text()), h.text());
    assert.equal((await docker(d(), ['images', '-q', '--no-trunc'])).trim(), before);
  });
});

describe('distribution, search and image events', () => {
  const d = useDaemon();
  const open = useSeededRegistry('open');
  const token = useSeededRegistry('token');

  it('GET /distribution/{name}/json: an index with its platforms, a manifest with its config platform, auth', async () => {
    const { registry, seeded } = open();
    const multi = await d().request('GET', `/v1.45/distribution/${registry.host}/multiarch:latest/json`);
    assert.equal(multi.status, 200, multi.text());
    const m = multi.json<{ Descriptor: { mediaType: string; digest: string; size: number }; Platforms: { architecture: string; os: string }[] }>();
    assert.equal(m.Descriptor.digest, seeded.digests.multiarch);
    assert.equal(m.Descriptor.mediaType, 'application/vnd.oci.image.index.v1+json');
    assert.deepEqual(m.Platforms.map((p) => p.architecture).sort(), ['amd64', 'arm64']);
    const single = await d().request('GET', `/distribution/${registry.host}/busybox/json`);
    const s = single.json<{ Descriptor: { mediaType: string; digest: string }; Platforms: { os: string }[] }>();
    assert.equal(s.Descriptor.digest, seeded.digests.busybox);
    assert.equal(s.Descriptor.mediaType, 'application/vnd.docker.distribution.manifest.v2+json');
    assert.equal(s.Platforms.length, 1);
    assert.equal(s.Platforms[0]!.os, 'linux');
    const missing = await d().request('GET', `/distribution/${registry.host}/nothing-here:latest/json`);
    assert.equal(missing.status, 404, missing.text());

    const t = token();
    const anon = await d().request('GET', `/distribution/${t.registry.host}/busybox/json`);
    assert.ok(anon.status === 401 || anon.status === 404 || anon.status === 403, anon.text());
    const authed = await d().request('GET', `/distribution/${t.registry.host}/busybox/json`, {
      headers: { 'X-Registry-Auth': registryAuth({ username: t.registry.username, password: t.registry.password, serveraddress: t.registry.host }) },
    });
    assert.equal(authed.status, 200, authed.text());
    assert.equal(authed.json<{ Descriptor: { digest: string } }>().Descriptor.digest, t.seeded.digests.busybox);
    const bad = await d().request('GET', '/distribution/UPPER/json');
    assert.equal(bad.status, 400);
  });

  it('GET /images/search answers as dockerd when no index answers: no v1 search, nothing listening, bad input', async () => {
    const { registry } = open();
    const noV1 = await d().request('GET', `/images/search?term=${registry.host}/busybox`);
    assert.equal(noV1.status, 500, noV1.text());
    assert.equal(noV1.json<{ message: string }>().message, 'unexpected status code 404');
    const closed = await d().request('GET', '/images/search?term=127.0.0.1:1/busybox');
    assert.equal(closed.status, 400, closed.text());
    assert.match(closed.json<{ message: string }>().message, /^invalid registry endpoint "http:\/\/127\.0\.0\.1:1\/v1\/"\. HTTPS attempt: .*\. HTTP attempt: Get "http:\/\/127\.0\.0\.1:1\/v1\/_ping": dial tcp 127\.0\.0\.1:1: connect: connection refused$/);
    const cli = await d().docker(['search', `${registry.host}/busybox`]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /unexpected status code 404/);
    for (const [q, re] of [
      ['term=a&limit=101', /limit 101 is outside the range of \[1, 100\]/],
      ['term=a&limit=x', /invalid limit specified/],
      ['term=http://a/b', /should not have a scheme/],
      [`term=a&filters=${encodeURIComponent('{"nope":["1"]}')}`, /invalid filter 'nope'/],
      [`term=a&filters=${encodeURIComponent('{"stars":["x"]}')}`, /invalid filter 'stars=x'/],
    ] as const) {
      const r = await d().request('GET', `/images/search?${q}`);
      assert.equal(r.status, 400, `${q}: ${r.text()}`);
      assert.match(r.json<{ message: string }>().message, re);
    }
    // is-automated=true short-cuts to an empty list without asking any index.
    const automated = await d().request('GET', `/images/search?term=127.0.0.1:1/x&filters=${encodeURIComponent('{"is-automated":["true"]}')}`);
    assert.equal(automated.status, 200);
    assert.deepEqual(automated.json(), []);
  });

  it('image events: push, save, load, import, tag, untag, delete', async () => {
    const { registry, seeded } = open();
    const since = Math.floor(Date.now() / 1000) - 1;
    await docker(d(), ['pull', seeded.refs.busybox]);
    const target = `${registry.host}/events/busybox:e1`;
    await docker(d(), ['tag', seeded.refs.busybox, target]);
    await docker(d(), ['push', target]);
    const archive = (await d().request('GET', `/images/${target}/get`)).body;
    await docker(d(), ['rmi', target]);
    await loadApi(d(), archive);
    const tar = await makeTar([{ name: 'hello', data: 'hi\n' }]);
    const imp = await d().request('POST', '/images/create?fromSrc=-', { body: tar });
    const importedId = (JSON.parse(imp.text().trim()) as { status: string }).status;
    await docker(d(), ['rmi', importedId]);
    const until = Math.floor(Date.now() / 1000) + 1;
    const res = await d().request('GET', `/events?since=${since}&until=${until}&filters=${encodeURIComponent('{"type":["image"]}')}`);
    const events = res.text().trim().split('\n').map((l) => JSON.parse(l) as { Action: string; Actor: { ID: string; Attributes: Record<string, string> } });
    const actions = new Set(events.map((e) => e.Action));
    for (const a of ['pull', 'tag', 'push', 'save', 'untag', 'load', 'import', 'delete']) assert.ok(actions.has(a), `no ${a} event in ${[...actions].join(', ')}`);
    assert.equal(events.find((e) => e.Action === 'push')!.Actor.ID, target);
    assert.equal(events.find((e) => e.Action === 'import')!.Actor.ID, importedId);
    assert.ok(events.some((e) => e.Action === 'delete' && e.Actor.ID === importedId));
  });
});

describe('docker-py: push, save, load, import', () => {
  const d = useDaemon();
  const open = useSeededRegistry('open');

  it('pushes with decoded progress, saves to bytes, loads them back, imports a tar', async () => {
    const { registry, seeded } = open();
    const script = `
import docker, io, json, tarfile
c = docker.from_env()
img = c.images.pull(${JSON.stringify(seeded.refs.busybox.replace(/:latest$/, ''))}, tag='latest')
img.tag('${registry.host}/py/pushed', 'p1')
events = list(c.images.push('${registry.host}/py/pushed', tag='p1', stream=True, decode=True))
aux = [e['aux'] for e in events if 'aux' in e]
data = b''.join(img.save(named=True))
c.images.remove('${registry.host}/py/pushed:p1')
c.images.remove(img.id)
loaded = c.images.load(data)
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w') as t:
    info = tarfile.TarInfo('hello.txt'); body = b'from python\\n'; info.size = len(body); t.addfile(info, io.BytesIO(body))
imported = c.api.import_image_from_data(buf.getvalue(), repository='py/imported', tag='v1')
print(json.dumps({'aux': aux, 'loaded': [i.id for i in loaded], 'tags': loaded[0].tags, 'id': img.id, 'imported': c.images.get('py/imported:v1').id}))
`;
    const r = await runDockerPy(d().socket, script);
    assert.equal(r.code, 0, r.stderr);
    const got = JSON.parse(r.stdout) as { aux: { Tag: string; Digest: string }[]; loaded: string[]; tags: string[]; id: string; imported: string };
    assert.deepEqual(got.aux.map((a) => [a.Tag, a.Digest]), [['p1', seeded.digests.busybox]]);
    assert.deepEqual(got.loaded, [got.id]);
    assert.deepEqual(got.tags, [seeded.refs.busybox]);
    assert.match(got.imported, /^sha256:[0-9a-f]{64}$/);
  });
});
