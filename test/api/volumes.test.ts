/** /volumes through the docker CLI and the API: create, list with filters, inspect, remove, prune, events, restarts. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { useDaemon, useSeededRegistry, usePulledBusybox } from '../harness/index.js';
import { haveDockerPy, runDockerPy } from '../harness/python.js';

describe('volumes API', () => {
  const daemon = useDaemon();
  const busybox = usePulledBusybox(daemon, useSeededRegistry('open'));

  it('create, inspect, list with filters, remove; an existing name is returned; bad input is refused', async () => {
    const d = daemon();
    const since = Math.floor(Date.now() / 1000) - 1;
    const c = await d.docker(['volume', 'create', '--label', 'team=a', 'data1']);
    assert.equal(c.code, 0, c.stderr);
    assert.equal(c.stdout.trim(), 'data1');
    const again = await d.request('POST', '/v1.45/volumes/create', { body: { Name: 'data1', Labels: { other: 'x' } } });
    assert.equal(again.status, 201);
    assert.deepEqual(again.json().Labels, { team: 'a' }, 'the existing volume comes back unchanged');
    const anon = await d.request('POST', '/volumes/create', { body: {} });
    assert.equal(anon.status, 201);
    assert.match(anon.json().Name, /^[0-9a-f]{64}$/);
    assert.deepEqual(anon.json().Labels, { 'com.docker.volume.anonymous': '' });

    const ins = await d.request('GET', '/volumes/data1');
    assert.equal(ins.status, 200);
    const v = ins.json();
    assert.equal(v.Driver, 'local');
    assert.equal(v.Scope, 'local');
    assert.equal(v.Mountpoint, join(d.dataRoot, 'volumes', 'data1', '_data'));
    assert.ok(existsSync(v.Mountpoint));
    assert.match(v.CreatedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(v.Options, null, 'no driver options given');

    const ls = await d.docker(['volume', 'ls', '-q', '--filter', 'label=team=a']);
    assert.deepEqual(ls.stdout.trim().split('\n'), ['data1']);
    const all = (await d.request('GET', '/volumes')).json();
    assert.deepEqual(all.Warnings, []);
    assert.deepEqual(all.Volumes.map((x: { Name: string }) => x.Name).sort(), ['data1', anon.json().Name].sort());
    const byName = (await d.request('GET', `/volumes?filters=${encodeURIComponent(JSON.stringify({ name: ['ata'] }))}`)).json();
    assert.deepEqual(byName.Volumes.map((x: { Name: string }) => x.Name), ['data1']);
    const byDriver = (await d.request('GET', `/volumes?filters=${encodeURIComponent(JSON.stringify({ driver: ['nfs'] }))}`)).json();
    assert.deepEqual(byDriver.Volumes, []);

    const badName = await d.request('POST', '/volumes/create', { body: { Name: 'a/b' } });
    assert.equal(badName.status, 400);
    assert.match(badName.json().message, /includes invalid characters for a local volume name/);
    const badDriver = await d.request('POST', '/volumes/create', { body: { Name: 'x1', Driver: 'nosuch' } });
    assert.equal(badDriver.status, 404);
    assert.equal(badDriver.json().message, 'create x1: error looking up volume plugin nosuch: plugin "nosuch" not found');
    const badOpt = await d.request('POST', '/volumes/create', { body: { Name: 'x2', DriverOpts: { foo: 'bar' } } });
    assert.equal(badOpt.status, 400);
    assert.equal(badOpt.json().message, 'create x2: invalid option: "foo"');
    const missing = await d.request('GET', '/volumes/nosuch');
    assert.equal(missing.status, 404);
    assert.equal(missing.json().message, 'get nosuch: no such volume');
    assert.equal((await d.request('DELETE', '/volumes/nosuch')).status, 404);
    assert.equal((await d.request('DELETE', '/volumes/nosuch?force=1')).status, 204);

    const rm = await d.docker(['volume', 'rm', 'data1', anon.json().Name]);
    assert.equal(rm.code, 0, rm.stderr);
    assert.ok(!existsSync(v.Mountpoint));
    const ev = await d.docker(['events', '--since', String(since), '--until', String(Math.ceil(Date.now() / 1000) + 1), '--filter', 'type=volume', '--format', '{{.Action}} {{.Actor.ID}}']);
    const lines = ev.stdout.trim().split('\n');
    assert.ok(lines.includes('create data1') && lines.includes('destroy data1'), ev.stdout);
  });

  it('a volume in use cannot be removed (409); prune removes anonymous unused volumes only unless all=true', async () => {
    const d = daemon();
    assert.equal((await d.docker(['volume', 'create', 'keep'])).code, 0);
    assert.equal((await d.docker(['volume', 'create', 'named-unused'])).code, 0);
    const anon = (await d.request('POST', '/volumes/create', { body: { Labels: { k: 'v' } } })).json().Name as string;
    const run = await d.docker(['create', '--name', 'user1', '-v', 'keep:/data', busybox(), 'true']);
    assert.equal(run.code, 0, run.stderr);
    const id = run.stdout.trim();
    const rm = await d.request('DELETE', '/volumes/keep?force=1');
    assert.equal(rm.status, 409);
    assert.equal(rm.json().message, `remove keep: volume is in use - [${id}]`);
    const dangling = await d.docker(['volume', 'ls', '-q', '--filter', 'dangling=true']);
    assert.deepEqual(dangling.stdout.trim().split('\n').sort(), [anon, 'named-unused'].sort());

    // Label filter that matches nothing: nothing goes.
    const none = (await d.request('POST', `/volumes/prune?filters=${encodeURIComponent(JSON.stringify({ label: ['k=other'] }))}`)).json();
    assert.deepEqual(none.VolumesDeleted, []);
    const p1 = await d.docker(['volume', 'prune', '-f']);
    assert.equal(p1.code, 0, p1.stderr);
    assert.match(p1.stdout, new RegExp(anon));
    const left = (await d.request('GET', '/volumes')).json().Volumes.map((x: { Name: string }) => x.Name).sort();
    assert.deepEqual(left, ['keep', 'named-unused']);
    const p2 = (await d.request('POST', `/volumes/prune?filters=${encodeURIComponent(JSON.stringify({ all: ['true'] }))}`)).json();
    assert.deepEqual(p2.VolumesDeleted, ['named-unused'], 'a volume a container refers to stays');
    const ev = await d.request('GET', `/events?since=${Math.floor(Date.now() / 1000) - 5}&until=${Math.ceil(Date.now() / 1000) + 1}&filters=${encodeURIComponent(JSON.stringify({ type: ['volume'], event: ['prune'] }))}`);
    const prunes = ev.text().trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(prunes.length >= 2 && prunes.every((e) => /^\d+$/.test(e.Actor.Attributes.reclaimed)), ev.text());
    assert.equal(typeof p2.SpaceReclaimed, 'number');
    assert.equal((await d.docker(['rm', id])).code, 0);
    assert.equal((await d.request('DELETE', '/volumes/keep')).status, 204);
  });

  it('volumes and their data survive a restart and a kill -9', async () => {
    const d = daemon();
    const w = await d.docker(['run', '--rm', '-v', 'durable:/data', busybox(), 'sh', '-c', 'echo kept > /data/f']);
    assert.equal(w.code, 0, w.stderr);
    await d.kill9();
    await d.restart();
    const v = (await d.request('GET', '/volumes/durable')).json();
    assert.equal(readFileSync(join(v.Mountpoint, 'f'), 'utf8'), 'kept\n');
    await d.stop();
    await d.restart();
    const r = await d.docker(['run', '--rm', '-v', 'durable:/data', busybox(), 'cat', '/data/f']);
    assert.equal(r.stdout, 'kept\n', r.stderr);
  });

  it('docker-py: volumes.create/get/list/prune and remove', { skip: !haveDockerPy() && 'no .venv with docker-py' }, async () => {
    const d = daemon();
    const r = await runDockerPy(
      d.socket,
      `
import docker, json
c = docker.from_env()
v = c.volumes.create('pyv', driver='local', labels={'a': 'b'}, driver_opts={'type': 'tmpfs', 'device': 'tmpfs', 'o': 'size=1m'})
same = c.volumes.create('pyv')
listed = [x.name for x in c.volumes.list(filters={'label': 'a=b'})]
anon = c.volumes.create()
pruned = c.volumes.prune()
v.remove()
try:
    c.volumes.get('pyv')
    gone = False
except docker.errors.NotFound:
    gone = True
print(json.dumps({'labels': v.attrs['Labels'], 'options': v.attrs['Options'], 'same': same.id, 'listed': listed, 'pruned': pruned['VolumesDeleted'], 'anon': anon.name, 'gone': gone}))
`,
    );
    assert.equal(r.code, 0, r.stderr);
    const got = JSON.parse(r.stdout);
    assert.deepEqual(got.labels, { a: 'b' });
    assert.deepEqual(got.options, { type: 'tmpfs', device: 'tmpfs', o: 'size=1m' });
    assert.equal(got.same, 'pyv');
    assert.deepEqual(got.listed, ['pyv']);
    assert.deepEqual(got.pruned, [got.anon], 'prune takes the anonymous volume, not the named one');
    assert.equal(got.gone, true);
  });
});
