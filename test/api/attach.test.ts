/**
 * POST /containers/{id}/attach on the wire: the 101 answer and its headers, framing iff no tty,
 * attach before start, stdin half-close, the fallback without Upgrade, logs replay, websocket
 * attach, detach keys seen by the server, resize, and the errors that come before the hijack.
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { WebSocket } from 'ws';
import { readAll, useDaemon, useSeededRegistry, type TestDaemon } from '../harness/index.js';
import { demux, readToEnd, sleep } from '../interactive/support.js';

describe('attach API', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';

  before(async () => {
    image = reg().seeded.refs.busybox;
    const r = await daemon().docker(['pull', '-q', image]);
    assert.equal(r.code, 0, r.stderr);
  });

  const create = async (cmd: string[], extra: Record<string, unknown> = {}): Promise<string> => {
    const r = await daemon().request('POST', '/v1.44/containers/create', { body: { Image: image, Cmd: cmd, ...extra } });
    assert.equal(r.status, 201, r.text());
    return r.json().Id as string;
  };
  const start = async (id: string) => {
    const r = await daemon().request('POST', `/v1.44/containers/${id}/start`);
    assert.equal(r.status, 204, r.text());
  };
  const remove = (id: string) => daemon().request('DELETE', `/containers/${id}?force=1`);
  const attach = async (d: TestDaemon, id: string, query: string, version = 'v1.44') => {
    const u = await d.upgrade('POST', `/${version}/containers/${id}/attach?${query}`);
    assert.ok(u.upgraded, `expected 101, got ${u.response.statusCode}`);
    return u;
  };

  it('answers 101 UPGRADED with Upgrade: tcp and the content type of the API version', async () => {
    const id = await create(['true']);
    const u = await attach(daemon(), id, 'stream=1&stdout=1');
    assert.ok(u.upgraded);
    assert.equal(u.response.statusCode, 101);
    assert.equal(u.response.statusMessage, 'UPGRADED');
    assert.equal(u.response.headers['content-type'], 'application/vnd.docker.multiplexed-stream');
    assert.equal(u.response.headers.upgrade, 'tcp');
    assert.match(String(u.response.headers.connection), /upgrade/i);
    u.socket.destroy();
    const old = await attach(daemon(), id, 'stream=1&stdout=1', 'v1.41');
    assert.ok(old.upgraded);
    assert.equal(old.response.headers['content-type'], 'application/vnd.docker.raw-stream');
    old.socket.destroy();
    await remove(id);
  });

  it('attach before start: framed stdout and stderr from the first byte on', async () => {
    const id = await create(['sh', '-c', 'echo out; echo err >&2; echo out2']);
    const u = await attach(daemon(), id, 'stream=1&stdout=1&stderr=1');
    assert.ok(u.upgraded);
    const body = readToEnd(u.socket, u.head);
    await start(id);
    const d = demux(await body);
    assert.equal(d.stdout.toString(), 'out\nout2\n');
    assert.equal(d.stderr.toString(), 'err\n');
    assert.equal(d.rest.length, 0);
    await remove(id);
  });

  it('stdout only: stderr is left out', async () => {
    const id = await create(['sh', '-c', 'echo out; echo err >&2']);
    const u = await attach(daemon(), id, 'stream=1&stdout=1');
    assert.ok(u.upgraded);
    const body = readToEnd(u.socket, u.head);
    await start(id);
    const d = demux(await body);
    assert.equal(d.stdout.toString(), 'out\n');
    assert.equal(d.stderr.length, 0);
    await remove(id);
  });

  it('with a tty the stream is raw bytes', async () => {
    const id = await create(['sh', '-c', 'printf "raw\\n"; printf "e\\n" >&2'], { Tty: true });
    const u = await attach(daemon(), id, 'stream=1&stdout=1&stderr=1');
    assert.ok(u.upgraded);
    assert.equal(u.response.headers['content-type'], 'application/vnd.docker.raw-stream');
    const body = readToEnd(u.socket, u.head);
    await start(id);
    assert.equal((await body).toString(), 'raw\r\ne\r\n');
    await remove(id);
  });

  it('stdin half-close ends the input and the output keeps coming', async () => {
    const id = await create(['sh', '-c', 'cat; sleep 0.3; echo after'], { OpenStdin: true, StdinOnce: true, AttachStdin: true });
    const u = await attach(daemon(), id, 'stream=1&stdin=1&stdout=1&stderr=1');
    assert.ok(u.upgraded);
    const body = readToEnd(u.socket, u.head);
    u.socket.write('typed before start\n'); // held until the process runs
    await start(id);
    await sleep(100);
    u.socket.write('and after\n');
    u.socket.end(); // CloseWrite, as the docker CLI does at stdin EOF
    const d = demux(await body);
    assert.equal(d.stdout.toString(), 'typed before start\nand after\nafter\n');
    const st = await daemon().request('POST', `/containers/${id}/wait`);
    assert.equal(st.json().StatusCode, 0);
    await remove(id);
  });

  it('StdinOnce: a second client that never attached stdin leaves without closing it', async () => {
    const id = await create(['sh', '-c', 'while read l; do echo "got $l"; done; echo done'], { OpenStdin: true, StdinOnce: true, AttachStdin: true });
    const a = await attach(daemon(), id, 'stream=1&stdin=1&stdout=1');
    assert.ok(a.upgraded);
    const body = readToEnd(a.socket, a.head);
    await start(id);
    const b = await attach(daemon(), id, 'stream=1&stdout=1');
    assert.ok(b.upgraded);
    await sleep(200);
    b.socket.destroy();
    await sleep(200);
    // This output finds b's connection dead: berthd learns b is gone.
    a.socket.write('one\n');
    await sleep(500);
    a.socket.write('two\n');
    await sleep(300);
    a.socket.end();
    assert.equal(demux(await body).stdout.toString(), 'got one\ngot two\ndone\n');
    await remove(id);
  });

  it('without Upgrade: a 200 raw-stream response that ends with the process', async () => {
    const id = await create(['sh', '-c', 'sleep 0.3; echo plain']);
    const resP = daemon().stream('POST', `/v1.44/containers/${id}/attach?stream=1&stdout=1`);
    await sleep(200); // the attach must be registered before the start
    await start(id);
    const res = await resP;
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'application/vnd.docker.raw-stream');
    assert.equal(res.headers['transfer-encoding'], undefined);
    const d = demux(await readAll(res));
    assert.equal(d.stdout.toString(), 'plain\n');
    await remove(id);
  });

  it('logs=1 replays what the container wrote; without stream it then ends', async () => {
    const id = await create(['sh', '-c', 'echo one; echo two >&2']);
    await start(id);
    await daemon().request('POST', `/containers/${id}/wait`);
    const u = await attach(daemon(), id, 'logs=1&stdout=1&stderr=1');
    assert.ok(u.upgraded);
    const d = demux(await readToEnd(u.socket, u.head));
    assert.equal(d.stdout.toString(), 'one\n');
    assert.equal(d.stderr.toString(), 'two\n');
    await remove(id);
  });

  it('logs=1&stream=1 on a running container: history, then live output', async () => {
    const id = await create(['sh', '-c', 'echo early; sleep 1; echo live']);
    await start(id);
    await sleep(400);
    const u = await attach(daemon(), id, 'logs=1&stream=1&stdout=1');
    assert.ok(u.upgraded);
    const d = demux(await readToEnd(u.socket, u.head));
    assert.equal(d.stdout.toString(), 'early\nlive\n');
    await remove(id);
  });

  it('the server honours detachKeys with a tty: the stream ends, the container runs on', async () => {
    const id = await create(['sh'], { Tty: true, OpenStdin: true, StdinOnce: true, AttachStdin: true });
    await start(id);
    // Plain letters as keys: a broken sequence must reach the shell whole.
    const u = await attach(daemon(), id, 'stream=1&stdin=1&stdout=1&detachKeys=q,z');
    assert.ok(u.upgraded);
    const body = readToEnd(u.socket, u.head);
    u.socket.write('echo Xq');
    await sleep(100);
    u.socket.write('Xqq\n'); // "q" held across writes, then released
    await sleep(300);
    u.socket.write('qz');
    const out = (await body).toString();
    assert.match(out, /\r\nXqXqq\r\n/);
    const st = (await daemon().request('GET', `/containers/${id}/json`)).json();
    assert.equal(st.State.Status, 'running');
    await remove(id);
  });

  it('websocket attach: stdin in, output out, never framed', async () => {
    const id = await create(['sh', '-c', 'read line; echo "got $line"; echo err >&2'], { OpenStdin: true, AttachStdin: true });
    await start(id);
    const ws = new WebSocket(`ws+unix://${daemon().socket}:/v1.44/containers/${id}/attach/ws?stream=1&stdin=1&stdout=1&stderr=1`);
    const chunks: Buffer[] = [];
    let binary = true;
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      chunks.push(data);
      binary &&= isBinary;
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.send(Buffer.from('hello\n'));
    await new Promise<void>((resolve) => ws.once('close', () => resolve()));
    assert.equal(Buffer.concat(chunks).toString(), 'got hello\nerr\n');
    assert.equal(binary, true, 'binary messages from API 1.42 on');
    await remove(id);
  });

  it('resize: applied to the tty; bad sizes are 400, a stopped container 409', async () => {
    const id = await create(['sh', '-c', 'sleep 1; stty size'], { Tty: true });
    const u = await attach(daemon(), id, 'stream=1&stdout=1');
    assert.ok(u.upgraded);
    const body = readToEnd(u.socket, u.head);
    await start(id);
    const r = await daemon().request('POST', `/v1.44/containers/${id}/resize?h=33&w=111`);
    assert.equal(r.status, 200, r.text());
    assert.equal((await body).toString(), '33 111\r\n');
    const bad = await daemon().request('POST', `/containers/${id}/resize?h=x&w=10`);
    assert.equal(bad.status, 400);
    await daemon().request('POST', `/containers/${id}/wait`);
    const stopped = await daemon().request('POST', `/containers/${id}/resize?h=10&w=10`);
    assert.equal(stopped.status, 409);
    await remove(id);
  });

  it('HostConfig.ConsoleSize is the size before the first output', async () => {
    const id = await create(['stty', 'size'], { Tty: true, HostConfig: { ConsoleSize: [21, 77] } });
    const u = await attach(daemon(), id, 'stream=1&stdout=1');
    assert.ok(u.upgraded);
    const body = readToEnd(u.socket, u.head);
    await start(id);
    assert.equal((await body).toString(), '21 77\r\n');
    await remove(id);
  });

  it('errors before the hijack are plain HTTP: unknown container 404, paused 409', async () => {
    const missing = await daemon().upgrade('POST', '/containers/no-such-container/attach?stream=1&stdout=1');
    assert.equal(missing.upgraded, false);
    if (!missing.upgraded) assert.equal(missing.response.statusCode, 404);
    const id = await create(['sleep', '30']);
    await start(id);
    assert.equal((await daemon().request('POST', `/containers/${id}/pause`)).status, 204);
    const paused = await daemon().upgrade('POST', `/containers/${id}/attach?stream=1&stdout=1`);
    assert.equal(paused.upgraded, false);
    if (!paused.upgraded) {
      assert.equal(paused.response.statusCode, 409);
      assert.match((await readAll(paused.response)).toString(), /paused/);
    }
    await daemon().request('POST', `/containers/${id}/unpause`);
    await remove(id);
  });

  it('a client that falls far behind continues from the log file: bounded memory, every byte in order', async () => {
    // ~97 MB of distinct lines, more than berthd keeps queued for one client.
    const lines = 12_000_000;
    const id = await create(['seq', '1', String(lines)]);
    const u = await attach(daemon(), id, 'stream=1&stdout=1');
    assert.ok(u.upgraded);
    u.socket.pause();
    const rss = async () => Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${daemon().pid}/status`, 'utf8'))?.[1]);
    const before = await rss();
    await start(id);
    let peak = 0;
    for (let i = 0; i < 14; i++) {
      await sleep(500);
      peak = Math.max(peak, (await rss()) - before);
    }
    // Parse frames as they come: the payload is hashed, never held.
    const got = createHash('sha256');
    let pending: Buffer = Buffer.alloc(0);
    let bytes = 0;
    u.socket.on('data', (d: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, d]) : d;
      while (pending.length >= 8 && pending.length >= 8 + pending.readUInt32BE(4)) {
        const len = pending.readUInt32BE(4);
        assert.equal(pending[0], 1);
        got.update(pending.subarray(8, 8 + len));
        bytes += len;
        pending = pending.subarray(8 + len);
      }
    });
    u.socket.resume();
    await new Promise<void>((resolve) => u.socket.once('end', () => resolve()));
    peak = Math.max(peak, (await rss()) - before);
    const want = createHash('sha256');
    let wantBytes = 0;
    for (let from = 1; from <= lines; from += 100_000) {
      let chunk = '';
      for (let n = from; n < from + 100_000 && n <= lines; n++) chunk += `${n}\n`;
      want.update(chunk);
      wantBytes += chunk.length;
    }
    assert.equal(bytes, wantBytes);
    assert.equal(got.digest('hex'), want.digest('hex'));
    assert.ok(peak < 160 * 1024, `berthd RSS grew by ${peak} kB`);
    // Whether the client fell far enough behind for the log to take over depends on the machine's
    // load; the bytes, their order and the bounded memory above are what must hold either way.
    if (!/continuing from the log file/.test(daemon().logs())) console.log('# note: the client kept up; the log catch-up path was not needed this time');
    await remove(id);
  });

  it('after berthd is killed and restarted, attach and exec reach the same running shell', async () => {
    const id = await create(['sh'], { Tty: true, OpenStdin: true, AttachStdin: true });
    await start(id);
    const before = await attach(daemon(), id, 'stream=1&stdin=1&stdout=1');
    assert.ok(before.upgraded);
    const cut = readToEnd(before.socket, before.head).catch(() => Buffer.alloc(0));
    before.socket.write('export MARK=survived\n');
    await sleep(300);
    await daemon().kill9();
    await cut;
    await daemon().restart();
    const u = await attach(daemon(), id, 'stream=1&stdin=1&stdout=1');
    assert.ok(u.upgraded);
    const body = readToEnd(u.socket, u.head);
    u.socket.write('echo mark=$MARK\n');
    await sleep(500);
    u.socket.write(Buffer.from([0x10, 0x11])); // ctrl-p ctrl-q
    assert.match((await body).toString(), /mark=survived/);
    const ex = await daemon().docker(['exec', id, 'echo', 'exec-after-restart']);
    assert.equal(ex.stdout, 'exec-after-restart\n');
    await remove(id);
  });

  it('an attach waiting for start ends when the container is removed', async () => {
    const id = await create(['true']);
    const u = await attach(daemon(), id, 'stream=1&stdout=1');
    assert.ok(u.upgraded);
    const body = readToEnd(u.socket, u.head, 10_000);
    await remove(id);
    assert.equal((await body).length, 0);
  });
});
