/**
 * POST /commit against a real berthd running real containers: the new layer holds exactly the
 * container's changes (added, modified and deleted files), the config is the container's with the
 * changes applied, and a container from the new image sees the committed file system. Through raw
 * HTTP, the docker CLI and docker-py.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { runDockerPy, haveDockerPy } from '../harness/python.js';
import { createContainer, eventually, inspect, logsOf, removeQuietly, runShell, uniqueName, waitExit, waitForPath } from './support.js';

describe('commit', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  let baseImage: any;
  const containers: string[] = [];

  before(async () => {
    image = reg().seeded.refs.busybox;
    const pull = await daemon().docker(['pull', image]);
    assert.equal(pull.code, 0, pull.stderr);
    baseImage = await inspect(daemon(), 'images', image);
  });
  after(async () => {
    await removeQuietly(daemon(), containers);
  });

  it('docker commit: the new layer holds the added, modified and deleted files, and a container from the image sees them', async () => {
    const d = daemon();
    const since = Math.floor(Date.now() / 1000);
    const id = await runShell(d, image, 'echo added > /added; rm /etc/group; echo extra >> /etc/passwd; mkdir -p /dir/sub; echo deep > /dir/sub/f; touch /ready; exec sleep 1000');
    containers.push(id);
    await waitForPath(d, id, '/ready');

    const repo = uniqueName('committed');
    const r = await d.docker(['commit', '-c', 'CMD ["sh","-c","cat /added"]', '-c', 'ENV FOO=bar', '-c', 'LABEL stage=test', '-c', 'EXPOSE 8080', '-m', 'a message', '-a', 'Ann <ann@example.com>', id, `${repo}:v1`]);
    assert.equal(r.code, 0, r.stderr);
    const newId = r.stdout.trim();
    assert.match(newId, /^sha256:[a-f0-9]{64}$/);

    const img = await inspect(d, 'images', `${repo}:v1`);
    assert.equal(img.Id, newId);
    assert.deepEqual(img.RepoTags, [`${repo}:v1`]);
    assert.equal(img.Parent, baseImage.Id);
    assert.equal(img.Comment, 'a message');
    assert.equal(img.Author, 'Ann <ann@example.com>');
    assert.deepEqual(img.Config.Cmd, ['sh', '-c', 'cat /added']);
    assert.ok(img.Config.Env.includes('FOO=bar'), img.Config.Env);
    assert.ok(img.Config.Env.some((e: string) => e.startsWith('PATH=')), 'the container env is kept');
    assert.equal(img.Config.Labels.stage, 'test');
    assert.ok('8080/tcp' in img.Config.ExposedPorts);
    assert.deepEqual(img.RootFS.Layers.slice(0, -1), baseImage.RootFS.Layers);
    assert.equal(img.RootFS.Layers.length, baseImage.RootFS.Layers.length + 1);

    // The layer on disk: exactly the changes, deletions as whiteouts, no runtime mount points.
    const layerDir: string = img.GraphDriver.Data.UpperDir;
    assert.equal(readFileSync(join(layerDir, 'added'), 'utf8'), 'added\n');
    assert.equal(readFileSync(join(layerDir, 'dir/sub/f'), 'utf8'), 'deep\n');
    assert.match(readFileSync(join(layerDir, 'etc/passwd'), 'utf8'), /extra\n$/);
    const wh = lstatSync(join(layerDir, 'etc/group'));
    assert.ok(wh.isCharacterDevice() && wh.rdev === 0, 'etc/group is a whiteout');
    for (const p of ['etc/hostname', 'etc/hosts', 'etc/resolv.conf', 'bin/busybox']) assert.ok(!existsSync(join(layerDir, p)), `${p} must not be in the layer`);

    const hist = await d.request('GET', `/images/${newId}/history`);
    assert.equal(hist.status, 200);
    const top = hist.json()[0];
    assert.equal(top.Id, newId);
    assert.equal(top.Comment, 'a message');
    assert.match(top.CreatedBy, /^sh -c echo added > \/added;/);
    assert.ok(top.Size > 0);

    // The pause around the commit and the commit itself are events of the container.
    const ev = await d.docker(['events', '--since', String(since), '--until', String(Math.floor(Date.now() / 1000) + 1), '--filter', `container=${id}`, '--format', '{{.Action}} {{json .Actor.Attributes}}']);
    assert.equal(ev.code, 0, ev.stderr);
    const lines = ev.stdout.trim().split('\n');
    assert.ok(lines.some((l) => l.startsWith('pause ')), ev.stdout);
    assert.ok(lines.some((l) => l.startsWith('unpause ')), ev.stdout);
    const commit = lines.find((l) => l.startsWith('commit '));
    assert.ok(commit, ev.stdout);
    assert.equal(JSON.parse(commit.slice(7)).imageID, newId);
    assert.equal((await inspect(d, 'containers', id)).State.Status, 'running', 'unpaused after the commit');

    // A container from the new image.
    const child = await runShell(d, `${repo}:v1`, 'cat /added; test -e /etc/group && echo group-present || echo group-gone; tail -n1 /etc/passwd; cat /dir/sub/f; echo "FOO=$FOO"');
    containers.push(child);
    assert.equal(await waitExit(d, child), 0);
    assert.equal(await logsOf(d, child), 'added\ngroup-gone\nextra\ndeep\nFOO=bar\n');
    // Its own diff is empty: nothing of the runtime's mount points came along.
    const diff = await d.request('GET', `/containers/${child}/changes`);
    assert.deepEqual(diff.json() ?? [], []);
    // And the image's Cmd runs.
    const byCmd = await createContainer(d, { Image: `${repo}:v1` });
    containers.push(byCmd);
    assert.equal((await d.request('POST', `/containers/${byCmd}/start`)).status, 204);
    assert.equal(await waitExit(d, byCmd), 0);
    assert.equal(await logsOf(d, byCmd), 'added\n');
  });

  it('raw HTTP: a body config is the base, changes repeat, pause=0 leaves the container running, 201 {Id}', async () => {
    const d = daemon();
    const since = Math.floor(Date.now() / 1000);
    const id = await runShell(d, image, 'touch /ready; exec sleep 1000', { Env: ['FROM_CONTAINER=1'], Labels: { c: '1' } });
    containers.push(id);
    await waitForPath(d, id, '/ready');
    const q = new URLSearchParams({ container: id, pause: '0', repo: uniqueName('raw') });
    q.append('changes', 'ENV A=1');
    q.append('changes', 'USER nobody');
    const r = await d.request('POST', `/v1.47/commit?${q}`, { body: { Cmd: ['echo', 'from-body'], Env: ['B=2'], Labels: { b: '2' } } });
    assert.equal(r.status, 201, r.text());
    const { Id } = r.json();
    assert.match(Id, /^sha256:[a-f0-9]{64}$/);
    const img = await inspect(d, 'images', Id);
    assert.deepEqual(img.Config.Cmd, ['echo', 'from-body']);
    assert.equal(img.Config.User, 'nobody');
    for (const e of ['B=2', 'A=1', 'FROM_CONTAINER=1']) assert.ok(img.Config.Env.includes(e), `${e} in ${img.Config.Env}`);
    assert.deepEqual({ b: img.Config.Labels.b, c: img.Config.Labels.c }, { b: '2', c: '1' });
    assert.deepEqual(img.RepoTags, [`${q.get('repo')}:latest`]);
    const ev = await d.docker(['events', '--since', String(since), '--until', String(Math.floor(Date.now() / 1000) + 1), '--filter', `container=${id}`, '--format', '{{.Action}}']);
    assert.ok(!ev.stdout.split('\n').includes('pause'), `no pause with pause=0: ${ev.stdout}`);
    assert.ok(ev.stdout.split('\n').includes('commit'), ev.stdout);
  });

  it("a pause asked for while a commit has the container paused for its snapshot stays: the commit's unpause comes first", async () => {
    const d = daemon();
    const id = await runShell(d, image, 'touch /ready; exec sleep 1000');
    containers.push(id);
    await waitForPath(d, id, '/ready');
    for (let i = 0; i < 3; i++) {
      const commit = d.request('POST', `/commit?container=${id}&repo=${uniqueName('paused')}&pause=1`);
      await new Promise((r) => setTimeout(r, i));
      const pause = await d.request('POST', `/containers/${id}/pause`);
      assert.equal((await commit).status, 201);
      assert.equal(pause.status, 204, pause.text());
      assert.equal((await inspect(d, 'containers', id)).State.Status, 'paused', `round ${i}`);
      assert.equal((await d.request('POST', `/containers/${id}/unpause`)).status, 204);
    }
  });

  it('a container that changed nothing gives an image with the same layers and an empty-layer history entry', async () => {
    const d = daemon();
    const id = await createContainer(d, { Image: image, Cmd: ['true'] });
    containers.push(id);
    const r = await d.request('POST', `/commit?container=${id}&comment=nothing`);
    assert.equal(r.status, 201, r.text());
    const img = await inspect(d, 'images', r.json().Id);
    assert.deepEqual(img.RootFS.Layers, baseImage.RootFS.Layers);
    assert.equal(img.Size, baseImage.Size);
    const hist = (await d.request('GET', `/images/${img.Id}/history`)).json();
    assert.equal(hist.length, (await d.request('GET', `/images/${baseImage.Id}/history`)).json().length + 1);
    assert.equal(hist[0].Size, 0);
    assert.equal(hist[0].Comment, 'nothing');
    // Untagged: a dangling image whose parent is the container's image.
    assert.deepEqual(img.RepoTags, []);
    assert.equal(img.Parent, baseImage.Id);
  });

  it('commits a stopped container, and the image of a committed image commits again', async () => {
    const d = daemon();
    const id = await runShell(d, image, 'echo one > /one');
    containers.push(id);
    assert.equal(await waitExit(d, id), 0);
    const first = await d.docker(['commit', id]);
    assert.equal(first.code, 0, first.stderr);
    const second = await runShell(d, first.stdout.trim(), 'echo two > /two; rm /one');
    containers.push(second);
    assert.equal(await waitExit(d, second), 0);
    const c2 = await d.request('POST', `/commit?container=${second}`);
    assert.equal(c2.status, 201, c2.text());
    const img = await inspect(d, 'images', c2.json().Id);
    assert.equal(img.RootFS.Layers.length, baseImage.RootFS.Layers.length + 2);
    assert.equal(img.Parent, first.stdout.trim());
    const check = await runShell(d, img.Id, 'cat /two; test -e /one && echo one-present || echo one-gone');
    containers.push(check);
    assert.equal(await waitExit(d, check), 0);
    assert.equal(await logsOf(d, check), 'two\none-gone\n');
  });

  it('a stopped container: big and small files, hardlinks, symlinks, fifos, owners, modes, xattrs, whiteouts and opaque dirs survive commit → run', async () => {
    const d = daemon();
    const script = [
      'head -c 3145851 /dev/urandom > /big && ln /big /big-link',
      'echo small > /home/small && chown 1000:1000 /home/small && chmod 4750 /home/small',
      'ln -s /big /big-sym && mkfifo -m 640 /fifo',
      'rm /etc/group',
      // Replacing a directory of the image makes it opaque: its old content must stay hidden.
      'rm -rf /home/berth && mkdir -m 700 /home/berth && echo new > /home/berth/only',
      'sha256sum /big /home/small',
    ].join('; ');
    const id = await runShell(d, image, script);
    containers.push(id);
    assert.equal(await waitExit(d, id), 0);
    const sums = await logsOf(d, id);
    // xattrs, set from the host on the stopped container's upper dir (busybox cannot).
    const upper: string = (await inspect(d, 'containers', id)).GraphDriver.Data.UpperDir;
    execFileSync('setfattr', ['-n', 'user.note', '-v', 'kept', join(upper, 'home/small')]);
    execFileSync('setfattr', ['-n', 'user.dir', '-v', 'also', join(upper, 'home/berth')]);

    const r = await d.request('POST', `/commit?container=${id}`);
    assert.equal(r.status, 201, r.text());
    const img = await inspect(d, 'images', r.json().Id);
    const layerDir: string = img.GraphDriver.Data.UpperDir;
    const attr = (p: string, n: string) => execFileSync('getfattr', ['-h', '--absolute-names', '--only-values', '-n', n, join(layerDir, p)]).toString();
    assert.equal(attr('home/small', 'user.note'), 'kept');
    assert.equal(attr('home/berth', 'user.dir'), 'also');
    assert.equal(attr('home/berth', 'trusted.overlay.opaque'), 'y');
    const wh = lstatSync(join(layerDir, 'etc/group'));
    assert.ok(wh.isCharacterDevice() && wh.rdev === 0, 'etc/group is a whiteout');

    const child = await runShell(
      d,
      img.Id,
      [
        'sha256sum /big /home/small',
        'stat -c "%i %h %s" /big /big-link | uniq -c | wc -l',
        'stat -c "%u:%g %a %F" /home/small /fifo /home/berth',
        'readlink /big-sym; ls -A /home/berth; test -e /etc/group && echo group-present || echo group-gone',
      ].join('; '),
    );
    containers.push(child);
    assert.equal(await waitExit(d, child), 0);
    assert.equal(
      await logsOf(d, child),
      `${sums}1\n1000:1000 4750 regular file\n0:0 640 fifo\n0:0 700 directory\n/big\nonly\ngroup-gone\n`,
    );
    // Nothing of the commit shows as a change of the new container.
    assert.deepEqual((await d.request('GET', `/containers/${child}/changes`)).json() ?? [], []);
  });

  it('answers 404 for a missing container, 400 for a change that is not metadata or a bad repository name', async () => {
    const d = daemon();
    const missing = await d.request('POST', '/commit?container=no-such-container');
    assert.equal(missing.status, 404);
    assert.match(missing.json().message, /No such container: no-such-container/);
    const id = await createContainer(d, { Image: image, Cmd: ['true'] });
    containers.push(id);
    const bad = await d.request('POST', `/commit?container=${id}&changes=${encodeURIComponent('RUN echo hi')}`);
    assert.equal(bad.status, 400);
    assert.match(bad.json().message, /run is not a valid change command/);
    const badRepo = await d.request('POST', `/commit?container=${id}&repo=UPPER/case`);
    assert.equal(badRepo.status, 400, badRepo.text());
    const cli = await d.docker(['commit', '-c', 'ADD a b', id]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /add is not a valid change command/);
  });

  it('a commit sent the moment the container exits holds its files; a start and a removal sent with it wait their turn', async () => {
    const d = daemon();
    const id = await runShell(d, image, 'i=0; while [ $i -lt 8 ]; do head -c 1048576 /dev/urandom > /f$i; i=$((i+1)); done; md5sum /f* > /sums');
    containers.push(id);
    assert.equal(await waitExit(d, id), 0);
    // The exit's release (unmount, runtime state) may still run: commit goes alongside it, start after.
    const [committed, started] = await Promise.all([d.request('POST', `/commit?container=${id}`, { timeoutMs: 60_000 }), d.request('POST', `/containers/${id}/start`)]);
    assert.equal(committed.status, 201, committed.text());
    assert.equal(started.status, 204, started.text());
    assert.equal(await waitExit(d, id), 0);
    const removed = await d.request('DELETE', `/containers/${id}`);
    assert.equal(removed.status, 204, removed.text());
    const check = await runShell(d, committed.json().Id, 'md5sum -c /sums');
    containers.push(check);
    assert.equal(await waitExit(d, check), 0, await logsOf(d, check));
    assert.equal((await logsOf(d, check)).split('\n').filter((l) => l.endsWith(': OK')).length, 8);
  });

  it('streams a 50 MiB change into a layer without holding it in memory', async (t) => {
    const d = daemon();
    const id = await runShell(d, image, 'head -c 52428800 /dev/urandom > /big && touch /ready; exec sleep 1000');
    containers.push(id);
    await waitForPath(d, id, '/ready');
    const rssBefore = daemonRss(d.pid);
    const r = await d.request('POST', `/commit?container=${id}`, { timeoutMs: 60_000 });
    assert.equal(r.status, 201, r.text());
    t.diagnostic(`berthd RSS ${rssBefore} → ${daemonRss(d.pid)} KiB`);
    const img = await inspect(d, 'images', r.json().Id);
    assert.ok(img.Size - baseImage.Size >= 50 * 1024 * 1024, `layer size ${img.Size - baseImage.Size}`);
    // Streamed, not buffered: the daemon did not grow by the layer's size.
    assert.ok(daemonRss(d.pid) - rssBefore < 40 * 1024, 'berthd grew by more than 40 MiB during the commit');
  });

  it('docker-py: container.commit() with changes', { skip: !haveDockerPy() && 'no .venv with docker-py (scripts/install-deps.sh makes it)' }, async () => {
    const d = daemon();
    const id = await runShell(d, image, 'echo py > /py.txt; touch /ready; exec sleep 1000');
    containers.push(id);
    await waitForPath(d, id, '/ready');
    const repo = uniqueName('pycommit');
    const r = await runDockerPy(
      d.socket,
      `
import docker, json
c = docker.from_env()
ctr = c.containers.get(${JSON.stringify(id)})
img = ctr.commit(repository=${JSON.stringify(repo)}, tag='t1', message='from py', author='py', changes=['CMD ["cat", "/py.txt"]', 'ENV PY=1'])
print(json.dumps({'id': img.id, 'tags': img.tags, 'cmd': img.attrs['Config']['Cmd'], 'env': img.attrs['Config']['Env'], 'comment': img.attrs['Comment']}))
`,
    );
    assert.equal(r.code, 0, r.stderr);
    const got = JSON.parse(r.stdout);
    assert.match(got.id, /^sha256:[a-f0-9]{64}$/);
    assert.deepEqual(got.tags, [`${repo}:t1`]);
    assert.deepEqual(got.cmd, ['cat', '/py.txt']);
    assert.ok(got.env.includes('PY=1'));
    assert.equal(got.comment, 'from py');
    const child = await createContainer(d, { Image: `${repo}:t1` });
    containers.push(child);
    assert.equal((await d.request('POST', `/containers/${child}/start`)).status, 204);
    assert.equal(await waitExit(d, child), 0);
    assert.equal(await eventually(async () => (await logsOf(d, child)) || undefined), 'py\n');
  });
});

function daemonRss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}
