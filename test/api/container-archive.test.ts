/**
 * HEAD, GET and PUT /containers/{id}/archive (`docker cp`): through the API, the docker CLI and
 * docker-py, into and out of running and stopped containers, across bind mounts, and the escape
 * attempts (links to host paths and to /, `..`, hostile tars, a link swapped during copies).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import tar from 'tar-stream';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';
import { haveDockerPy, runDockerPy } from '../harness/python.js';

interface TarEntry {
  name: string;
  type: string;
  mode: number;
  uid: number;
  gid: number;
  linkname?: string | null;
  content: string;
}

async function readTar(body: Buffer): Promise<TarEntry[]> {
  const ex = tar.extract();
  const out: TarEntry[] = [];
  const done = new Promise<void>((resolve, reject) => {
    ex.on('entry', (h, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => void chunks.push(c as Buffer));
      stream.on('end', () => {
        out.push({ name: h.name, type: h.type ?? '', mode: h.mode ?? 0, uid: h.uid ?? 0, gid: h.gid ?? 0, linkname: h.linkname, content: Buffer.concat(chunks).toString() });
        next();
      });
    });
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  ex.end(body);
  await done;
  return out;
}

type MakeEntry = { name: string; type?: 'file' | 'directory' | 'symlink' | 'link'; content?: string; linkname?: string; mode?: number; uid?: number; gid?: number };

async function makeTar(entries: MakeEntry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => void chunks.push(c as Buffer));
  const ended = new Promise<void>((r) => pack.on('end', () => r()));
  for (const e of entries) {
    const type = e.type ?? 'file';
    await new Promise<void>((resolve, reject) =>
      pack.entry({ name: e.name, type, linkname: e.linkname, mode: e.mode ?? (type === 'directory' ? 0o755 : 0o644), uid: e.uid ?? 0, gid: e.gid ?? 0, mtime: new Date('2024-05-06T07:08:09Z') }, type === 'file' ? (e.content ?? '') : Buffer.alloc(0), (err) => (err ? reject(err) : resolve())),
    );
  }
  pack.finalize();
  await ended;
  return Buffer.concat(chunks);
}

function decodeStat(h: string | string[] | undefined): { name: string; size: number; mode: number; mtime: string; linkTarget: string } {
  assert.equal(typeof h, 'string', 'X-Docker-Container-Path-Stat is set');
  return JSON.parse(Buffer.from(h as string, 'base64').toString('utf8'));
}

const MODE_DIR = 2 ** 31;
const MODE_SYMLINK = 2 ** 27;

describe('container archive (docker cp)', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  let host = '';
  let hostMarker = '';
  const marker = `berth-cp-escape-${randomBytes(6).toString('hex')}`;

  before(async () => {
    image = reg().seeded.refs.busybox;
    assert.equal((await daemon().docker(['pull', '-q', image])).code, 0);
    host = mkdtempSync(join(tmpdir(), 'berth-cp-'));
    hostMarker = join(host, 'host-secret');
    writeFileSync(hostMarker, 'HOST SECRET\n');
  });
  after(() => {
    rmSync(host, { recursive: true, force: true });
    for (const p of [join('/tmp', marker), join('/', marker), join('/etc', marker)]) assert.equal(existsSync(p), false, `${p} was written on the host`);
  });

  /**
   * A container made by `sh -c script` run to its end (stopped), or left running with `keep`. A
   * stopped one sleeps when started again, so `docker exec` can look at it.
   */
  async function container(d: TestDaemon, script: string, opts: { keep?: boolean; extra?: Record<string, unknown> } = {}): Promise<string> {
    const cmd = opts.keep ? `${script}\ntouch /tmp/.ready\nsleep 300` : `[ -e /tmp/.done ] && exec sleep 300\n${script}\ntouch /tmp/.done 2>/dev/null; true`;
    const body = { Image: image, Cmd: ['sh', '-c', cmd], ...opts.extra };
    const c = await d.request('POST', '/containers/create', { body });
    assert.equal(c.status, 201, c.text());
    const id = c.json().Id as string;
    assert.equal((await d.request('POST', `/containers/${id}/start`)).status, 204);
    if (opts.keep) {
      for (let i = 0; i < 100; i++) {
        const r = await d.docker(['exec', id, 'test', '-e', '/tmp/.ready']);
        if (r.code === 0) break;
        await new Promise((res) => setTimeout(res, 100));
      }
    } else {
      const w = (await d.request('POST', `/containers/${id}/wait`)).json();
      assert.equal(w.StatusCode, 0);
    }
    return id;
  }

  async function shIn(d: TestDaemon, id: string, script: string): Promise<string> {
    const r = await d.docker(['exec', '-u', 'root', id, 'sh', '-c', script]);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  }

  const setup = 'mkdir -p /data/dir/sub && echo hello > /data/dir/a.txt && echo deep > /data/dir/sub/b && chmod 0640 /data/dir/a.txt && chown 1000:1000 /data/dir/sub/b && ln -s a.txt /data/dir/link && ln -s /data/dir /data/dirlink && ln /data/dir/a.txt /data/dir/hard';

  it('HEAD: stats files, directories and links as dockerd does; 404 and 400 otherwise', async () => {
    const d = daemon();
    const id = await container(d, setup);
    const file = await d.request('HEAD', `/containers/${id}/archive?path=/data/dir/a.txt`);
    assert.equal(file.status, 200);
    const fs = decodeStat(file.headers['x-docker-container-path-stat']);
    assert.equal(fs.name, 'a.txt');
    assert.equal(fs.size, 6);
    assert.equal(fs.mode, 0o640);
    assert.equal(fs.linkTarget, '');
    assert.match(fs.mtime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    const dir = decodeStat((await d.request('HEAD', `/v1.43/containers/${id}/archive?path=/data/dir/`)).headers['x-docker-container-path-stat']);
    assert.deepEqual([dir.name, dir.mode], ['dir', MODE_DIR + 0o755]);
    const link = decodeStat((await d.request('HEAD', `/containers/${id}/archive?path=/data/dirlink`)).headers['x-docker-container-path-stat']);
    assert.deepEqual([link.name, link.mode, link.linkTarget], ['dirlink', MODE_SYMLINK + 0o777, '/data/dir']);
    const rel = decodeStat((await d.request('HEAD', `/containers/${id}/archive?path=data/dir/link`)).headers['x-docker-container-path-stat']);
    assert.equal(rel.linkTarget, '/data/dir/a.txt');
    const followed = decodeStat((await d.request('HEAD', `/containers/${id}/archive?path=/data/dirlink/.`)).headers['x-docker-container-path-stat']);
    assert.deepEqual([followed.name, followed.mode], ['.', MODE_DIR + 0o755]);
    const missing = await d.request('GET', `/containers/${id}/archive?path=/nope`);
    assert.equal(missing.status, 404);
    assert.equal(missing.json().message, `Could not find the file /nope in container ${id}`);
    assert.equal((await d.request('HEAD', `/containers/${id}/archive?path=/nope`)).status, 404);
    const empty = await d.request('GET', `/containers/${id}/archive?path=`);
    assert.equal(empty.status, 400);
    assert.match(empty.json().message, /path cannot be empty/);
    assert.equal((await d.request('GET', `/containers/no-such-ctr/archive?path=/`)).status, 404);
    await d.request('DELETE', `/containers/${id}?force=1`);
  });

  it('GET: a file, a directory under its name, `dir/.` as `./`, links and hardlinks kept, from a stopped container', async () => {
    const d = daemon();
    const id = await container(d, setup);
    const one = await d.request('GET', `/containers/${id}/archive?path=/data/dir/a.txt`);
    assert.equal(one.status, 200);
    assert.equal(one.headers['content-type'], 'application/x-tar');
    assert.equal(decodeStat(one.headers['x-docker-container-path-stat']).name, 'a.txt');
    assert.deepEqual((await readTar(one.body)).map((e) => [e.name, e.type, e.mode, e.content]), [['a.txt', 'file', 0o640, 'hello\n']]);
    const tree = await readTar((await d.request('GET', `/containers/${id}/archive?path=/data/dir`)).body);
    assert.deepEqual(tree.map((e) => [e.name, e.type]), [['dir/', 'directory'], ['dir/a.txt', 'file'], ['dir/hard', 'link'], ['dir/link', 'symlink'], ['dir/sub/', 'directory'], ['dir/sub/b', 'file']]);
    assert.equal(tree.find((e) => e.name === 'dir/hard')!.linkname, 'dir/a.txt');
    assert.equal(tree.find((e) => e.name === 'dir/link')!.linkname, 'a.txt');
    const b = tree.find((e) => e.name === 'dir/sub/b')!;
    assert.deepEqual([b.uid, b.gid, b.content], [1000, 1000, 'deep\n']);
    const dot = await readTar((await d.request('GET', `/containers/${id}/archive?path=/data/dirlink/.`)).body);
    assert.deepEqual(dot.slice(0, 2).map((e) => e.name), ['./', './a.txt']);
    const link = await readTar((await d.request('GET', `/containers/${id}/archive?path=/data/dirlink`)).body);
    assert.deepEqual(link.map((e) => [e.name, e.type, e.linkname]), [['dirlink', 'symlink', '/data/dir']]);
    await d.request('DELETE', `/containers/${id}?force=1`);
  });

  it('docker cp out of and into running and stopped containers: contents, modes, links', async () => {
    const d = daemon();
    for (const keep of [true, false]) {
      const id = await container(d, setup, { keep });
      const out = join(host, `out-${keep}`);
      mkdirSync(out);
      const cpOut = await d.docker(['cp', `${id}:/data/dir`, out]);
      assert.equal(cpOut.code, 0, cpOut.stderr);
      assert.equal(readFileSync(join(out, 'dir/a.txt'), 'utf8'), 'hello\n');
      assert.equal(statSync(join(out, 'dir/a.txt')).mode & 0o777, 0o640);
      assert.equal(readlinkSync(join(out, 'dir/link')), 'a.txt');
      assert.equal(readFileSync(join(out, 'dir/sub/b'), 'utf8'), 'deep\n');
      const followed = await d.docker(['cp', '-L', `${id}:/data/dir/link`, join(out, 'followed.txt')]);
      assert.equal(followed.code, 0, followed.stderr);
      assert.equal(readFileSync(join(out, 'followed.txt'), 'utf8'), 'hello\n');
      const single = await d.docker(['cp', `${id}:/data/dir/a.txt`, join(out, 'renamed.txt')]);
      assert.equal(single.code, 0, single.stderr);
      assert.equal(readFileSync(join(out, 'renamed.txt'), 'utf8'), 'hello\n');

      const src = join(host, `in-${keep}`);
      mkdirSync(join(src, 'tree/nested'), { recursive: true });
      writeFileSync(join(src, 'tree/x.sh'), '#!/bin/sh\necho x\n');
      chmodSync(join(src, 'tree/x.sh'), 0o751);
      writeFileSync(join(src, 'tree/nested/y'), 'y'.repeat(100_000));
      chmodSync(join(src, 'tree/nested'), 0o705);
      symlinkSync('nested/y', join(src, 'tree/ylink'));
      const cpIn = await d.docker(['cp', join(src, 'tree'), `${id}:/data/`]);
      assert.equal(cpIn.code, 0, cpIn.stderr);
      const archived = await d.docker(['cp', '-a', join(src, 'tree/x.sh'), `${id}:/data/archived.sh`]);
      assert.equal(archived.code, 0, archived.stderr);
      const cpFile = await d.docker(['cp', join(src, 'tree/x.sh'), `${id}:/data/new-name.sh`]);
      assert.equal(cpFile.code, 0, cpFile.stderr);
      const cpContents = await d.docker(['cp', `${join(src, 'tree')}/.`, `${id}:/data/dir/sub`]);
      assert.equal(cpContents.code, 0, cpContents.stderr);
      if (!keep) assert.equal((await d.request('POST', `/containers/${id}/start`)).status, 204);
      const check = 'stat -c "%n %a %s" /data/tree/x.sh /data/tree/nested/y /data/new-name.sh /data/dir/sub/x.sh; stat -c "%n %a" /data/tree/nested; readlink /data/tree/ylink; /data/tree/x.sh';
      const r = await d.docker(['exec', id, 'sh', '-c', check]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, '/data/tree/x.sh 751 17\n/data/tree/nested/y 644 100000\n/data/new-name.sh 751 17\n/data/dir/sub/x.sh 751 17\n/data/tree/nested 705\nnested/y\nx\n');
      await d.request('DELETE', `/containers/${id}?force=1`);
    }
  });

  it('PUT: owners from the headers, copyUIDGID, noOverwriteDirNonDir, 400 for a non-directory and read-only targets', async () => {
    const d = daemon();
    const id = await container(d, 'mkdir -p /tmp/t/adir /tmp/t/sg && echo f > /tmp/t/afile && chgrp 1000 /tmp/t/sg && chmod 2775 /tmp/t/sg', { keep: true, extra: { User: 'berth' } });
    const body = await makeTar([{ name: 'owned', type: 'directory', uid: 1234, gid: 2345, mode: 0o710 }, { name: 'owned/f', content: 'data', uid: 1234, gid: 2345, mode: 0o4755 }]);
    const put = await d.request('PUT', `/containers/${id}/archive?path=/tmp/t`, { body, headers: { 'Content-Type': 'application/x-tar' } });
    assert.equal(put.status, 200, put.text());
    assert.equal(await shIn(d, id, 'stat -c "%n %u:%g %a" /tmp/t/owned /tmp/t/owned/f'), '/tmp/t/owned 1234:2345 710\n/tmp/t/owned/f 1234:2345 4755\n');
    const asUser = await d.request('PUT', `/containers/${id}/archive?path=/tmp/t&copyUIDGID=1`, { body: await makeTar([{ name: 'mine', content: 'm', uid: 5, gid: 6 }]) });
    assert.equal(asUser.status, 200, asUser.text());
    assert.equal(await shIn(d, id, 'stat -c "%u:%g" /tmp/t/mine'), '1000:1000\n');
    // Root's entries stay root's in a setgid directory (which would give them its group), also in
    // one the archive itself makes setgid after a file was already extracted into it.
    const intoSetgid = await d.request('PUT', `/containers/${id}/archive?path=/tmp/t/sg`, { body: await makeTar([{ name: 'f', content: 'r' }]) });
    assert.equal(intoSetgid.status, 200, intoSetgid.text());
    const late = await makeTar([{ name: 'late/a', content: 'a' }, { name: 'late', type: 'directory', gid: 1000, mode: 0o2775 }, { name: 'late/b', content: 'b' }]);
    const madeSetgid = await d.request('PUT', `/containers/${id}/archive?path=/tmp/t`, { body: late });
    assert.equal(madeSetgid.status, 200, madeSetgid.text());
    assert.equal(await shIn(d, id, 'cd /tmp/t && stat -c "%n %u:%g %a" sg/f late late/a late/b'), 'sg/f 0:0 644\nlate 0:1000 2775\nlate/a 0:0 644\nlate/b 0:0 644\n');

    const fileOverDir = await makeTar([{ name: 'adir', content: 'now a file' }]);
    const refused = await d.request('PUT', `/containers/${id}/archive?path=/tmp/t&noOverwriteDirNonDir=true`, { body: fileOverDir });
    assert.equal(refused.status, 400);
    assert.match(refused.json().message, /cannot overwrite directory "\/tmp\/t\/adir" with non-directory "adir"/);
    const dirOverFile = await d.request('PUT', `/containers/${id}/archive?path=/tmp/t&noOverwriteDirNonDir=1`, { body: await makeTar([{ name: 'afile', type: 'directory' }]) });
    assert.equal(dirOverFile.status, 400);
    assert.match(dirOverFile.json().message, /cannot overwrite non-directory "\/tmp\/t\/afile" with directory "afile"/);
    assert.equal(await shIn(d, id, 'test -d /tmp/t/adir && cat /tmp/t/afile'), 'f\n');
    const replaced = await d.request('PUT', `/containers/${id}/archive?path=/tmp/t`, { body: fileOverDir });
    assert.equal(replaced.status, 200, replaced.text());
    assert.equal(await shIn(d, id, 'cat /tmp/t/adir'), 'now a file');

    // A link replaced by a directory within one archive: later entries go into the new directory.
    const relink = await d.request('PUT', `/containers/${id}/archive?path=/tmp/t`, {
      body: await makeTar([{ name: 'target', type: 'directory' }, { name: 'ln', type: 'symlink', linkname: 'target' }, { name: 'ln/x', content: 'x' }, { name: 'ln', type: 'directory' }, { name: 'ln/y', content: 'y' }]),
    });
    assert.equal(relink.status, 200, relink.text());
    assert.equal(await shIn(d, id, 'cd /tmp/t && ls target ln | tr "\\n" " "'), 'ln: y  target: x ');

    const notDir = await d.request('PUT', `/containers/${id}/archive?path=/tmp/t/afile`, { body: fileOverDir });
    assert.equal(notDir.status, 400);
    assert.match(notDir.json().message, /not a directory/);
    const missing = await d.request('PUT', `/containers/${id}/archive?path=/nope`, { body: fileOverDir });
    assert.equal(missing.status, 404);
    assert.equal(missing.json().message, `Could not find the file /nope in container ${id}`);
    await d.request('DELETE', `/containers/${id}?force=1`);

    const ro = await container(d, 'true', { extra: { HostConfig: { ReadonlyRootfs: true, Binds: [`${host}:/hostro:ro`] } } });
    const roRoot = await d.request('PUT', `/containers/${ro}/archive?path=/tmp`, { body: fileOverDir });
    assert.equal(roRoot.status, 400);
    assert.match(roRoot.json().message, /container rootfs is marked read-only/);
    const roMount = await d.request('PUT', `/containers/${ro}/archive?path=/hostro`, { body: fileOverDir });
    assert.equal(roMount.status, 400);
    assert.match(roMount.json().message, /mounted volume is marked read-only/);
    assert.equal(existsSync(join(host, 'adir')), false);
    await d.request('DELETE', `/containers/${ro}?force=1`);
  });

  it('PUT into directories the archive makes: entries that replace or link to earlier files find them written, across batches', async () => {
    const d = daemon();
    const id = await container(d, 'true', { keep: true });
    const many = Array.from({ length: 300 }, (_, i) => ({ name: `fresh/m/${i}`, content: `m${i}`, mode: 0o600 + (i % 8) }));
    const big = randomBytes(1536 * 1024).toString('base64');
    const body = await makeTar([
      { name: 'fresh', type: 'directory', mode: 0o750 },
      ...many,
      { name: 'fresh/a', content: 'one', uid: 1000, gid: 1000 },
      { name: 'fresh/a', content: 'two' },
      { name: 'fresh/h', type: 'link', linkname: 'fresh/a' },
      { name: 'fresh/b', content: 'a file first' },
      { name: 'fresh/b', type: 'directory' },
      { name: 'fresh/b/c', content: 'c', uid: 7, gid: 8 },
      { name: 'fresh/s', type: 'symlink', linkname: 'a' },
      { name: 'fresh/big', content: big },
      { name: 'fresh/late', content: 'after the big one' },
    ]);
    const put = await d.request('PUT', `/containers/${id}/archive?path=/tmp`, { body });
    assert.equal(put.status, 200, put.text());
    const seen = await shIn(d, id, 'cd /tmp/fresh && stat -c "%n %u:%g %a %h" . a h b/c && cat a h b/c late && readlink s && ls m | wc -l && cat m/0 m/257 m/299 && stat -c %a m/0 m/257');
    assert.equal(seen, '. 0:0 750 4\na 0:0 644 2\nh 0:0 644 2\nb/c 7:8 644 1\ntwotwocafter the big onea\n300\nm0m257m299600\n601\n');
    assert.equal(await shIn(d, id, 'cat /tmp/fresh/big'), big);
    await d.request('DELETE', `/containers/${id}?force=1`);
  });

  it('PUT: gzip, bzip2 and xz archives as the API allows; a corrupt one is a 400', async () => {
    const d = daemon();
    const id = await container(d, 'mkdir /z', { keep: true });
    const compress = (tool: string, data: Buffer) => execFileSync(tool, ['-c'], { input: data });
    const bodies: [string, (b: Buffer) => Buffer][] = [['gzip', (b) => gzipSync(b)], ['bzip2', (b) => compress('bzip2', b)], ['xz', (b) => compress('xz', b)]];
    for (const [kind, pack] of bodies) {
      const r = await d.request('PUT', `/containers/${id}/archive?path=/z`, { body: pack(await makeTar([{ name: `${kind}.txt`, content: kind }])) });
      assert.equal(r.status, 200, `${kind}: ${r.text()}`);
    }
    assert.equal(await shIn(d, id, 'cat /z/gzip.txt /z/bzip2.txt /z/xz.txt'), 'gzipbzip2xz');
    const corrupt = compress('xz', await makeTar([{ name: 'c', content: 'c' }]));
    corrupt[corrupt.length - 20] ^= 0xff;
    const bad = await d.request('PUT', `/containers/${id}/archive?path=/z`, { body: corrupt });
    assert.equal(bad.status, 400, bad.text());
    assert.match(bad.json().message, /decompressing the archive \(xz\)/);
    await d.request('DELETE', `/containers/${id}?force=1`);
  });

  it('a tree of many MiB goes in and out byte for byte; a truncated gzip is a 400 naming it; a GET cut short releases the container', async () => {
    const d = daemon();
    const c = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'] } });
    assert.equal(c.status, 201, c.text());
    const id = c.json().Id as string;
    // Larger than the pack's buffers together (6 MiB), with small files between the large ones.
    const entries: MakeEntry[] = [];
    const big = (n: number) => randomBytes(n).toString('latin1');
    for (let i = 0; i < 3; i++) entries.push({ name: `t/large${i}`, content: big(3 * 1024 * 1024 + 333 * i) });
    for (let i = 0; i < 200; i++) entries.push({ name: `t/s/f${String(i).padStart(3, '0')}`, content: big(1000 + i) });
    const body = await makeTar(entries);
    const put = await d.request('PUT', `/containers/${id}/archive?path=/`, { body: gzipSync(body) });
    assert.equal(put.status, 200, put.text());
    const got = await d.request('GET', `/containers/${id}/archive?path=/t`);
    assert.equal(got.status, 200);
    const files = (await readTar(got.body)).filter((e) => e.type === 'file');
    const want = new Map(entries.map((e) => [e.name, e.content]));
    assert.equal(files.length, entries.length);
    for (const f of files) assert.equal(f.content, want.get(f.name), f.name);

    const truncated = gzipSync(body).subarray(0, 300_000);
    const bad = await d.request('PUT', `/containers/${id}/archive?path=/`, { body: truncated });
    assert.equal(bad.status, 400, bad.text());
    assert.match(bad.json().message, /decompressing .*unexpected end of file/);

    for (let i = 0; i < 3; i++) {
      const res = await d.stream('GET', `/containers/${id}/archive?path=/t`);
      await new Promise<void>((resolve) => res.once('data', () => resolve()));
      res.destroy();
    }
    // Each cut GET let go of the rootfs: the container goes, and nothing of it stays mounted.
    let mounted = true;
    for (let i = 0; i < 50 && mounted; i++) {
      mounted = readFileSync('/proc/self/mountinfo', 'utf8').includes(id);
      if (mounted) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(mounted, false);
    assert.equal((await d.request('DELETE', `/containers/${id}`)).status, 204);
  });

  it('paths that cross a bind mount land in its source, both ways', async () => {
    const d = daemon();
    const bind = join(host, 'bind');
    mkdirSync(bind);
    writeFileSync(join(bind, 'from-host'), 'on the host\n');
    const id = await container(d, 'ln -s /mnt/b /viaLink', { extra: { HostConfig: { Binds: [`${bind}:/mnt/b`] } } });
    const out = await readTar((await d.request('GET', `/containers/${id}/archive?path=/viaLink/from-host`)).body);
    assert.deepEqual(out.map((e) => [e.name, e.content]), [['from-host', 'on the host\n']]);
    const tree = await readTar((await d.request('GET', `/containers/${id}/archive?path=/mnt`)).body);
    assert.deepEqual(tree.map((e) => e.name), ['mnt/', 'mnt/b/', 'mnt/b/from-host']);
    const put = await d.request('PUT', `/containers/${id}/archive?path=/viaLink`, { body: await makeTar([{ name: 'into-bind', content: 'from cp' }]) });
    assert.equal(put.status, 200, put.text());
    assert.equal(readFileSync(join(bind, 'into-bind'), 'utf8'), 'from cp');
    const hosts = await readTar((await d.request('GET', `/containers/${id}/archive?path=/etc/hostname`)).body);
    assert.equal(hosts[0]!.content, `${id.slice(0, 12)}\n`);
    await d.request('DELETE', `/containers/${id}?force=1`);
  });

  it('docker cp into and out of a named volume of a stopped container reaches the volume', async () => {
    const d = daemon();
    const vol = `cpvol-${randomBytes(4).toString('hex')}`;
    const id = await container(d, 'echo from-container > /data/inside', { extra: { HostConfig: { Binds: [`${vol}:/data`] } } });
    const src = join(host, 'to-volume.txt');
    writeFileSync(src, 'copied in\n');
    const cpIn = await d.docker(['cp', src, `${id}:/data/copied.txt`]);
    assert.equal(cpIn.code, 0, cpIn.stderr);
    // Another container on the same volume sees both files: the copy landed in the volume, not in the first container's upper dir.
    const run = await d.docker(['run', '--rm', '-v', `${vol}:/v`, image, 'cat', '/v/copied.txt', '/v/inside']);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'copied in\nfrom-container\n');
    const out = join(host, 'from-volume.txt');
    const cpOut = await d.docker(['cp', `${id}:/data/inside`, out]);
    assert.equal(cpOut.code, 0, cpOut.stderr);
    assert.equal(readFileSync(out, 'utf8'), 'from-container\n');
    assert.equal((await d.request('DELETE', `/containers/${id}?force=1`)).status, 204);
    assert.equal((await d.request('DELETE', `/volumes/${vol}`)).status, 204);
  });

  it('docker-py put_archive and get_archive', { skip: !haveDockerPy() && 'no docker-py venv' }, async () => {
    const d = daemon();
    const id = await container(d, 'mkdir /py', { keep: true });
    const script = `
import docker, io, json, tarfile
c = docker.from_env().containers.get(${JSON.stringify(id)})
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w') as t:
    data = b'from python\\n'
    info = tarfile.TarInfo('hello.txt'); info.size = len(data); info.mode = 0o600; info.uid = 77; info.gid = 88
    t.addfile(info, io.BytesIO(data))
ok = c.put_archive('/py', buf.getvalue())
stream, stat = c.get_archive('/py/hello.txt')
raw = b''.join(stream)
with tarfile.open(fileobj=io.BytesIO(raw)) as t:
    m = t.getmembers()[0]
    content = t.extractfile(m).read().decode()
print(json.dumps({'ok': ok, 'stat': {'name': stat['name'], 'size': stat['size'], 'mode': stat['mode']}, 'member': [m.name, m.mode, m.uid, m.gid], 'content': content}))
`;
    const r = await runDockerPy(d.socket, script);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { ok: true, stat: { name: 'hello.txt', size: 12, mode: 0o600 }, member: ['hello.txt', 0o600, 77, 88], content: 'from python\n' });
    await d.request('DELETE', `/containers/${id}?force=1`);
  });

  it('escapes: links to host paths and to /, `..`, hostile tars: nothing read or written outside the root', async () => {
    const d = daemon();
    const id = await container(d, `ln -s ${host} /hostdir && ln -s / /rootlink && ln -s ../../../../../../.. /up && mkdir /dst`, { keep: true });
    // Reads: the host path, taken inside the container, does not exist.
    for (const p of ['/hostdir/host-secret', '/up/hostdir/host-secret', `/../../../../..${hostMarker}`, `/rootlink${hostMarker}`]) {
      const r = await d.request('GET', `/containers/${id}/archive?path=${encodeURIComponent(p)}`);
      assert.equal(r.status, 404, `${p}: ${r.text()}`);
    }
    const cpOut = await d.docker(['cp', `${id}:/hostdir/host-secret`, join(host, 'stolen')]);
    assert.notEqual(cpOut.code, 0);
    assert.equal(existsSync(join(host, 'stolen')), false);
    // Writes through a link to a host path land inside the container.
    writeFileSync(join(host, 'payload'), 'payload\n');
    const cpIn = await d.docker(['cp', join(host, 'payload'), `${id}:/rootlink/tmp/${marker}`]);
    assert.equal(cpIn.code, 0, cpIn.stderr);
    assert.equal(await shIn(d, id, `cat /tmp/${marker}`), 'payload\n');
    const viaUp = await d.request('PUT', `/containers/${id}/archive?path=${encodeURIComponent('/up/tmp')}`, { body: await makeTar([{ name: `${marker}.2`, content: 'x' }]) });
    assert.equal(viaUp.status, 200, viaUp.text());
    assert.equal(await shIn(d, id, `cat /tmp/${marker}.2`), 'x');
    assert.equal(existsSync(join('/tmp', `${marker}.2`)), false);

    const hostile: [string, MakeEntry[], RegExp][] = [
      ['dot-dot', [{ name: `../../../../../../../tmp/${marker}`, content: 'evil' }], /outside of the extraction directory/],
      ['escaping symlink', [{ name: 'evil', type: 'symlink', linkname: '../../../../../../..' }, { name: `evil/tmp/${marker}`, content: 'evil' }], /invalid symlink/],
      ['hardlink out', [{ name: 'h', type: 'link', linkname: '../../../../etc/passwd' }], /invalid hardlink/],
    ];
    for (const [what, entries, error] of hostile) {
      const r = await d.request('PUT', `/containers/${id}/archive?path=/dst`, { body: await makeTar(entries) });
      assert.equal(r.status, 400, `${what}: ${r.text()}`);
      assert.match(r.json().message, error, what);
    }
    // An absolute name is taken from the destination, as dockerd joins it; `..` at its root stays there.
    const absName = await d.request('PUT', `/containers/${id}/archive?path=/dst`, { body: await makeTar([{ name: `/tmp/${marker}.abs`, content: 'joined' }, { name: `/../../sub/${marker}.abs`, content: 'clean' }]) });
    assert.equal(absName.status, 200, absName.text());
    assert.equal(await shIn(d, id, `cat /dst/tmp/${marker}.abs /dst/sub/${marker}.abs`), 'joinedclean');
    assert.equal(existsSync(join('/tmp', `${marker}.abs`)), false);
    // An absolute link is the container's: writing through it stays inside.
    const abs = await d.request('PUT', `/containers/${id}/archive?path=/dst`, { body: await makeTar([{ name: 'abs', type: 'symlink', linkname: '/' }, { name: `abs/etc/${marker}`, content: 'inside' }]) });
    assert.equal(abs.status, 200, abs.text());
    assert.equal(await shIn(d, id, `cat /etc/${marker}`), 'inside');
    assert.equal(existsSync(join('/etc', marker)), false);
    assert.equal(readFileSync(hostMarker, 'utf8'), 'HOST SECRET\n');
    await d.request('DELETE', `/containers/${id}?force=1`);
  });

  it('a link swapped in and out while copies run never leads outside the root', async () => {
    const d = daemon();
    // /swap flips between a real directory (holding `file`) and a link to the host directory.
    const id = await container(d, `mkdir -p /real && echo inside > /real/host-secret && i=0; (while [ $i -lt 20000 ]; do ln -sfn /real /swap.tmp && mv -T /swap.tmp /swap; ln -sfn ${host} /swap.tmp && mv -T /swap.tmp /swap; i=$((i+1)); done) &`, { keep: true });
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const [get, put] = await Promise.all([
        d.request('GET', `/containers/${id}/archive?path=/swap/host-secret`),
        d.request('PUT', `/containers/${id}/archive?path=/swap`, { body: await makeTar([{ name: `${marker}.swap`, content: 'x' }]) }),
      ]);
      seen.add(`${get.status}/${put.status}`);
      if (get.status === 200) {
        for (const e of await readTar(get.body)) assert.notEqual(e.content, 'HOST SECRET\n', 'host file read through a swapped link');
      }
      assert.equal(existsSync(join(host, `${marker}.swap`)), false, 'written on the host through a swapped link');
    }
    assert.ok([...seen].some((s) => s.startsWith('200')), `some reads found the file inside: ${[...seen].join(' ')}`);
    await d.request('DELETE', `/containers/${id}?force=1`);
  });
});
