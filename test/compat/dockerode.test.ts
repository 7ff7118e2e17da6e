/**
 * dockerode (npm) against berthd: a small project built by hand as a program would (a database-like
 * service, a worker writing to it by alias, a web server on a published port), with pull progress,
 * healthchecks, logs, exec, events, connect before start, stop and removal.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import tar from 'tar-stream';
import { useDaemon, useSeededRegistry, freePort } from '../harness/index.js';
import { demuxChecked } from '../harness/multiplexed.js';
import { eventually, httpGet } from '../compose/support.js';

/** Demultiplexes an attach or exec stream with dockerode's own demuxStream, until the stream ends. */
async function demuxed(docker: Docker, stream: NodeJS.ReadableStream): Promise<{ stdout: string; stderr: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.on('data', (b) => (stdout += b));
  err.on('data', (b) => (stderr += b));
  docker.modem.demuxStream(stream, out, err);
  await new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
  });
  return { stdout, stderr };
}

/** Runs a command in a container through exec; stdout and stderr apart, and the exit code. */
async function execIn(docker: Docker, id: string, cmd: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const exec = await docker.getContainer(id).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const { stdout, stderr } = await demuxed(docker, await exec.start({ hijack: true, stdin: false }));
  const info = await exec.inspect();
  return { code: info.ExitCode ?? -1, stdout, stderr };
}

describe('dockerode', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let docker: Docker;
  let image = '';

  before(() => {
    docker = new Docker({ socketPath: daemon().dockerHost.replace(/^unix:\/\//, '') });
    image = reg().seeded.refs.busybox;
  });

  it('pull with progress, then the image is listed and inspected', async () => {
    const stream = await docker.pull(image);
    const events = await new Promise<{ status?: string; error?: string }[]>((resolve, reject) =>
      docker.modem.followProgress(stream, (err: Error | null, res: { status?: string }[]) => (err ? reject(err) : resolve(res))),
    );
    assert.ok(events.some((e) => /Downloaded newer image|Image is up to date/.test(e.status ?? '')), JSON.stringify(events.slice(-3)));
    assert.ok(!events.some((e) => e.error));
    const list = await docker.listImages({ filters: { reference: [image] } });
    assert.equal(list.length, 1);
    assert.deepEqual(list[0]!.RepoTags, [image]);
    const info = await docker.getImage(image).inspect();
    assert.equal(info.Id, list[0]!.Id);
    assert.deepEqual(info.RepoDigests, [`${image.replace(/:latest$/, '')}@${reg().seeded.digests.busybox}`]);
  });

  it('a project by hand: network, db with healthcheck and alias, worker writing rows, web on a published port', async () => {
    const port = await freePort();
    const net = await docker.createNetwork({ Name: 'dode-net', Labels: { app: 'dode' } });
    const store = `printf '#!/bin/sh\\nread l\\necho "$l" >> /data/rows\\n' > /store && chmod +x /store`;
    const db = await docker.createContainer({
      name: 'dode-db', Image: image, Labels: { app: 'dode' },
      Cmd: ['sh', '-c', `mkdir -p /data && touch /data/rows && ${store} && httpd -p 5433 -h /data && exec nc -ll -p 6379 -e /store`],
      Healthcheck: { Test: ['CMD', 'wget', '-q', '-O', '/dev/null', 'http://127.0.0.1:5433/rows'], Interval: 500e6, Timeout: 2e9, Retries: 30 },
      HostConfig: { NetworkMode: 'dode-net' },
      NetworkingConfig: { EndpointsConfig: { 'dode-net': { Aliases: ['database'] } } },
    });
    // The worker is created on the default bridge and moved to the project network before start.
    // It sends each row until stored: a name looked up while aardvark-dns reloads (another container
    // starting) can fail (docs/compat.md), and the rows are checked in order from row-1.
    const worker = await docker.createContainer({
      name: 'dode-worker', Image: image, Labels: { app: 'dode' },
      Cmd: ['sh', '-c', 'i=0; while true; do i=$((i+1)); until echo row-$i | nc -w 3 database 6379; do sleep 0.2; done; echo "stored row-$i"; sleep 0.5; done'],
    });
    await docker.getNetwork('bridge').disconnect({ Container: worker.id });
    await net.connect({ Container: worker.id, EndpointConfig: { Aliases: ['worker'] } });
    const web = await docker.createContainer({
      name: 'dode-web', Image: image, Labels: { app: 'dode' },
      Cmd: ['sh', '-c', 'mkdir -p /www && echo dode-ok > /www/index.html && exec httpd -f -p 8080 -h /www'],
      ExposedPorts: { '8080/tcp': {} },
      HostConfig: { NetworkMode: 'dode-net', PortBindings: { '8080/tcp': [{ HostIp: '127.0.0.1', HostPort: String(port) }] }, RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 2 } },
    });
    await db.start();
    await eventually('db healthy', async () => ((await db.inspect()).State.Health?.Status === 'healthy' ? true : undefined));
    await worker.start();
    await web.start();

    const wi = await worker.inspect();
    assert.deepEqual(Object.keys(wi.NetworkSettings.Networks), ['dode-net']);
    assert.ok(wi.NetworkSettings.Networks['dode-net']!.Aliases?.includes('worker'));
    assert.equal(wi.NetworkSettings.Networks['dode-net']!.NetworkID, net.id);
    assert.equal((await httpGet(port, '/index.html')).trim(), 'dode-ok');
    const rows = await eventually('rows stored', async () => {
      const r = await execIn(docker, db.id, ['cat', '/data/rows']);
      return /^row-1\nrow-2\nrow-3\n/.test(r.stdout) ? r.stdout : undefined;
    });
    assert.match(rows, /^row-1\n/);
    // The web container reaches the db by alias and the worker by its own alias.
    const viaAlias = await execIn(docker, web.id, ['sh', '-c', 'wget -q -O- http://database:5433/rows | head -1; nslookup worker >/dev/null && echo found']);
    assert.deepEqual([viaAlias.code, viaAlias.stdout], [0, 'row-1\nfound\n']);
    const failing = await execIn(docker, web.id, ['sh', '-c', 'echo oops >&2; exit 4']);
    assert.deepEqual([failing.code, failing.stdout, failing.stderr], [4, '', 'oops\n']);

    const listed = await docker.listContainers({ filters: { label: ['app=dode'] } });
    assert.deepEqual(listed.map((c) => c.Names[0]).sort(), ['/dode-db', '/dode-web', '/dode-worker']);
    const webEntry = listed.find((c) => c.Names[0] === '/dode-web')!;
    assert.deepEqual(webEntry.Ports.map((p) => [p.IP, p.PrivatePort, p.PublicPort]), [['127.0.0.1', 8080, port]]);

    // Logs with timestamps, demultiplexed.
    const logs = (await worker.logs({ stdout: true, stderr: true, timestamps: true, tail: 2 })) as unknown as Buffer;
    const lines = demuxChecked(logs).stdout.trim().split('\n');
    assert.equal(lines.length, 2);
    for (const l of lines) assert.match(l, /^\d{4}-\d{2}-\d{2}T\S+Z stored row-\d+$/);

    // Events while the worker is stopped: die and stop, in order.
    const since = Math.floor(Date.now() / 1000) - 1;
    await worker.stop({ t: 1 });
    const evStream = await docker.getEvents({ since, until: Math.floor(Date.now() / 1000) + 1, filters: { container: ['dode-worker'] } });
    let evText = '';
    for await (const chunk of evStream as AsyncIterable<Buffer>) evText += chunk.toString();
    const actions = evText.trim().split('\n').map((l) => (JSON.parse(l) as { Action: string }).Action);
    assert.ok(actions.indexOf('die') >= 0 && actions.indexOf('die') < actions.indexOf('stop'), actions.join(','));
    assert.equal((await worker.inspect()).State.Status, 'exited');

    // Top and stats of a running container.
    const top = await db.top({ ps_args: 'aux' });
    assert.ok(top.Processes.some((p: string[]) => p.join(' ').includes('nc')), JSON.stringify(top.Processes));
    const stats = await db.stats({ stream: false });
    assert.ok(stats.memory_stats.usage! > 0);

    for (const c of [web, worker, db]) await c.remove({ force: true });
    await net.remove();
    assert.deepEqual(await docker.listContainers({ all: true, filters: { label: ['app=dode'] } }), []);
    await assert.rejects(docker.getNetwork('dode-net').inspect(), (e: { statusCode?: number }) => e.statusCode === 404);
  });

  it('attach to a container\'s output and wait for its exit code', async () => {
    const c = await docker.createContainer({ Image: image, Cmd: ['sh', '-c', 'echo to-out; echo to-err >&2; exit 5'], AttachStdout: true, AttachStderr: true });
    const output = demuxed(docker, await c.attach({ stream: true, stdout: true, stderr: true }));
    await c.start();
    const res = await c.wait();
    assert.equal(res.StatusCode, 5);
    assert.deepEqual(await output, { stdout: 'to-out\n', stderr: 'to-err\n' });
    await c.remove();
  });

  it('putArchive and getArchive', async () => {
    const c = await docker.createContainer({ Image: image, Cmd: ['sleep', '60'] });
    await c.start();
    const pack = tar.pack();
    pack.entry({ name: 'put/hello.txt', mode: 0o640, uid: 1000, gid: 1000 }, 'from dockerode\n');
    pack.finalize();
    await c.putArchive(pack as unknown as NodeJS.ReadableStream, { path: '/tmp' });
    const { stdout } = await execIn(docker, c.id, ['stat', '-c', '%a %u:%g', '/tmp/put/hello.txt']);
    assert.equal(stdout, '640 1000:1000\n');
    const got: Record<string, string> = {};
    const extract = tar.extract();
    extract.on('entry', (h, body, next) => {
      let text = '';
      body.on('data', (b: unknown) => {
        text += String(b);
      });
      body.on('end', () => {
        got[h.name] = text;
        next();
      });
    });
    const archive = await c.getArchive({ path: '/tmp/put/hello.txt' });
    await new Promise<void>((resolve, reject) => {
      extract.on('finish', resolve);
      extract.on('error', reject);
      (archive as unknown as NodeJS.ReadableStream).pipe(extract);
    });
    assert.deepEqual(got, { 'hello.txt': 'from dockerode\n' });
    await c.remove({ force: true });
  });

  it('buildImage', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-dode-build-'));
    try {
      writeFileSync(join(dir, 'Dockerfile'), `FROM ${image}\nRUN echo built-by-dockerode > /built\nCMD ["cat", "/built"]\n`);
      const stream = await docker.buildImage({ context: dir, src: ['Dockerfile'] }, { t: 'dode-built:latest' });
      await new Promise((resolve, reject) => docker.modem.followProgress(stream, (err: Error | null, res: unknown) => (err ? reject(err) : resolve(res))));
      const c = await docker.createContainer({ Image: 'dode-built:latest' });
      const output = demuxed(docker, await c.attach({ stream: true, stdout: true, stderr: true }));
      await c.start();
      assert.equal((await c.wait()).StatusCode, 0);
      assert.equal((await output).stdout, 'built-by-dockerode\n');
      await c.remove();
      await docker.getImage('dode-built:latest').remove();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('volumes: create, mount, list, remove', async () => {
    const v = await docker.createVolume({ Name: 'dode-vol' });
    const c = await docker.createContainer({ Image: image, Cmd: ['sh', '-c', 'echo kept > /v/f'], HostConfig: { Binds: ['dode-vol:/v'] } });
    await c.start();
    assert.equal((await c.wait()).StatusCode, 0);
    await c.remove();
    assert.ok((await docker.listVolumes()).Volumes.some((x) => x.Name === 'dode-vol'));
    await docker.getVolume(v.name).remove();
  });
});
