/**
 * Exec: create/start/inspect/resize on the wire, `docker exec` exit codes through the CLI, and
 * docker-py's exec_run and attach(stream=True).
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { haveDockerPy, runDockerPy } from '../harness/python.js';
import { readAll, useDaemon, useSeededRegistry } from '../harness/index.js';
import { demux, readToEnd, sleep } from '../interactive/support.js';

describe('exec', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  let ctr = '';

  before(async () => {
    image = reg().seeded.refs.busybox;
    const r = await daemon().docker(['pull', '-q', image]);
    assert.equal(r.code, 0, r.stderr);
    const run = await daemon().docker(['run', '-d', '--name', 'exec-target', image, 'sleep', '600']);
    assert.equal(run.code, 0, run.stderr);
    ctr = run.stdout.trim();
  });

  const createExec = async (body: Record<string, unknown>, container = ctr) => {
    const r = await daemon().request('POST', `/v1.44/containers/${container}/exec`, { body });
    assert.equal(r.status, 201, r.text());
    return r.json().Id as string;
  };
  const inspect = async (id: string) => (await daemon().request('GET', `/v1.44/exec/${id}/json`)).json();
  const startHijacked = async (id: string, body: Record<string, unknown>) => {
    const u = await daemon().upgrade('POST', `/v1.44/exec/${id}/start`, { body });
    assert.ok(u.upgraded, `expected 101, got ${u.upgraded ? '' : u.response.statusCode}`);
    return u;
  };

  it('hijacked start: framed output, the stream closes at exit, the exit code is on record by then', async () => {
    const id = await createExec({ Cmd: ['sh', '-c', 'echo out; echo err >&2; exit 3'], AttachStdout: true, AttachStderr: true });
    const before = await inspect(id);
    assert.equal(before.Running, false);
    assert.equal(before.ExitCode, null);
    const u = await startHijacked(id, { Detach: false, Tty: false });
    assert.ok(u.upgraded);
    assert.equal(u.response.headers['content-type'], 'application/vnd.docker.multiplexed-stream');
    const d = demux(await readToEnd(u.socket, u.head));
    assert.equal(d.stdout.toString(), 'out\n');
    assert.equal(d.stderr.toString(), 'err\n');
    const after = await inspect(id);
    assert.equal(after.ExitCode, 3);
    assert.equal(after.Running, false);
    assert.equal(after.ContainerID, ctr);
    assert.ok(after.Pid > 0);
    assert.deepEqual(after.ProcessConfig, { tty: false, entrypoint: 'sh', arguments: ['-c', 'echo out; echo err >&2; exit 3'], privileged: false, user: '' });
    assert.equal(after.OpenStdout, true);
    assert.equal(after.OpenStdin, false);
  });

  it('stdin: the body is read exactly, the rest of the socket is stdin; half-close is EOF', async () => {
    const id = await createExec({ Cmd: ['sh', '-c', 'cat; echo end'], AttachStdin: true, AttachStdout: true });
    const u = await startHijacked(id, { Detach: false, Tty: false });
    assert.ok(u.upgraded);
    const body = readToEnd(u.socket, u.head);
    u.socket.write('some input\n');
    u.socket.end();
    assert.equal(demux(await body).stdout.toString(), 'some input\nend\n');
    assert.equal((await inspect(id)).ExitCode, 0);
  });

  it('a background child holding stdout does not hold the stream once the process exited', async () => {
    const id = await createExec({ Cmd: ['sh', '-c', 'sleep 30 & echo started'], AttachStdout: true, AttachStderr: true });
    const t0 = Date.now();
    const u = await startHijacked(id, { Detach: false, Tty: false });
    assert.ok(u.upgraded);
    assert.equal(demux(await readToEnd(u.socket, u.head)).stdout.toString(), 'started\n');
    assert.ok(Date.now() - t0 < 10_000, `stream took ${Date.now() - t0} ms`);
    assert.equal((await inspect(id)).ExitCode, 0);
  });

  it('tty: raw output with the ConsoleSize of the start request', async () => {
    // crun sets an exec's terminal size just after the process started, so give it a moment.
    const id = await createExec({ Cmd: ['sh', '-c', 'sleep 0.2; stty size'], AttachStdout: true, Tty: true });
    const u = await startHijacked(id, { Detach: false, Tty: true, ConsoleSize: [20, 70] });
    assert.ok(u.upgraded);
    assert.equal(u.response.headers['content-type'], 'application/vnd.docker.raw-stream');
    assert.equal((await readToEnd(u.socket, u.head)).toString(), '20 70\r\n');
    assert.equal((await inspect(id)).ExitCode, 0);
  });

  it('tty under runc: the ConsoleSize is set before the process runs', async () => {
    const run = await daemon().docker(['run', '-d', '--runtime', 'runc', image, 'sleep', '600']);
    assert.equal(run.code, 0, run.stderr);
    const runcCtr = run.stdout.trim();
    for (let i = 0; i < 5; i++) {
      const id = await createExec({ Cmd: ['stty', 'size'], AttachStdout: true, Tty: true, ConsoleSize: [22, 66] }, runcCtr);
      const u = await startHijacked(id, { Detach: false, Tty: true });
      assert.ok(u.upgraded);
      assert.equal((await readToEnd(u.socket, u.head)).toString(), '22 66\r\n');
    }
    await daemon().request('DELETE', `/containers/${runcCtr}?force=1`);
  });

  it('start without Upgrade: a 200 raw-stream response that ends with the process', async () => {
    const id = await createExec({ Cmd: ['sh', '-c', 'echo plain; exit 2'], AttachStdout: true });
    const res = await daemon().stream('POST', `/v1.44/exec/${id}/start`, { body: { Detach: false, Tty: false } });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'application/vnd.docker.raw-stream');
    assert.equal(demux(await readAll(res)).stdout.toString(), 'plain\n');
    assert.equal((await inspect(id)).ExitCode, 2);
  });

  it('docker exec ends after the process, as dockerd: a child it left writing on its output does not hold the stream', async () => {
    // The child writes 120 lines over 30 s; the stream closes shortly after the shell's exit.
    const r = await daemon().docker(['exec', ctr, 'sh', '-c', 'echo first; (i=0; while [ $i -lt 120 ]; do echo tick; sleep 0.25; i=$((i+1)); done) & exit 3'], { timeoutMs: 60_000 });
    assert.equal(r.code, 3, r.stderr);
    const lines = r.stdout.split('\n').filter(Boolean);
    assert.equal(lines[0], 'first');
    assert.ok(lines.length < 121, `the stream ended before the child's output did (${lines.length} lines)`);
  });

  it('exec_create, exec_start and exec_die events with the exec id and exit code', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const id = await createExec({ Cmd: ['sh', '-c', 'exit 4'], AttachStdout: true });
    const u = await startHijacked(id, { Detach: false, Tty: false });
    assert.ok(u.upgraded);
    await readToEnd(u.socket, u.head);
    const until = Math.floor(Date.now() / 1000) + 1;
    const r = await daemon().request('GET', `/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ container: [ctr] }))}`);
    const events = r.text().trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.Actor?.Attributes?.execID === id);
    assert.deepEqual(events.map((e) => e.Action), ['exec_create: sh -c exit 4', 'exec_start: sh -c exit 4', 'exec_die']);
    assert.equal(events[2].Actor.Attributes.exitCode, '4');
  });

  it('Detach: true is a plain 200 without hijack; the process runs on its own', async () => {
    const id = await createExec({ Cmd: ['sh', '-c', 'sleep 0.3; exit 5'] });
    const r = await daemon().request('POST', `/v1.44/exec/${id}/start`, { body: { Detach: true } });
    assert.equal(r.status, 200);
    assert.equal(r.body.length, 0);
    assert.equal((await inspect(id)).Running, true);
    let info = await inspect(id);
    for (let i = 0; i < 50 && info.Running; i++) {
      await sleep(100);
      info = await inspect(id);
    }
    assert.equal(info.Running, false);
    assert.equal(info.ExitCode, 5);
  });

  it('a command that cannot be run: 127 not found, 126 not executable, message on the stream', async () => {
    const missing = await createExec({ Cmd: ['no-such-command'], AttachStdout: true, AttachStderr: true });
    const u = await startHijacked(missing, { Detach: false, Tty: false });
    assert.ok(u.upgraded);
    const d = demux(await readToEnd(u.socket, u.head));
    assert.match(d.stdout.toString() + d.stderr.toString(), /not found/);
    assert.equal((await inspect(missing)).ExitCode, 127);
    const noexec = await createExec({ Cmd: ['/etc/passwd'], AttachStdout: true });
    const u2 = await startHijacked(noexec, { Detach: false, Tty: false });
    assert.ok(u2.upgraded);
    await readToEnd(u2.socket, u2.head);
    assert.equal((await inspect(noexec)).ExitCode, 126);
  });

  it('errors: 404 unknown exec, 400 without Cmd, 409 started twice or container not running', async () => {
    assert.equal((await daemon().request('GET', '/exec/0000/json')).status, 404);
    assert.equal((await daemon().request('POST', '/exec/0000/resize?h=1&w=1')).status, 404);
    const noCmd = await daemon().request('POST', `/containers/${ctr}/exec`, { body: { AttachStdout: true } });
    assert.equal(noCmd.status, 400);
    const once = await createExec({ Cmd: ['true'] });
    assert.equal((await daemon().request('POST', `/exec/${once}/start`, { body: { Detach: true } })).status, 200);
    const twice = await daemon().request('POST', `/exec/${once}/start`, { body: { Detach: true } });
    assert.equal(twice.status, 409);
    const stopped = await daemon().docker(['create', image, 'true']);
    const sid = stopped.stdout.trim();
    const r = await daemon().request('POST', `/containers/${sid}/exec`, { body: { Cmd: ['true'] } });
    assert.equal(r.status, 409);
    assert.equal(r.json().message, `container ${sid} is not running`);
    await daemon().request('DELETE', `/containers/${sid}`);
  });

  it('User, WorkingDir, Env and Privileged reach the process', async () => {
    const r = await daemon().docker(['exec', '-u', 'nobody', '-w', '/tmp', '-e', 'FOO=bar', 'exec-target', 'sh', '-c', 'id -u; pwd; echo $FOO']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '65534\n/tmp\nbar\n');
    const capEff = async (args: string[]) => {
      const r = await daemon().docker(['exec', ...args, 'exec-target', 'sh', '-c', 'grep CapEff /proc/self/status']);
      return BigInt(`0x${/CapEff:\s+([0-9a-f]+)/.exec(r.stdout)?.[1] ?? '0'}`);
    };
    const plain = await capEff([]);
    const priv = await capEff(['--privileged']);
    assert.ok(plain > 0n);
    assert.ok(priv > plain && (priv & plain) === plain, `privileged caps ${priv.toString(16)} over ${plain.toString(16)}`);
  });

  it('docker exec returns the command exit code; piped stdin works', async () => {
    assert.equal((await daemon().docker(['exec', 'exec-target', 'sh', '-c', 'exit 42'])).code, 42);
    const nf = await daemon().docker(['exec', 'exec-target', 'no-such-command']);
    assert.equal(nf.code, 127);
    const cat = await daemon().docker(['exec', '-i', 'exec-target', 'cat'], { input: 'via exec\n' });
    assert.equal(cat.code, 0, cat.stderr);
    assert.equal(cat.stdout, 'via exec\n');
  });

  it('docker-py: exec_run and attach(stream=True)', { skip: !haveDockerPy() && 'docker-py venv missing (scripts/install-deps.sh)' }, async () => {
    const script = `
import docker, json
c = docker.from_env()
ctr = c.containers.get('exec-target')
res = {}
r = ctr.exec_run(['sh', '-c', 'echo hi; echo err >&2; exit 3'])
res['plain'] = [r.exit_code, r.output.decode()]
r = ctr.exec_run(['sh', '-c', 'echo o; echo e >&2'], demux=True)
res['demux'] = [r.exit_code, r.output[0].decode(), r.output[1].decode()]
r = ctr.exec_run('tty', tty=True)
res['tty'] = [r.exit_code, r.output.decode()]
r = ctr.exec_run(['sh', '-c', 'echo a; echo b'], stream=True)
res['stream'] = b''.join(r.output).decode()
c2 = c.containers.create('${image}', ['sh', '-c', 'echo early; sleep 0.3; echo late >&2'])
s = c2.attach(stream=True, stdout=True, stderr=True)
c2.start()
res['attach'] = b''.join(s).decode()
res['wait'] = c2.wait()['StatusCode']
c2.remove()
print(json.dumps(res))
`;
    const r = await runDockerPy(daemon().socket, script);
    assert.equal(r.code, 0, r.stderr);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
    assert.deepEqual(res.plain, [3, 'hi\nerr\n']);
    assert.deepEqual(res.demux, [0, 'o\n', 'e\n']);
    assert.equal(res.tty[0], 0);
    assert.match(res.tty[1], /^\/dev\/pts\/\d+\r\n$/);
    assert.equal(res.stream, 'a\nb\n');
    assert.equal(res.attach, 'early\nlate\n');
    assert.equal(res.wait, 0);
  });
});
