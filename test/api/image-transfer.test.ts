/**
 * Images out and in through the real docker CLI and the Engine API: push to the harness's
 * registries (open, basic auth, token auth), then rmi and pull back (same digest, same image id,
 * the image runs); committed images pushed (their layer compressed once and kept).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { useDaemon, useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { registryAuth } from './support.js';

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

  it('answers 404 for an image that does not exist locally', async () => {
    const r = await d().request('POST', '/images/127.0.0.1:1/nothing/push?tag=x', { headers: { 'X-Registry-Auth': registryAuth({}) } });
    assert.equal(r.status, 404);
    assert.match(r.json<{ message: string }>().message, /An image does not exist locally with the tag: 127\.0\.0\.1:1\/nothing/);
  });
});
