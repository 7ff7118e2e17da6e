/**
 * POST /build, the classic builder, through the docker CLI (DOCKER_BUILDKIT=0 and without buildx),
 * docker-py and raw HTTP: every instruction, the built image run and inspected (files, env, user,
 * workdir, labels, entrypoint, history), multi-stage with --target, the cache (hits, same id,
 * nocache, across a restart, prune), a failing RUN, hostile context tars, a client that leaves
 * mid-build, and the clear errors (BuildKit, squash, remote).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { createHash, randomBytes } from 'node:crypto';
import tarStream from 'tar-stream';
import { makeTempDir, removeDir, useDaemon, useSeededRegistry } from '../harness/index.js';
import { haveDockerPy, runDockerPy } from '../harness/python.js';
import { run } from '../harness/child-process.js';
import { request as httpRequest } from 'node:http';

/** A tar of the given entries, in memory (test data only). */
async function tarOf(entries: { name: string; body?: string | Buffer; type?: 'file' | 'symlink' | 'directory'; linkname?: string; mode?: number; uid?: number }[]): Promise<Buffer> {
  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => void chunks.push(c as Buffer));
  const done = new Promise<void>((r) => pack.on('end', () => r()));
  for (const e of entries) {
    await new Promise<void>((res, rej) => pack.entry({ name: e.name, type: e.type ?? 'file', linkname: e.linkname, mode: e.mode ?? 0o644, uid: e.uid ?? 0, gid: e.uid ?? 0 }, e.body ?? '', (err) => (err ? rej(err) : res())));
  }
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}

function records(text: string): Record<string, unknown>[] {
  return text.split(/\r?\n/).filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('build', () => {
  const d = useDaemon();
  const reg = useSeededRegistry('open');
  const authReg = useSeededRegistry('basic');
  let busybox = '';
  let ctx = '';
  const legacy = { DOCKER_BUILDKIT: '0' };

  before(async () => {
    busybox = reg().seeded.refs.busybox;
    ctx = makeTempDir('build-ctx');
    const r = await d().docker(['pull', busybox]);
    assert.equal(r.code, 0, r.stderr);
  });
  after(async () => {
    if (ctx) await removeDir(ctx);
  });

  function context(name: string, files: Record<string, string>): string {
    const dir = join(ctx, name);
    mkdirSync(dir, { recursive: true });
    for (const [f, body] of Object.entries(files)) {
      mkdirSync(join(dir, f, '..'), { recursive: true });
      writeFileSync(join(dir, f), body);
    }
    return dir;
  }

  /** The context cache's files (engine/build/context-cache.ts). */
  const cachedContexts = (): string[] => (existsSync(join(d().dataRoot, 'build', 'contexts')) ? readdirSync(join(d().dataRoot, 'build', 'contexts')) : []);

  async function inspect(ref: string): Promise<Record<string, any>> {
    const r = await d().request('GET', `/images/${ref}/json`);
    assert.equal(r.status, 200, r.text());
    return r.json() as Record<string, any>;
  }

  const FULL = (base: string) => `# syntax=docker/dockerfile:1
ARG BASE=${base}
FROM \${BASE} AS base
ARG GREETING=hello
ARG EXTRA
ENV APP_HOME=/app \\
    MODE=\${GREETING:-none}-x
LABEL org.example.name="full test" version=1
WORKDIR \${APP_HOME}
COPY --chown=1000:1000 src/ ./src/
COPY top.txt data.tar.gz ./
ADD data.tar.gz /unpacked/
RUN echo "run:$GREETING:$EXTRA:$MODE" > /app/run.txt && ls /unpacked > /app/unpacked.txt
RUN ["/bin/sh", "-c", "id -u > /app/uid.txt"]
RUN <<EOF
echo heredoc > /app/heredoc.txt
EOF
EXPOSE 8080 9000/udp
VOLUME /data
USER berth
HEALTHCHECK --interval=30s --timeout=3s CMD true
STOPSIGNAL SIGINT
ENTRYPOINT ["/bin/sh", "-c"]
CMD ["cat /app/run.txt"]
`;

  let fullId = '';
  it('builds every instruction through DOCKER_BUILDKIT=0 docker build, and the image runs as built', async () => {
    const tgz = gzipSync(await tarOf([{ name: 'inside/a.txt', body: 'from the archive\n' }]));
    const dir = context('full', { 'Dockerfile': FULL(busybox), 'src/main.c': 'int main;\n', 'top.txt': 'top\n', '.dockerignore': 'ignored*\n' });
    writeFileSync(join(dir, 'data.tar.gz'), tgz);
    writeFileSync(join(dir, 'ignored.txt'), 'secret');
    const r = await d().docker(['build', '-t', 'built/full:1', '--build-arg', 'EXTRA=xtra', '--label', 'from.cli=yes', dir], { env: legacy, timeoutMs: 180_000 });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /^Step 1\/21 : ARG BASE=/m);
    assert.match(r.stdout, /^Step 2\/21 : FROM \$\{BASE\} AS base/m);
    assert.match(r.stdout, /^Step 21\/21 : LABEL "from.cli"="yes"/m);
    assert.match(r.stdout, / ---> Running in [0-9a-f]{12}/);
    assert.match(r.stdout, / ---> Removed intermediate container [0-9a-f]{12}/);
    assert.match(r.stdout, /Successfully built [0-9a-f]{12}/);
    assert.match(r.stdout, /Successfully tagged built\/full:1/);
    const img = await inspect('built/full:1');
    fullId = img.Id;
    const c = img.Config;
    assert.ok(c.Env.includes('APP_HOME=/app') && c.Env.includes('MODE=hello-x'), JSON.stringify(c.Env));
    assert.equal(c.WorkingDir, '/app');
    assert.equal(c.User, 'berth');
    assert.deepEqual(c.Labels, { 'org.example.name': 'full test', version: '1', 'from.cli': 'yes' });
    assert.deepEqual(c.Entrypoint, ['/bin/sh', '-c']);
    assert.deepEqual(c.Cmd, ['cat /app/run.txt']);
    assert.deepEqual(Object.keys(c.ExposedPorts).sort(), ['8080/tcp', '9000/udp']);
    assert.deepEqual(Object.keys(c.Volumes), ['/data']);
    assert.equal(c.StopSignal, 'SIGINT');
    assert.deepEqual(c.Healthcheck.Test, ['CMD-SHELL', 'true']);
    assert.equal(c.Healthcheck.Interval, 30e9);

    const run = await d().docker(['run', '--rm', 'built/full:1']);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'run:hello:xtra:hello-x\n');
    const files = await d().docker(['run', '--rm', 'built/full:1', 'cat /app/uid.txt /app/heredoc.txt /app/unpacked.txt /app/top.txt; stat -c "%u:%g %n" /app/src/main.c; ls /app; whoami; pwd']);
    assert.equal(files.code, 0, files.stderr);
    assert.equal(files.stdout, '0\nheredoc\ninside\ntop\n1000:1000 /app/src/main.c\ndata.tar.gz\nheredoc.txt\nrun.txt\nsrc\ntop.txt\nuid.txt\nunpacked.txt\nberth\n/app\n');

    const hist = await d().request('GET', '/images/built/full:1/history');
    const createdBy = (hist.json() as { CreatedBy: string }[]).map((h) => h.CreatedBy);
    assert.ok(createdBy.includes('/bin/sh -c #(nop)  CMD ["cat /app/run.txt"]'), createdBy.join('\n'));
    assert.ok(createdBy.includes('/bin/sh -c #(nop)  USER berth'), createdBy.join('\n'));
    assert.ok(createdBy.includes('/bin/sh -c #(nop)  HEALTHCHECK &{Test:[CMD-SHELL true] Interval:30s Timeout:3s StartPeriod:0s StartInterval:0s Retries:0}'), createdBy.join('\n'));
    assert.ok(createdBy.includes('/bin/sh -c #(nop) WORKDIR /app'), createdBy.join('\n'));
    assert.ok(createdBy.some((h) => /^\|2 EXTRA=xtra GREETING=hello \/bin\/sh -c echo "run:/.test(h)), createdBy.join('\n'));
    assert.ok(createdBy.some((h) => /^\/bin\/sh -c #\(nop\) COPY multi:[0-9a-f]{64} in \/app\/ $/.test(h)), createdBy.join('\n'));
    assert.ok(createdBy.some((h) => /^\/bin\/sh -c #\(nop\) COPY --chown=1000:1000 dir:[0-9a-f]{64} in \/app\/src\/ $/.test(h)), createdBy.join('\n'));
    // the ignored file never reached the image
    const ls = await d().docker(['run', '--rm', 'built/full:1', 'ls /app/ignored.txt 2>&1; true']);
    assert.match(ls.stdout, /No such file/);
  });

  it('takes every step from the cache on an unchanged rebuild and yields the same image; nocache rebuilds', async () => {
    const dir = join(ctx, 'full');
    const r = await d().docker(['build', '-t', 'built/full:2', '--build-arg', 'EXTRA=xtra', '--label', 'from.cli=yes', dir], { env: legacy, timeoutMs: 180_000 });
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /Running in/);
    const steps = (r.stdout.match(/^Step /gm) ?? []).length;
    assert.equal((r.stdout.match(/Using cache/g) ?? []).length, steps - 2, r.stdout); // all but the ARG before FROM and the FROM
    assert.equal((await inspect('built/full:2')).Id, fullId);
    const changed = await d().docker(['build', '-q', '--build-arg', 'EXTRA=other', '--label', 'from.cli=yes', dir], { env: legacy, timeoutMs: 180_000 });
    assert.equal(changed.code, 0, changed.stderr);
    assert.match(changed.stdout, /^sha256:[0-9a-f]{64}\n$/);
    assert.notEqual(changed.stdout.trim(), fullId);
    const nc = await d().docker(['build', '--no-cache', '--build-arg', 'EXTRA=xtra', '--label', 'from.cli=yes', dir], { env: legacy, timeoutMs: 180_000 });
    assert.equal(nc.code, 0, nc.stderr);
    assert.doesNotMatch(nc.stdout, /Using cache/);
  });

  it('builds multi-stage Dockerfiles up to --target, copying between stages (docker build without buildx)', async () => {
    const df = [
      `FROM ${busybox} AS builder`,
      'RUN mkdir /out && echo compiled > /out/bin.txt && chown 1000:1000 /out/bin.txt',
      'FROM scratch AS unused-scratch',
      'COPY --from=builder /out/bin.txt /bin.txt',
      `FROM ${busybox} AS final`,
      'COPY --from=builder /out /opt/out',
      'COPY --from=0 /out/bin.txt /opt/again.txt',
      'CMD ["cat", "/opt/out/bin.txt"]',
      'FROM final AS later',
      'RUN exit 7',
    ].join('\n');
    const dir = context('multi', { Dockerfile: df });
    // No DOCKER_BUILDKIT and no buildx: the CLI picks the classic builder from /_ping's Builder-Version.
    const r = await d().docker(['build', '--target', 'final', '-t', 'built/multi', dir], { timeoutMs: 180_000 });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.doesNotMatch(r.stdout, /exit 7/);
    const run = await d().docker(['run', '--rm', 'built/multi']);
    assert.equal(run.stdout, 'compiled\n');
    const st = await d().docker(['run', '--rm', 'built/multi', 'stat', '-c', '%u %n', '/opt/out/bin.txt', '/opt/again.txt']);
    assert.equal(st.stdout, '1000 /opt/out/bin.txt\n1000 /opt/again.txt\n');
    const missing = await d().docker(['build', '--target', 'nosuch', dir], { env: legacy });
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr + missing.stdout, /failed to reach build target nosuch/);
  });

  it('reports a failing RUN with its command and exit code, and keeps no intermediate container with --force-rm', async () => {
    const dir = context('fail', { Dockerfile: `FROM ${busybox}\nRUN echo before-failure\nRUN exit 3\nRUN echo never\n` });
    const before = ((await d().request('GET', '/containers/json?all=1')).json() as unknown[]).length;
    const r = await d().docker(['build', '--force-rm', dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(r.code, 3, r.stderr + r.stdout);
    assert.match(r.stderr, /The command '\/bin\/sh -c exit 3' returned a non-zero code: 3/);
    assert.match(r.stdout, /before-failure/);
    assert.doesNotMatch(r.stdout, /never/);
    const afterList = (await d().request('GET', '/containers/json?all=1')).json() as unknown[];
    assert.equal(afterList.length, before);
    // The raw stream: errorDetail with the code, error with the message.
    const res = await d().request('POST', '/build?forcerm=1', { body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nRUN exit 3\n` }]), headers: { 'Content-Type': 'application/x-tar' } });
    assert.equal(res.status, 200);
    const last = records(res.text()).at(-1)!;
    const old = await d().request('POST', '/v1.29/build', { body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nENV A=1\n` }]) });
    assert.ok(!records(old.text()).some((m) => m.aux), old.text());
    assert.ok(records(old.text()).some((m) => /^Successfully built [0-9a-f]{12}\n$/.test(String(m.stream))), old.text());
    assert.deepEqual(last, { errorDetail: { code: 3, message: "The command '/bin/sh -c exit 3' returned a non-zero code: 3" }, error: "The command '/bin/sh -c exit 3' returned a non-zero code: 3" });
  });

  it('refuses hostile context tars and leaves nothing outside', async () => {
    const outside = join(ctx, 'escaped');
    const cases = [
      await tarOf([{ name: 'Dockerfile', body: 'FROM scratch\n' }, { name: '../../../../../../../../' + outside.slice(1), body: 'x' }]),
      await tarOf([{ name: 'Dockerfile', body: 'FROM scratch\n' }, { name: 'link', type: 'symlink', linkname: ctx }, { name: 'link/escaped', body: 'x' }]),
    ];
    for (const body of [...cases, gzipSync(cases[0]!)]) {
      const res = await d().request('POST', '/build', { body, headers: { 'Content-Type': 'application/x-tar' } });
      assert.equal(res.status, 400, res.text());
      assert.match((res.json() as { message: string }).message, /invalid build context: refusing context entry/);
    }
    assert.equal(existsSync(outside), false);
    const garbage = await d().request('POST', '/build', { body: Buffer.from('not a tar at all, not at all'.repeat(40)) });
    assert.equal(garbage.status, 400);
    // Links are resolved inside their roots: a context link to a host file names nothing in the
    // context, and an image's link to /etc leads into the image's /etc, not the host's.
    const marker = `berth-build-marker-${process.pid}`;
    const viaContext = await d().request('POST', '/build', {
      body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nCOPY passwd /p\n` }, { name: 'passwd', type: 'symlink', linkname: '/etc/passwd' }]),
    });
    assert.match(records(viaContext.text()).at(-1)!.error as string, /file not found in build context/);
    const viaImage = await d().request('POST', '/build?t=built/linked', {
      body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nRUN ln -s /etc /linked\nCOPY ${marker} /linked/\n` }, { name: marker, body: 'inside' }]),
    });
    assert.ok(records(viaImage.text()).some((m) => m.aux), viaImage.text());
    assert.equal(existsSync(`/etc/${marker}`), false);
    // ADD of a hostile archive from the context is refused the same way.
    const evil = gzipSync(await tarOf([{ name: `../../../../../../../../tmp/${marker}`, body: 'x' }]));
    const viaAdd = await d().request('POST', '/build', {
      body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nADD evil.tgz /x/\n` }, { name: 'evil.tgz', body: evil }]),
    });
    assert.match(records(viaAdd.text()).at(-1)!.error as string, /ADD failed: archive evil.tgz: refusing archive entry/);
    assert.equal(existsSync(`/tmp/${marker}`), false);
    assert.equal((await d().docker(['run', '--rm', 'built/linked', 'cat', `/etc/${marker}`])).stdout, 'inside');
  });

  it('resolves an image\'s link through a missing directory inside the image (`missing/../..` climbs no higher than its root)', async () => {
    const marker = `berth-build-dangling-${process.pid}-${randomBytes(3).toString('hex')}`;
    const up = '../'.repeat(24);
    // A COPY destination through such a link writes into the image's /tmp, not the host's.
    const dest = await d().request('POST', '/build?t=built/dangling-dest', {
      body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nRUN ln -s missing/${up}tmp /dangling\nCOPY ${marker} /dangling/\n` }, { name: marker, body: 'inside' }]),
    });
    const escaped = existsSync(`/tmp/${marker}`);
    rmSync(`/tmp/${marker}`, { force: true });
    assert.equal(escaped, false, 'written on the host');
    assert.ok(records(dest.text()).some((m) => m.aux), dest.text());
    assert.equal((await d().docker(['run', '--rm', 'built/dangling-dest', 'cat', `/tmp/${marker}`])).stdout, 'inside');
    // A COPY --from source through one reads the stage's /etc/passwd, not the host's.
    const src = await d().request('POST', '/build?t=built/dangling-src', {
      body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox} AS a\nRUN ln -s missing/${up}etc /dangling\nFROM ${busybox}\nCOPY --from=a /dangling/passwd /copied\n` }]),
    });
    assert.ok(records(src.text()).some((m) => m.aux), src.text());
    const copied = (await d().docker(['run', '--rm', 'built/dangling-src', 'cat', '/copied'])).stdout;
    assert.equal(copied, (await d().docker(['run', '--rm', 'built/dangling-src', 'cat', '/etc/passwd'])).stdout, 'the image\'s own passwd');
    assert.match(copied, /^berth:x:1000:1000:/m);
  });

  it('reads bzip2 and xz contexts and a Dockerfile at another path', async () => {
    const { execFileSync } = await import('node:child_process');
    const tar = await tarOf([{ name: 'sub/Build.file', body: `FROM ${busybox}\nCOPY hello.txt /\nCMD ["cat", "/hello.txt"]\n` }, { name: 'hello.txt', body: 'compressed\n' }]);
    for (const tool of ['bzip2', 'xz']) {
      const body = execFileSync(tool, ['-c'], { input: tar });
      const res = await d().request('POST', `/build?dockerfile=sub/Build.file&t=built/${tool}`, { body, headers: { 'Content-Type': 'application/x-tar' } });
      assert.equal(res.status, 200);
      assert.ok(records(res.text()).some((m) => typeof m.aux === 'object'), res.text());
      const run = await d().docker(['run', '--rm', `built/${tool}`]);
      assert.equal(run.stdout, 'compressed\n');
    }
    const missing = await d().request('POST', '/build?dockerfile=nope', { body: tar });
    assert.equal(missing.status, 400);
    assert.match(missing.text(), /Cannot locate specified Dockerfile: nope/);
  });

  it('answers BuildKit, squash and git remote requests with clear errors; /_ping and /version name the classic builder', async () => {
    const tar = await tarOf([{ name: 'Dockerfile', body: 'FROM scratch\n' }]);
    const v2 = await d().request('POST', '/build?version=2', { body: tar });
    assert.equal(v2.status, 400);
    assert.match(v2.text(), /DOCKER_BUILDKIT=0/);
    const squash = await d().request('POST', '/build?squash=1', { body: tar });
    assert.equal(squash.status, 400);
    assert.match(squash.text(), /squash/);
    const badTag = await d().request('POST', '/build?t=' + encodeURIComponent('Bad Tag!'), { body: tar });
    assert.equal(badTag.status, 400, badTag.text());
    const badArgs = await d().request('POST', '/build?buildargs=' + encodeURIComponent('{not json'), { body: tar });
    assert.equal(badArgs.status, 400, badArgs.text());
    const remote = await d().request('POST', '/build?remote=https://example.invalid/repo.git', { body: '' });
    assert.equal(remote.status, 501);
    assert.match(remote.text(), /remote/);
    for (const p of ['/_ping', '/version', '/v1.41/version']) {
      const res = await d().request('GET', p);
      assert.equal(res.headers['builder-version'], '1', p);
    }
  });

  it('misses the COPY step when a source file\'s content (same size), mode, owner or name changes', async () => {
    const df = { name: 'Dockerfile', body: `FROM ${busybox}\nCOPY src /src\nRUN cat /src/*\n` };
    const build = async (files: Parameters<typeof tarOf>[0]) => {
      const res = await d().request('POST', '/build', { body: await tarOf([df, { name: 'src', type: 'directory', mode: 0o755 }, ...files]) });
      const out = records(res.text());
      assert.ok(!out.some((m) => m.error), res.text());
      return { id: (out.find((m) => m.aux) as { aux: { ID: string } }).aux.ID, hits: out.filter((m) => m.stream === ' ---> Using cache\n').length };
    };
    const base = [{ name: 'src/a.txt', body: 'alpha\n' }, { name: 'src/b.txt', body: 'bravo\n', mode: 0o600 }];
    const first = await build(base);
    const again = await build(base);
    assert.deepEqual(again, { id: first.id, hits: 2 });
    const variants: [string, Parameters<typeof tarOf>[0]][] = [
      ['content', [{ name: 'src/a.txt', body: 'alphA\n' }, base[1]!]],
      ['mode', [{ ...base[0]!, mode: 0o755 }, base[1]!]],
      ['owner', [{ ...base[0]!, uid: 1000 }, base[1]!]],
      ['name', [{ ...base[0]!, name: 'src/c.txt' }, base[1]!]],
    ];
    for (const [what, files] of variants) {
      const r = await build(files);
      assert.equal(r.hits, 0, `a changed ${what} must miss the COPY step`);
      assert.notEqual(r.id, first.id, what);
    }
  });

  it('keeps the cache across a restart and removes it with /build/prune', async () => {
    const tar = await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nRUN echo cached > /c.txt\nENV K=v\n` }]);
    const first = records((await d().request('POST', '/build', { body: tar })).text());
    const id = (first.find((m) => m.aux) as { aux: { ID: string } }).aux.ID;
    assert.ok(cachedContexts().length > 0, 'the context was kept');
    await d().restart();
    assert.deepEqual(cachedContexts(), [], 'start-up empties the context cache');
    const again = records((await d().request('POST', '/build', { body: tar })).text());
    assert.equal((again.find((m) => m.aux) as { aux: { ID: string } }).aux.ID, id);
    assert.equal(again.filter((m) => m.stream === ' ---> Using cache\n').length, 2);
    const tagged = await d().docker(['build', '-q', '-t', 'built/keepme', '-'], { input: `FROM ${busybox}\nRUN echo kept > /k\n`, env: legacy, timeoutMs: 120_000 });
    assert.equal(tagged.code, 0, tagged.stderr);
    const partial = await d().request('POST', '/build/prune');
    assert.equal(partial.status, 200, partial.text());
    const rebuilt = await d().docker(['build', '-t', 'built/keepme', '-'], { input: `FROM ${busybox}\nRUN echo kept > /k\n`, env: legacy, timeoutMs: 120_000 });
    assert.match(rebuilt.stdout, /Using cache/, 'a named image keeps its steps without all');
    const prune = await d().request('POST', '/build/prune?all=1');
    assert.equal(prune.status, 200, prune.text());
    const body = prune.json() as { CachesDeleted: string[] | null; SpaceReclaimed: number };
    assert.ok((body.CachesDeleted ?? []).length >= 2, prune.text());
    assert.ok(body.SpaceReclaimed > 0, prune.text());
    assert.equal((await d().request('GET', `/images/${id}/json`)).status, 404);
    assert.deepEqual(cachedContexts(), [], 'prune empties the context cache');
    const cold = records((await d().request('POST', '/build', { body: tar })).text());
    assert.equal(cold.filter((m) => m.stream === ' ---> Using cache\n').length, 0);
    const empty = await d().request('POST', '/build/prune?filters=' + encodeURIComponent('{"until":["1h"]}'));
    assert.equal(empty.status, 200);
    assert.equal((empty.json() as { CachesDeleted: unknown }).CachesDeleted, null);
    const inUse = await d().request('POST', '/build/prune?all=1&filters=' + encodeURIComponent('{"inuse":["true"]}'));
    assert.equal((inUse.json() as { CachesDeleted: unknown }).CachesDeleted, null);
    const byId = await d().request('POST', '/build/prune?all=1&keep-storage=0');
    assert.ok(((byId.json() as { CachesDeleted: string[] }).CachesDeleted ?? []).length >= 2, byId.text());
  });

  it('leaves no container or temp dir behind when the client disconnects mid-build', async () => {
    const tar = await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nRUN echo started; sleep 60\n` }]);
    const before = ((await d().request('GET', '/containers/json?all=1')).json() as unknown[]).length;
    const res = await d().stream('POST', '/build?nocache=1', { body: tar });
    await new Promise<void>((resolve) => {
      res.on('data', (c: Buffer) => {
        if (c.toString().includes('started')) resolve();
      });
    });
    res.destroy();
    let left = -1;
    for (let i = 0; i < 50; i++) {
      left = ((await d().request('GET', '/containers/json?all=1')).json() as unknown[]).length;
      if (left === before) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(left, before);
    const { readdirSync } = await import('node:fs');
    let work: string[] = [];
    for (let i = 0; i < 50; i++) {
      work = readdirSync(join(d().dataRoot, 'build')).filter((n) => n !== 'contexts'); // the context cache's own dir
      if (work.length === 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.deepEqual(work, []);
  });

  it('builds through docker-py images.build with buildargs, and the image runs', { skip: !haveDockerPy() && 'no docker-py venv' }, async () => {
    const dir = context('py', { Dockerfile: `FROM ${busybox}\nARG WHO\nRUN echo "hi $WHO" > /who.txt\nUSER 1000\nWORKDIR /home/berth\nENTRYPOINT ["cat", "/who.txt"]\n` });
    const script = `
import docker, json
c = docker.from_env()
img, logs = c.images.build(path=${JSON.stringify(dir)}, tag="built/py:1", buildargs={"WHO": "py"}, rm=True)
out = c.containers.run("built/py:1", remove=True)
print(json.dumps({"id": img.id, "out": out.decode(), "user": img.attrs["Config"]["User"], "wd": img.attrs["Config"]["WorkingDir"], "steps": sum(1 for l in logs if "stream" in l and l["stream"].startswith("Step "))}))
`;
    const r = await runDockerPy(d().socket, script);
    assert.equal(r.code, 0, r.stderr);
    const o = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { id: string; out: string; user: string; wd: string; steps: number };
    assert.equal(o.out, 'hi py\n');
    assert.equal(o.user, '1000');
    assert.equal(o.wd, '/home/berth');
    assert.equal(o.steps, 6);
    assert.match(o.id, /^sha256:[0-9a-f]{64}$/);
  });

  it('runs ONBUILD triggers in children, ADDs an http URL, expands wildcards, applies --chmod, SHELL and .dockerignore exceptions', async () => {
    const { createServer } = await import('node:http');
    const server = createServer((req, res) => {
      res.writeHead(200, { 'Last-Modified': 'Wed, 01 Jan 2020 00:00:00 GMT' });
      res.end(`served ${req.url}\n`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as { port: number }).port;
    try {
      const parent = context('onbuild-parent', { Dockerfile: `FROM ${busybox}\nONBUILD COPY trigger.txt /from-trigger.txt\nONBUILD RUN echo ran > /ran.txt\n` });
      const p = await d().docker(['build', '-t', 'built/onbuild-parent', parent], { env: legacy, timeoutMs: 120_000 });
      assert.equal(p.code, 0, p.stderr);
      assert.equal((await inspect('built/onbuild-parent')).Config.OnBuild.length, 2);
      const child = context('onbuild-child', {
        Dockerfile: [
          'FROM built/onbuild-parent',
          `ADD http://127.0.0.1:${port}/remote.txt /downloads/`,
          'COPY *.cfg /cfg/',
          'COPY --chmod=0600 secret.key /secret.key',
          'SHELL ["/bin/sh", "-e", "-c"]',
          'RUN test "$(cat /from-trigger.txt)" = trig && echo shell-ok > /shell.txt',
          'COPY keep/ /keep/',
        ].join('\n'),
        'trigger.txt': 'trig',
        'a.cfg': 'a',
        'b.cfg': 'b',
        'c.txt': 'c',
        'secret.key': 'k',
        'keep/yes.txt': 'y',
        'keep/no.txt': 'n',
        '.dockerignore': 'keep/*\n!keep/yes.txt\n',
      });
      const c = await d().docker(['build', '-t', 'built/onbuild-child', child], { env: legacy, timeoutMs: 120_000 });
      assert.equal(c.code, 0, c.stderr + c.stdout);
      assert.match(c.stdout, /# Executing 2 build triggers/);
      const r = await d().docker(['run', '--rm', 'built/onbuild-child', 'sh', '-c', 'cat /ran.txt /downloads/remote.txt /shell.txt; ls /cfg /keep; stat -c "%a %n" /secret.key /downloads/remote.txt; date -u -r /downloads/remote.txt +%Y']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, 'ran\nserved /remote.txt\nshell-ok\n/cfg:\na.cfg\nb.cfg\n\n/keep:\nyes.txt\n600 /secret.key\n600 /downloads/remote.txt\n2020\n');
      assert.deepEqual((await inspect('built/onbuild-child')).Config.OnBuild ?? [], []);
    } finally {
      server.close();
    }
  });

  it('pulls FROM images with the X-Registry-Config credentials the CLI sends, and fails clearly without them', async () => {
    const { registry, seeded } = authReg();
    const dir = context('auth', { Dockerfile: `FROM ${seeded.refs.busybox}\nRUN echo authed > /a.txt\n` });
    const denied = await d().docker(['build', dir], { env: legacy, timeoutMs: 120_000 });
    assert.notEqual(denied.code, 0, denied.stdout);
    assert.match(denied.stderr, /unauthorized|authentication required|no basic auth credentials|denied/i);
    const login = await d().docker(['login', registry.host, '-u', registry.username!, '--password-stdin'], { input: registry.password });
    assert.equal(login.code, 0, login.stderr);
    const ok = await d().docker(['build', '-t', 'built/authed', dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(ok.code, 0, ok.stderr + ok.stdout);
    assert.equal((await d().docker(['run', '--rm', 'built/authed', 'cat', '/a.txt'])).stdout, 'authed\n');
  });

  it('with cachefrom, takes hits only from the named images\' build chains', async () => {
    const dir = context('cachefrom', { Dockerfile: `FROM ${busybox}\nRUN echo one > /one\nRUN echo two > /two\n` });
    const first = await d().docker(['build', '-t', 'built/cachefrom', dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(first.code, 0, first.stderr);
    const named = await d().docker(['build', '--cache-from', 'built/cachefrom', dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal((named.stdout.match(/Using cache/g) ?? []).length, 2, named.stdout);
    const other = await d().docker(['build', '--cache-from', busybox, dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(other.code, 0, other.stderr);
    assert.equal((other.stdout.match(/Using cache/g) ?? []).length, 0, other.stdout);
  });

  it('with cachefrom, takes hits from an image pulled from a registry, matched by its history', async () => {
    const { registry } = reg();
    const ref = `${registry.host}/built/cachefrom-pulled:1`;
    const df = (last: string) => `FROM ${busybox}\nRUN echo one > /one\nENV STAGE=pulled\nCOPY f.txt /f.txt\nWORKDIR /w\nRUN ${last}\nCMD ["cat", "/two"]\n`;
    const dir = context('cachefrom-pulled', { Dockerfile: df('echo two > /two'), 'f.txt': 'file\n' });
    const first = await d().docker(['build', '-t', ref, dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(first.code, 0, first.stderr);
    assert.equal((await d().docker(['push', ref])).code, 0);
    const built = await inspect(ref);
    // Nothing local is left to hit: the image and its step cache are gone; only the registry has it.
    assert.equal((await d().docker(['rmi', ref])).code, 0);
    assert.equal((await d().docker(['builder', 'prune', '-af'])).code, 0);
    const plain = await d().docker(['build', '-q', dir], { env: legacy, timeoutMs: 120_000 });
    assert.notEqual(plain.stdout.trim(), built.Id, 'without cache-from the steps run again');
    assert.equal((await d().docker(['rmi', plain.stdout.trim()])).code, 0);
    assert.equal((await d().docker(['builder', 'prune', '-af'])).code, 0);
    assert.equal((await d().docker(['pull', ref])).code, 0);

    const hit = await d().docker(['build', '--cache-from', ref, '-t', 'built/cachefrom-again', dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(hit.code, 0, hit.stderr);
    assert.equal((hit.stdout.match(/Using cache/g) ?? []).length, 6, hit.stdout);
    assert.doesNotMatch(hit.stdout, /Running in/);
    const again = await inspect('built/cachefrom-again');
    assert.equal(again.Id, built.Id);
    assert.equal((await d().docker(['run', '--rm', 'built/cachefrom-again', 'sh', '-c', 'cat /one /two /f.txt; pwd; echo $STAGE'])).stdout, 'one\ntwo\nfile\n/w\npulled\n');

    // A changed step runs; the steps before it still come from the pulled image.
    writeFileSync(join(dir, 'Dockerfile'), df('echo three > /two'));
    const changed = await d().docker(['build', '--cache-from', ref, '-t', 'built/cachefrom-changed', dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(changed.code, 0, changed.stderr);
    assert.equal((changed.stdout.match(/Using cache/g) ?? []).length, 4, changed.stdout);
    assert.equal((await d().docker(['run', '--rm', 'built/cachefrom-changed'])).stdout, 'three\n');
    const hist = (await d().request('GET', '/images/built/cachefrom-changed/history')).json() as { CreatedBy: string; Created: number }[];
    const pulledHist = (await d().request('GET', `/images/${ref}/history`)).json() as { CreatedBy: string; Created: number }[];
    const entry = (h: { CreatedBy: string; Created: number }) => `${h.Created} ${h.CreatedBy}`;
    assert.deepEqual(hist.slice(2).map(entry), pulledHist.slice(2).map(entry), 'the steps before the change are the pulled ones, times included');
  });

  it('prints Running in and Removed intermediate container for metadata and WORKDIR steps, as dockerd', async () => {
    const dir = context('meta-containers', { Dockerfile: `FROM ${busybox}\nENV A=1\nWORKDIR /x\nLABEL l=1\nCOPY Dockerfile /d\nCMD ["true"]\n` });
    const r = await d().docker(['build', '--no-cache', dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(r.code, 0, r.stderr);
    const steps = r.stdout.split(/^Step /m).slice(1);
    assert.equal(steps.length, 6);
    for (const i of [1, 2, 3, 5]) {
      const m = / ---> Running in ([0-9a-f]{12})\n ---> Removed intermediate container ([0-9a-f]{12})\n ---> [0-9a-f]{12}\n/.exec(steps[i]!);
      assert.ok(m, steps[i]);
      assert.equal(m[1], m[2], 'the same container');
      assert.equal((await d().request('GET', `/containers/${m[1]}/json`)).status, 404, 'removed');
    }
    assert.doesNotMatch(steps[4]!, /Running in/, 'COPY makes no container');
    const kept = await d().docker(['build', '--no-cache', '--rm=false', dir], { env: legacy, timeoutMs: 120_000 });
    const ids = [...kept.stdout.matchAll(/Running in ([0-9a-f]{12})/g)].map((m) => m[1]!);
    assert.equal(ids.length, 4);
    assert.doesNotMatch(kept.stdout, /Removed intermediate/);
    const ps = await d().docker(['ps', '-a', '-q']);
    for (const id of ids) assert.ok(ps.stdout.includes(id), `kept with --rm=false: ${id}`);
    assert.equal((await d().docker(['rm', ...ids])).code, 0);
  });

  it('builds compose 1.29 build: sections', { skip: !existsSync('/usr/bin/docker-compose') && 'no docker-compose' }, async () => {
    const dir = context('compose', {
      Dockerfile: `ARG BASE\nFROM \${BASE}\nARG MSG\nRUN echo "$MSG" > /msg.txt\nLABEL via=compose\nCMD ["cat", "/msg.txt"]\n`,
      'docker-compose.yml': `version: "3.8"\nservices:\n  app:\n    image: built/compose-app\n    build:\n      context: .\n      args:\n        BASE: ${busybox}\n        MSG: from-compose\n`,
    });
    const env = { ...process.env, DOCKER_HOST: `unix://${d().socket}`, DOCKER_CONFIG: d().dockerConfig, DOCKER_BUILDKIT: '0', COMPOSE_DOCKER_CLI_BUILD: '0' };
    const r = await run('/usr/bin/docker-compose', ['-p', 'berthbuild', '-f', join(dir, 'docker-compose.yml'), 'build'], { env, timeoutMs: 180_000 });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.equal((await inspect('built/compose-app')).Config.Labels.via, 'compose');
    assert.equal((await d().docker(['run', '--rm', 'built/compose-app'])).stdout, 'from-compose\n');
  });

  it('gives RUN the proxy args, extra hosts and network mode asked for, reads COPY heredocs and refuses BuildKit-only flags', async () => {
    const dir = context('runopts', {
      Dockerfile: [
        `FROM ${busybox}`,
        'RUN echo "$HTTP_PROXY" > /proxy.txt && grep -c "buildhost" /etc/hosts > /hosts.txt && ls /sys/class/net > /net.txt',
        'COPY <<EOF /from-heredoc.txt',
        'line one',
        'EOF',
      ].join('\n'),
    });
    const r = await d().docker(['build', '-t', 'built/runopts', '--build-arg', 'HTTP_PROXY=http://proxy.invalid:3128', '--add-host', 'buildhost:10.1.2.3', '--network', 'none', dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.doesNotMatch(r.stdout + r.stderr, /were not consumed/);
    const out = await d().docker(['run', '--rm', 'built/runopts', 'cat', '/proxy.txt', '/hosts.txt', '/net.txt', '/from-heredoc.txt']);
    assert.equal(out.stdout, 'http://proxy.invalid:3128\n1\nlo\nline one\n');
    const hist = ((await d().request('GET', '/images/built/runopts/history')).json() as { CreatedBy: string }[]).map((h) => h.CreatedBy).join('\n');
    assert.doesNotMatch(hist, /proxy\.invalid/);
    assert.match(hist, /^\|0 \/bin\/sh -c echo "\$HTTP_PROXY"/m);
    const unknown = await d().request('POST', '/build', { body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nRUN echo ran-before\nFROB x\n` }]) });
    assert.doesNotMatch(unknown.text(), /ran-before/);
    assert.match(records(unknown.text()).at(-1)!.error as string, /line 3: unknown instruction: FROB/);
    const mount = await d().request('POST', '/build', { body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nRUN --mount=type=cache,target=/x true\n` }]) });
    assert.match(records(mount.text()).at(-1)!.error as string, /--mount option requires BuildKit/);
  });

  it('gives RUN the ulimits and cgroup parent asked for', async () => {
    const parent = `berth-build-${process.pid}`;
    const dir = context('ulimits', { Dockerfile: `FROM ${busybox}\nRUN ulimit -n > /nofile.txt && grep -E ":memory:" /proc/self/cgroup > /cgroup.txt\n` });
    try {
      const r = await d().docker(['build', '-t', 'built/ulimits', '--ulimit', 'nofile=1000:2000', '--cgroup-parent', parent, dir], { env: legacy, timeoutMs: 120_000 });
      assert.equal(r.code, 0, r.stderr + r.stdout);
      const out = await d().docker(['run', '--rm', 'built/ulimits', 'cat', '/nofile.txt', '/cgroup.txt']);
      assert.match(out.stdout, new RegExp(`^1000\n.*:memory:/${parent}/[0-9a-f]{64}\n$`));
      const bad = await d().request('POST', '/build?ulimits=5', { body: await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\n` }]) });
      assert.equal(bad.status, 400);
      assert.equal(bad.json().message, 'invalid ulimits value: 5');
    } finally {
      for (const h of readdirSync('/sys/fs/cgroup')) {
        try {
          rmdirSync(join('/sys/fs/cgroup', h, parent));
        } catch {
          // Not made in this hierarchy.
        }
      }
    }
  });

  it('builds remote contexts: a tar fetched over http, or a Dockerfile fetched alone; git URLs are refused clearly', async () => {
    const { createServer } = await import('node:http');
    const tgz = gzipSync(await tarOf([{ name: 'Dockerfile', body: `FROM ${busybox}\nCOPY msg /msg\nCMD ["cat", "/msg"]\n` }, { name: 'msg', body: 'remote tar\n' }]));
    const server = createServer((req, res) => {
      if (req.url === '/ctx.tar.gz') res.end(tgz);
      else if (req.url === '/Dockerfile') res.end(`FROM ${busybox}\nRUN echo remote dockerfile > /msg\nCMD ["cat", "/msg"]\n`);
      else { res.writeHead(404); res.end(); }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      for (const [path, tag, want] of [['/ctx.tar.gz', 'built/remote-tar', 'remote tar\n'], ['/Dockerfile', 'built/remote-df', 'remote dockerfile\n']] as const) {
        const r = await d().docker(['build', '-t', tag, `${base}${path}`], { env: legacy, timeoutMs: 120_000 });
        assert.equal(r.code, 0, r.stderr + r.stdout);
        assert.equal((await d().docker(['run', '--rm', tag])).stdout, want);
      }
      // The CLI downloads URL contexts itself; API clients (docker-py's path=<url>) send remote=.
      for (const path of ['/ctx.tar.gz', '/Dockerfile']) {
        const res = await d().request('POST', `/build?t=built/raw-remote&remote=${encodeURIComponent(base + path)}`);
        assert.equal(res.status, 200);
        assert.ok(records(res.text()).some((m) => m.aux), res.text());
        assert.match((await d().docker(['run', '--rm', 'built/raw-remote'])).stdout, /^remote (tar|dockerfile)\n$/);
      }
      const missing = await d().request('POST', '/build?remote=' + encodeURIComponent(`${base}/nope`));
      assert.equal(missing.status, 400);
      assert.match(missing.text(), /status 404/);
    } finally {
      server.close();
    }
  });

  it('takes an unchanged context from the context cache; a changed file misses it and is copied as sent; a hostile tail is refused', async () => {
    // more than one 1 MiB block before the file that changes, so the miss reads the kept prefix back
    const big = randomBytes(2 * 1024 * 1024 + 12345);
    const dir = context('ctx-cache', {
      Dockerfile: `FROM ${busybox}\nCOPY . /ctx/\nRUN sha256sum /ctx/big.bin > /sum && cat /ctx/late.txt > /late\nCMD ["cat", "/sum", "/late"]\n`,
      '.dockerignore': 'ignored.txt\n',
      'ignored.txt': 'never sent',
      'late.txt': 'one',
    });
    writeFileSync(join(dir, 'big.bin'), big);
    const sum = createHash('sha256').update(big).digest('hex');
    const build = async () => {
      const r = await d().docker(['build', '-t', 'built/ctx-cache', dir], { env: legacy, timeoutMs: 120_000 });
      assert.equal(r.code, 0, r.stderr + r.stdout);
      return { hits: (r.stdout.match(/Using cache/g) ?? []).length, out: (await d().docker(['run', '--rm', 'built/ctx-cache'])).stdout };
    };
    const first = await build();
    assert.equal(first.out, `${sum}  /ctx/big.bin\none`);
    const kept = cachedContexts().length;
    assert.ok(kept > 0, 'the context was kept');
    assert.deepEqual(await build(), { hits: 3, out: first.out });
    assert.equal(cachedContexts().length, kept, 'an unchanged context is not kept twice');
    writeFileSync(join(dir, 'late.txt'), 'two');
    const changed = await build();
    assert.equal(changed.hits, 0, 'a changed file misses the COPY step');
    assert.equal(changed.out, `${sum}  /ctx/big.bin\ntwo`);
    assert.equal((await d().docker(['run', '--rm', 'built/ctx-cache', 'ls', '/ctx'])).stdout.split('\n').includes('ignored.txt'), false);
    // A tar that starts as a kept one and then escapes is refused as any hostile tar.
    const outside = join(ctx, 'escaped-late');
    const head = [{ name: 'Dockerfile', body: `FROM ${busybox}\nCOPY . /x/\n` }, { name: 'big.bin', body: big }];
    const benign = await d().request('POST', '/build', { body: await tarOf([...head, { name: 'ok.txt', body: 'ok' }]) });
    assert.ok(records(benign.text()).some((m) => m.aux), benign.text());
    const hostile = await d().request('POST', '/build', { body: await tarOf([...head, { name: '../../../../../../../../' + outside.slice(1), body: 'x' }]) });
    assert.equal(hostile.status, 400, hostile.text());
    assert.match((hostile.json() as { message: string }).message, /invalid build context: refusing context entry/);
    assert.equal(existsSync(outside), false);
    // Both of the CLI's prunes empty the context cache.
    for (const prune of [['builder', 'prune', '-f'], ['system', 'prune', '-f']]) {
      assert.ok(cachedContexts().length > 0);
      const r = await d().docker(prune, { timeoutMs: 60_000 });
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(cachedContexts(), [], prune.join(' '));
      await d().docker(['build', '-q', dir], { env: legacy, timeoutMs: 120_000 });
    }
  });

  it('takes a 20 MiB context sent again from the cache; one byte changed in its middle or a changed mode misses the COPY step', async () => {
    const data = randomBytes(20 * 1024 * 1024);
    const df = { name: 'Dockerfile', body: `FROM ${busybox}\nCOPY data.bin /data/data.bin\nRUN sha256sum /data/data.bin > /data/sum\nCMD ["cat", "/data/sum"]\n` };
    const build = async (body: Buffer, mode = 0o644) => {
      const res = await d().request('POST', '/build?t=built/big-ctx', { body: await tarOf([df, { name: 'data.bin', body, mode }]) });
      const out = records(res.text());
      assert.ok(!out.some((m) => m.error), res.text());
      return { id: (out.find((m) => m.aux) as { aux: { ID: string } }).aux.ID, hits: out.filter((m) => m.stream === ' ---> Using cache\n').length };
    };
    const sumOf = (b: Buffer) => `${createHash('sha256').update(b).digest('hex')}  /data/data.bin\n`;
    const first = await build(data);
    assert.deepEqual(await build(data), { id: first.id, hits: 3 });
    const flipped = Buffer.from(data);
    flipped[10 * 1024 * 1024 + 12345] ^= 0x01;
    const changed = await build(flipped);
    assert.equal(changed.hits, 0, 'one byte changed in the middle must miss the COPY step');
    assert.notEqual(changed.id, first.id);
    assert.equal((await d().docker(['run', '--rm', 'built/big-ctx'])).stdout, sumOf(flipped));
    const moded = await build(data, 0o755);
    assert.equal(moded.hits, 0, 'a changed mode must miss the COPY step');
    assert.notEqual(moded.id, first.id);
    assert.equal((await d().docker(['run', '--rm', 'built/big-ctx', 'stat', '-c', '%a', '/data/data.bin'])).stdout, '755\n');
    // A client gone halfway through a body that matched a kept context so far leaves nothing behind.
    const whole = await tarOf([df, { name: 'data.bin', body: data, mode: 0o644 }]);
    await new Promise<void>((resolve) => {
      const req = httpRequest({ socketPath: d().socket, path: '/build', method: 'POST', headers: { 'Content-Length': whole.length } });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write(whole.subarray(0, 8 * 1024 * 1024), () => setTimeout(() => req.destroy(), 100));
    });
    let work: string[] = [];
    for (let i = 0; i < 50; i++) {
      work = readdirSync(join(d().dataRoot, 'build')).filter((n) => n !== 'contexts');
      if (work.length === 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.deepEqual(work, []);
    assert.deepEqual(await build(data), { id: first.id, hits: 3 }, 'the whole context again still hits');
    assert.equal((await d().docker(['run', '--rm', 'built/big-ctx'])).stdout, sumOf(data));
  });

  it('reads a Dockerfile that .dockerignore excludes and leaves it out of COPY .; the rest of the filtering is the client\'s, as with dockerd', async () => {
    const dir = context('ignore-all', { Dockerfile: `FROM ${busybox}\nCOPY . /ctx/\nRUN ls -A /ctx > /listing\nCMD ["cat", "/listing"]\n`, '.dockerignore': '*\n!keep*\n!sub/**/*.txt\n', 'keep.me': 'k', 'drop.me': 'd', 'sub/a/b.txt': 'b', 'sub/a/c.log': 'c' });
    const r = await d().docker(['build', '-t', 'built/ignore-all', dir], { env: legacy, timeoutMs: 120_000 });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    // the CLI filtered the context (a directory excluded whole unless an exception reaches into it)
    assert.equal((await d().docker(['run', '--rm', 'built/ignore-all'])).stdout, 'keep.me\n');
    // A client that sends everything: the daemon takes out only the Dockerfile and .dockerignore it names.
    const rawTar = await tarOf([
      { name: 'Dockerfile', body: `FROM ${busybox}\nCOPY . /ctx/\nRUN ls -A /ctx > /listing\nCMD ["cat", "/listing"]\n` },
      { name: '.dockerignore', body: 'Dockerfile\n.dockerignore\nsecret\n' },
      { name: 'secret', body: 's' },
      { name: 'kept', body: 'k' },
    ]);
    const raw = await d().request('POST', '/build?t=built/ignore-raw', { body: rawTar });
    assert.ok(records(raw.text()).some((m) => m.aux), raw.text());
    assert.equal((await d().docker(['run', '--rm', 'built/ignore-raw'])).stdout, 'kept\nsecret\n');
    // Sent again, the context comes from the context cache, filtered the same way.
    const rawAgain = await d().request('POST', '/build?t=built/ignore-raw2', { body: rawTar });
    const again = records(rawAgain.text());
    assert.equal(again.filter((m) => m.stream === ' ---> Using cache\n').length, 3, rawAgain.text());
    assert.equal((await d().docker(['run', '--rm', 'built/ignore-raw2'])).stdout, 'kept\nsecret\n');
  });
});
