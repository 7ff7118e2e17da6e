/**
 * GET /containers/{id}/changes (`docker diff`), /export (`docker export`) and the sizes of
 * `docker ps -s` / inspect ?size=1, on real containers over the busybox and layered images.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { haveDockerPy, runDockerPy } from '../harness/python.js';
import { createContainer, inspect, removeQuietly, runShell, waitExit, waitForPath } from './support.js';

describe('diff, export and sizes', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let busybox = '';
  let layered = '';
  const containers: string[] = [];

  before(async () => {
    busybox = reg().seeded.refs.busybox;
    layered = reg().seeded.refs.layered;
    for (const ref of [busybox, layered]) {
      const pull = await daemon().docker(['pull', ref]);
      assert.equal(pull.code, 0, pull.stderr);
    }
  });
  after(async () => {
    await removeQuietly(daemon(), containers);
  });

  it('changes: added, modified and deleted paths in path order, runtime mount points left out', async () => {
    const d = daemon();
    const id = await runShell(d, busybox, 'echo hi > /tmp/new; rm /etc/group; echo x >> /etc/passwd; mkdir -p /a/b; touch /a/b/c; touch /ready; exec sleep 1000');
    containers.push(id);
    await waitForPath(d, id, '/ready');
    const r = await d.request('GET', `/containers/${id}/changes`);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json(), [
      { Path: '/a', Kind: 1 },
      { Path: '/a/b', Kind: 1 },
      { Path: '/a/b/c', Kind: 1 },
      { Path: '/etc', Kind: 0 },
      { Path: '/etc/group', Kind: 2 },
      { Path: '/etc/passwd', Kind: 0 },
      { Path: '/ready', Kind: 1 },
      { Path: '/tmp', Kind: 0 },
      { Path: '/tmp/new', Kind: 1 },
    ]);
    const cli = await d.docker(['diff', id]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /^A \/a\nA \/a\/b\nA \/a\/b\/c\nC \/etc\nD \/etc\/group\nC \/etc\/passwd\n/);
  });

  it('changes: an untouched container has none, a created one too', async () => {
    const d = daemon();
    const ran = await runShell(d, busybox, 'true');
    containers.push(ran);
    assert.equal(await waitExit(d, ran), 0);
    assert.deepEqual((await d.request('GET', `/containers/${ran}/changes`)).json(), []);
    const created = await createContainer(d, { Image: busybox, Cmd: ['true'] });
    containers.push(created);
    assert.deepEqual((await d.request('GET', `/containers/${created}/changes`)).json(), []);
    assert.equal((await d.request('GET', '/containers/nope/changes')).status, 404);
  });

  it('changes: whiteouts and opaque directories of the image layers are honored', async () => {
    // layered: layer 3 deletes /etc/removeme and makes /data/dir opaque (hiding /data/dir/old).
    const d = daemon();
    const id = await createContainer(d, { Image: layered, Entrypoint: ['sh', '-c'], Cmd: ['echo x > /etc/removeme; echo y > /data/dir/old; echo z >> /data/keep; rm -rf /data/dir; mkdir /data/dir; touch /data/dir/again'] });
    containers.push(id);
    assert.equal((await d.request('POST', `/containers/${id}/start`)).status, 204);
    assert.equal(await waitExit(d, id), 0);
    const kinds = Object.fromEntries((await d.request('GET', `/containers/${id}/changes`)).json().map((c: { Path: string; Kind: number }) => [c.Path, c.Kind]));
    assert.equal(kinds['/etc/removeme'], 1, 'deleted in the image, so added');
    assert.equal(kinds['/data/keep'], 0);
    assert.equal(kinds['/data/dir/again'], 1);
    assert.equal(kinds['/data/dir/new'], 2, 'the image file hidden by the new opaque dir is deleted');
    assert.equal(kinds['/data/dir/old'], undefined, 'hidden in the image already');
  });

  it('export: the merged rootfs as a tar, for running and stopped containers; a stopped one is unmounted again', async () => {
    const d = daemon();
    const id = await runShell(d, busybox, 'echo exported > /tmp/e; rm /etc/group; touch /ready; exec sleep 1000');
    containers.push(id);
    await waitForPath(d, id, '/ready');
    for (const phase of ['running', 'stopped']) {
      if (phase === 'stopped') assert.equal((await d.request('POST', `/containers/${id}/stop?t=0`)).status, 204);
      const res = await d.request('GET', `/containers/${id}/export`, { timeoutMs: 60_000 });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'application/x-tar');
      const names = tarList(res.body);
      assert.ok(names.includes('bin/busybox'), `${phase}: ${names.slice(0, 5)}`);
      assert.ok(names.includes('tmp/e'));
      assert.ok(!names.includes('etc/group'), 'deleted files are not in the export');
      assert.ok(names.every((n) => !n.startsWith('./') && !n.startsWith('/')), 'relative names');
      assert.equal(tarFile(res.body, 'tmp/e'), 'exported\n');
    }
    const merged = `${d.dataRoot}/containers/${id}/merged`;
    const mounted = () => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => l.split(' ')[4] === merged);
    for (let i = 0; i < 50 && mounted(); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(!mounted(), 'the stopped container rootfs is unmounted after the export');
    const cli = spawnSync('sh', ['-c', `docker export ${id} | tar -t | grep -c .`], { env: { ...process.env, DOCKER_HOST: d.dockerHost, DOCKER_CONFIG: d.dockerConfig }, encoding: 'utf8' });
    assert.equal(cli.status, 0, cli.stderr);
    assert.ok(Number(cli.stdout.trim()) > 100);
    // The container still starts after its rootfs was mounted and unmounted by export.
    assert.equal((await d.request('POST', `/containers/${id}/start`)).status, 204);
    assert.equal((await inspect(d, 'containers', id)).State.Status, 'running');
  });

  it('sizes: ps -s and inspect ?size=1 count what the container wrote', async () => {
    const d = daemon();
    const id = await runShell(d, busybox, 'head -c 300000 /dev/zero > /blob; touch /ready; exec sleep 1000');
    containers.push(id);
    await waitForPath(d, id, '/ready');
    const c = await d.request('GET', `/containers/${id}/json?size=1`);
    const img = await inspect(d, 'images', busybox);
    assert.ok(c.json().SizeRw >= 300000 && c.json().SizeRw < 310000, String(c.json().SizeRw));
    assert.equal(c.json().SizeRootFs, c.json().SizeRw + img.Size);
    const plain = await inspect(d, 'containers', id);
    assert.equal(plain.SizeRw, undefined);
    const list = (await d.request('GET', `/containers/json?size=1&filters=${encodeURIComponent(JSON.stringify({ id: [id] }))}`)).json();
    assert.equal(list.length, 1);
    assert.equal(list[0].SizeRw, c.json().SizeRw);
    const ps = await d.docker(['ps', '-s', '--filter', `id=${id}`, '--format', '{{.Size}}']);
    assert.equal(ps.code, 0, ps.stderr);
    assert.match(ps.stdout, /^300kB \(virtual /);
  });

  it('docker-py: diff(), export(), top() and stats()', { skip: !haveDockerPy() && 'no .venv with docker-py (scripts/install-deps.sh makes it)' }, async () => {
    const d = daemon();
    const id = await runShell(d, busybox, 'echo py > /py.txt; touch /ready; exec sleep 1000');
    containers.push(id);
    await waitForPath(d, id, '/ready');
    const r = await runDockerPy(
      d.socket,
      `
import docker, io, json, tarfile
c = docker.from_env()
ctr = c.containers.get(${JSON.stringify(id)})
buf = io.BytesIO()
for chunk in ctr.export():
    buf.write(chunk)
buf.seek(0)
names = tarfile.open(fileobj=buf).getnames()
top = ctr.top()
st = ctr.stats(stream=False)
print(json.dumps({'diff': ctr.diff(), 'has_py': 'py.txt' in names, 'has_busybox': 'bin/busybox' in names, 'titles': top['Titles'], 'procs': len(top['Processes']), 'mem': st['memory_stats']['usage'], 'name': st['name']}))
`,
    );
    assert.equal(r.code, 0, r.stderr);
    const got = JSON.parse(r.stdout);
    assert.deepEqual(got.diff, [{ Path: '/py.txt', Kind: 1 }, { Path: '/ready', Kind: 1 }]);
    assert.equal(got.has_py, true);
    assert.equal(got.has_busybox, true);
    assert.ok(got.titles.includes('PID'));
    assert.equal(got.procs, 1);
    assert.ok(got.mem > 0);
    assert.equal(got.name, (await inspect(d, 'containers', id)).Name);
  });
});

function tarList(tar: Buffer): string[] {
  const r = spawnSync('tar', ['-t'], { input: tar, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split('\n').filter(Boolean).map((n) => n.replace(/\/$/, ''));
}

function tarFile(tar: Buffer, name: string): string {
  const r = spawnSync('tar', ['-xO', name], { input: tar, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}
