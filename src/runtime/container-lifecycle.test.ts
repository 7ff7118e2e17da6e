/**
 * A container's life under conmon + crun (and runc): real containers from a busybox rootfs, on this
 * host's cgroups. Needs root. Every container gets a unique id and is cleaned up in after(), even
 * on failure.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isKind } from '../lib/errors.js';
import { buildSpec, type RuntimeSpecInput } from './build-spec.js';
import { cgroupDirs, controllerDir } from './cgroups.js';
import type { CreateOptions } from './container-lifecycle.js';
import { hostDevices } from './devices.js';
import type { OciSpec } from './oci-spec.js';
import { SECCOMP_BPF_ANNOTATION } from './seccomp-cache.js';
import { readLogRecords, type LogRecord } from './log-file.js';
import { RuntimeDriver } from './runtime-driver.js';
import type { RuntimeName } from './runtime-cli.js';
import { DriverFixture, logText, specInput, streamText, uniqueId } from '../../test/fixtures/runtime.js';

// node-unix-socket is CommonJS with a native part; Node's net module cannot open SOCK_SEQPACKET.
const { SeqpacketSocket } = createRequire(import.meta.url)('node-unix-socket') as typeof import('node-unix-socket');

let fx: DriverFixture;
let driver: RuntimeDriver;
let lifecycle: RuntimeDriver['lifecycle'];

before(async () => {
  fx = await DriverFixture.start();
  driver = fx.driver;
  lifecycle = driver.lifecycle;
});

after(() => fx?.stop());

const createContainer = (args: string[], over: Partial<RuntimeSpecInput> = {}, opts: Partial<CreateOptions> = {}, d?: RuntimeDriver) => fx.create(args, over, opts, d);
const run = (args: string[], over: Partial<RuntimeSpecInput> = {}, opts: Partial<CreateOptions> = {}) => fx.run(args, over, opts);

describe('container lifecycle (crun)', () => {
  test('echo hi: output in the log, exit code 0', async () => {
    const c = await run(['echo', 'hi']);
    assert.equal(c.exit.exitCode, 0);
    assert.equal(c.exit.oomKilled, false);
    assert.ok(Math.abs(c.exit.exitedAt.getTime() - Date.now()) < 60_000);
    const records: LogRecord[] = [];
    for await (const r of readLogRecords(c.logPath)) records.push(r);
    assert.equal(records.length, 1);
    assert.equal(records[0]?.stream, 'stdout');
    assert.equal(records[0]?.text, 'hi');
    assert.equal(records[0]?.partial, false);
    assert.deepEqual(await lifecycle.exitStatus(c.id), c.exit);
    assert.equal((await lifecycle.state(c.id))?.status, 'stopped');
  });

  test('seccomp applies; later containers reuse the filter crun compiled', async () => {
    const a = await run(['grep', 'Seccomp:', '/proc/self/status']);
    const b = await run(['grep', 'Seccomp:', '/proc/self/status']);
    assert.equal(await logText(a.logPath), 'Seccomp:\t2\n');
    assert.equal(await logText(b.logPath), 'Seccomp:\t2\n');
    const config = JSON.parse(await readFile(join(b.opts.bundleDir, 'config.json'), 'utf8')) as OciSpec;
    assert.equal(config.linux.seccomp, undefined);
    assert.ok((config.annotations?.[SECCOMP_BPF_ANNOTATION]?.length ?? 0) > 100);
    // The filter really filters: without CAP_SYS_ADMIN's rules, unshare(CLONE_NEWNS) is refused.
    const c = await run(['unshare', '-m', 'true']);
    assert.notEqual(c.exit.exitCode, 0);
    assert.match(await logText(c.logPath), /Operation not permitted/);
  });

  test('exit code and stderr are kept', async () => {
    const c = await run(['sh', '-c', 'echo oops >&2; printf partial; exit 3']);
    assert.equal(c.exit.exitCode, 3);
    const records: LogRecord[] = [];
    for await (const r of readLogRecords(c.logPath)) records.push(r);
    // conmon reads the two pipes independently: order is kept within a stream only.
    const byStream = (s: string) => records.filter((r) => r.stream === s).map((r) => [r.partial, r.text]);
    assert.deepEqual(byStream('stderr'), [[false, 'oops']]);
    assert.deepEqual(byStream('stdout'), [[true, 'partial']]);
  });

  test('a line longer than conmon\'s buffer becomes P records ending with an F record', async () => {
    const c = await run(['sh', '-c', 'head -c 20000 /dev/zero | tr "\\0" x; echo']);
    const records: LogRecord[] = [];
    for await (const r of readLogRecords(c.logPath)) records.push(r);
    assert.ok(records.length >= 2);
    assert.ok(records.slice(0, -1).every((r) => r.partial));
    assert.equal(records.at(-1)?.partial, false);
    assert.equal(records.map((r) => r.text).join(''), 'x'.repeat(20000));
  });

  test('created, then running; SIGTERM through the init gives 143', async () => {
    const c = await createContainer(['sleep', '100'], { init: true });
    assert.equal((await lifecycle.state(c.id))?.status, 'created');
    const exited = lifecycle.waitExit(c.id);
    await lifecycle.start(c.id);
    const s = await lifecycle.state(c.id);
    assert.equal(s?.status, 'running');
    assert.ok((s?.pid ?? 0) > 0);
    assert.equal(await lifecycle.exitStatus(c.id), undefined);
    await lifecycle.kill(c.id, 'SIGTERM');
    assert.equal((await exited).exitCode, 143);
  });

  test('SIGKILL gives 137; signals and pause after the exit are conflicts', async () => {
    const c = await createContainer(['sleep', '100']);
    const exited = lifecycle.waitExit(c.id);
    await lifecycle.start(c.id);
    await lifecycle.kill(c.id, 9);
    assert.equal((await exited).exitCode, 137);
    await assert.rejects(lifecycle.kill(c.id, 'TERM'), (e: unknown) => isKind(e, 'conflict'));
    await assert.rejects(lifecycle.pause(c.id), (e: unknown) => isKind(e, 'conflict'));
    await assert.rejects(lifecycle.start(c.id), (e: unknown) => isKind(e, 'conflict'));
  });

  test('pause and resume', async () => {
    const c = await createContainer(['sleep', '100']);
    const exited = lifecycle.waitExit(c.id);
    await lifecycle.start(c.id);
    await lifecycle.pause(c.id);
    assert.equal((await lifecycle.state(c.id))?.status, 'paused');
    const freezer = controllerDir(driver.host.cgroupLayout, 'freezer', await driver.stats.cgroupsPath(c.id));
    if (driver.host.cgroupVersion === 1 && freezer) {
      assert.equal((await readFile(join(freezer, 'freezer.state'), 'utf8')).trim(), 'FROZEN');
    }
    await lifecycle.resume(c.id);
    assert.equal((await lifecycle.state(c.id))?.status, 'running');
    await lifecycle.kill(c.id, 'KILL');
    assert.equal((await exited).exitCode, 137);
  });

  test('a container outlives its driver; a new driver adopts it', async () => {
    const stateDir = join(fx.base, 'state-adopt');
    const first = new RuntimeDriver({ stateDir, defaultRuntime: 'crun' });
    await first.init();
    const c = await createContainer(['sh', '-c', 'echo before; sleep 100'], {}, {}, first);
    await first.lifecycle.start(c.id);
    // start returns once the process is released, maybe before it printed: wait for the line.
    for await (const r of readLogRecords(c.logPath, { follow: true, signal: AbortSignal.timeout(30_000) })) if (r.text.includes('before')) break;
    await first.close(); // "forget" the first driver entirely

    const second = new RuntimeDriver({ stateDir, defaultRuntime: 'crun' });
    await second.init();
    try {
      assert.deepEqual(await second.lifecycle.list(), [c.id]);
      assert.equal((await second.lifecycle.state(c.id))?.status, 'running');
      const exited = second.lifecycle.waitExit(c.id);
      await second.lifecycle.kill(c.id, 'KILL');
      const exit = await exited;
      assert.equal(exit.exitCode, 137);
      assert.match(await logText(c.logPath), /before/);
      await second.lifecycle.cleanup(c.id);
      assert.deepEqual(await second.lifecycle.list(), []);
    } finally {
      fx.created.delete(c.id);
      await second.lifecycle.cleanup(c.id).catch(() => undefined);
      await second.close();
    }
  });

  test('waitExit does not hang when conmon is killed', async () => {
    const c = await createContainer(['sleep', '100']);
    const exited = lifecycle.waitExit(c.id);
    await lifecycle.start(c.id);
    const conmonPid = Number(await readFile(join(driver.host.stateDir, 'containers', c.id, 'conmon.pid'), 'utf8'));
    process.kill(conmonPid, 'SIGKILL'); // by pid: the conmon of this test's container only
    assert.equal((await exited).exitCode, 255);
    await lifecycle.cleanup(c.id); // the orphaned container process is killed by delete --force
    fx.created.delete(c.id);
    assert.equal(await lifecycle.state(c.id), undefined);
  });

  test('waitExit right after a fast exit and for an already exited container', async () => {
    const c = await createContainer(['true']);
    await lifecycle.start(c.id);
    const a = await lifecycle.waitExit(c.id); // may register before or after the exit file appears
    const b = await lifecycle.waitExit(c.id); // certainly after
    assert.equal(a.exitCode, 0);
    assert.deepEqual(a, b);
  });

  test('create returns with conmon.pid naming a detached conmon; fast exits in parallel never read as 255', async () => {
    // conmon's first process writes conmon.pid, unordered with its daemon's pid report: waitExit
    // reading "no conmon" right after create settled 255 under load.
    const cs = await Promise.all(Array.from({ length: 8 }, () => createContainer(['true'])));
    for (const c of cs) {
      const conmonPid = Number(await readFile(join(driver.host.stateDir, 'containers', c.id, 'conmon.pid'), 'utf8'));
      const stat = await readFile(`/proc/${conmonPid}/stat`, 'utf8');
      assert.match(stat, /^\d+ \(conmon\) [RSD] /);
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      assert.notEqual(ppid, process.pid, 'conmon must not be a child of the daemon');
    }
    const exits = await Promise.all(
      cs.map(async (c) => {
        await lifecycle.start(c.id);
        return lifecycle.waitExit(c.id);
      }),
    );
    assert.deepEqual(exits.map((e) => e.exitCode), cs.map(() => 0));
    await Promise.all(cs.map((c) => lifecycle.cleanup(c.id)));
    for (const c of cs) fx.created.delete(c.id);
  });

  test('without the launcher (spawn), containers run the same', async () => {
    const d = new RuntimeDriver({ stateDir: driver.host.stateDir, defaultRuntime: 'crun', launcher: false });
    await d.init();
    try {
      const c = await createContainer(['sh', '-c', 'echo spawned; exit 3'], {}, {}, d);
      const exited = d.lifecycle.waitExit(c.id);
      await d.lifecycle.start(c.id);
      assert.equal((await exited).exitCode, 3);
      assert.equal(await logText(c.logPath), 'spawned\n');
      await d.lifecycle.cleanup(c.id);
      fx.created.delete(c.id);
    } finally {
      await d.close();
    }
  });


  test('rlimits above berthd hard limits are clamped, so the container starts', async () => {
    const nofile = driver.host.hardLimits.get('RLIMIT_NOFILE') ?? Infinity;
    const c = await run(['sh', '-c', 'ulimit -Hn; ulimit -Sn'], {
      process: {
        args: ['sh', '-c', 'ulimit -Hn; ulimit -Sn'],
        env: [],
        cwd: '/',
        user: { uid: 0, gid: 0 },
        terminal: false,
        rlimits: [{ type: 'RLIMIT_NOFILE', hard: 1 << 30, soft: 1 << 30 }],
      },
    });
    assert.equal(c.exit.exitCode, 0);
    const expected = nofile === Infinity ? String(1 << 30) : String(nofile);
    assert.equal(await logText(c.logPath), `${expected}\n${expected}\n`);
  });

  test('a tty container: initial size, resize, TERM', async () => {
    const args = ['sh', '-c', 'tty; echo TERM=$TERM; stty size; exec sleep 100'];
    const c = await createContainer(args, {
      process: { args, env: [], cwd: '/', user: { uid: 0, gid: 0 }, terminal: true, consoleSize: { height: 10, width: 20 } },
    }, { tty: true });
    const exited = lifecycle.waitExit(c.id);
    await lifecycle.start(c.id);
    const lines: string[] = [];
    for await (const r of readLogRecords(c.logPath, { follow: true, until: exited })) {
      lines.push(r.text.replace(/\r$/, ''));
      if (lines.length === 3) break;
    }
    assert.match(lines[0] ?? '', /^\/dev\/pts\/\d+$/);
    assert.equal(lines[1], 'TERM=xterm');
    assert.equal(lines[2], '10 20');
    await lifecycle.resize(c.id, 30, 100);
    // The resize is a message on conmon's ctl FIFO, applied when conmon reads it: asked until it shows (bounded).
    let size = '';
    for (let i = 0; i < 20 && size !== '30 100\n'; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      const e = await driver.execs.exec(c.id, { execId: uniqueId('ex'), process: { args: ['stty', '-F', lines[0] ?? '', 'size'], env: [], terminal: false }, stdin: false });
      [size] = await Promise.all([streamText(e.stdout), e.exit]);
    }
    assert.equal(size, '30 100\n');
    await lifecycle.kill(c.id, 'KILL');
    assert.equal((await exited).exitCode, 137);
  });


  test('an out-of-memory kill is reported', async () => {
    // `tail` keeps the current (newline-free, endless) line in memory until the limit kills it.
    const c = await run(['tail', '/dev/zero'], { resources: { memory: 16 * 1024 * 1024, memorySwap: 16 * 1024 * 1024 } });
    assert.equal(c.exit.exitCode, 137);
    assert.equal(c.exit.oomKilled, true);
    assert.ok(!existsSync(join(process.cwd(), 'oom')), 'conmon must not drop its oom marker in our cwd');
  });

  test('a missing command fails create with the runtime message and leaves nothing', async () => {
    const id = uniqueId();
    fx.created.add(id);
    const bundleDir = join(fx.base, 'bundles', id);
    await mkdir(bundleDir, { recursive: true });
    const spec = buildSpec(specInput(id, fx.rootfs, ['/no/such/binary'], { cgroupVersion: driver.host.cgroupVersion }));
    await assert.rejects(
      lifecycle.create({ id, bundleDir, spec, logPath: join(fx.base, `${id}.log`), stdin: false, tty: false }),
      (err: unknown) => isKind(err, 'invalid-argument') && /no such file|not found/i.test((err as Error).message),
    );
    assert.equal(await lifecycle.state(id), undefined);
    assert.ok(!existsSync(join(driver.host.stateDir, 'containers', id)));
  });

  test('cleanup removes runtime state, cgroup and files, and is idempotent', async () => {
    const c = await createContainer(['sleep', '100'], { resources: { memory: 32 * 1024 * 1024 } });
    await lifecycle.start(c.id);
    const dirs = cgroupDirs(driver.host.cgroupLayout, await driver.stats.cgroupsPath(c.id));
    assert.ok(dirs.some((d) => existsSync(d)), 'the container has a cgroup while it runs');
    await lifecycle.cleanup(c.id); // still running: killed by delete --force
    await lifecycle.cleanup(c.id);
    fx.created.delete(c.id);
    for (const d of dirs) assert.ok(!existsSync(d), `${d} removed`);
    assert.equal(await lifecycle.state(c.id), undefined);
    const rtRoot = join(driver.host.stateDir, 'crun');
    assert.ok(!(await readdir(rtRoot)).includes(c.id));
    assert.ok(!existsSync(join(driver.host.stateDir, 'exits', c.id)));
    assert.ok(!existsSync(join(driver.host.stateDir, 'sockets', c.id)));
    assert.ok(!existsSync(join(driver.host.stateDir, 'containers', c.id)));
    assert.ok(!existsSync(join(c.opts.bundleDir, 'attach')));
    await assert.rejects(lifecycle.waitExit(c.id), (err: unknown) => isKind(err, 'not-found'));
  });

  test('follow mode streams a running container and ends after its exit', async () => {
    const c = await createContainer(['sh', '-c', 'for i in 1 2 3; do echo line$i; sleep 0.1; done']);
    const exited = lifecycle.waitExit(c.id);
    await lifecycle.start(c.id);
    const lines: string[] = [];
    for await (const r of readLogRecords(c.logPath, { follow: true, until: exited })) lines.push(r.text);
    assert.deepEqual(lines, ['line1', 'line2', 'line3']);
  });
});

describe('container lifecycle: conmon features', () => {
  test('--log-size-max keeps the log file small', async () => {
    const c = await run(['sh', '-c', 'i=0; while [ $i -lt 2000 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done'], {}, { logSizeMax: 16384 });
    assert.equal(c.exit.exitCode, 0);
    const size = (await stat(c.logPath)).size;
    assert.ok(size <= 16384 + 4096, `log size ${size}`);
    const text = await logText(c.logPath);
    assert.match(text, /line-1999-/); // the newest output survives
  });

  test('attach socket: stdin in, framed stdout/stderr out (SOCK_SEQPACKET)', async () => {
    const c = await createContainer(['sh', '-c', 'read line; echo "got $line"; echo err >&2; cat; echo end'], {}, { stdin: true, stdinOnce: true });
    const exited = lifecycle.waitExit(c.id);
    // Connect before start (no output lost), send two packets, half-close, read until conmon closes.
    const sock = new SeqpacketSocket();
    const packets: Buffer[] = [];
    sock.on('data', (p: Buffer) => packets.push(Buffer.from(p)));
    const ended = new Promise<void>((resolve) => {
      sock.on('end', () => resolve());
      sock.on('close', () => resolve());
    });
    await new Promise<void>((resolve) => sock.connect(lifecycle.attachSocketPath(c.id), resolve));
    await lifecycle.start(c.id);
    sock.write(Buffer.from('hello\n'));
    sock.write(Buffer.from('more\n'));
    sock.end();
    await ended;
    sock.destroy();
    assert.equal((await exited).exitCode, 0);
    const byStream = (n: number) => packets.filter((p) => p[0] === n).map((p) => p.subarray(1).toString()).join('');
    assert.equal(byStream(2), 'got hello\nmore\nend\n');
    assert.equal(byStream(3), 'err\n');
    assert.ok(packets.every((p) => p[0] === 2 || p[0] === 3));
  });

  test('privileged: host devices and mount work', async () => {
    const c = await run(['sh', '-c', 'mount -t tmpfs none /tmp && test -c /dev/kmsg && echo ok'], {
      privileged: true,
      devices: await hostDevices(),
    });
    assert.equal(await logText(c.logPath), 'ok\n');
    assert.equal(c.exit.exitCode, 0);
  });
});

describe('container lifecycle (runc)', () => {
  test('runc is selectable per container', async () => {
    const runtime: RuntimeName = 'runc';
    const c = await createContainer(['sh', '-c', 'echo via runc; exit 2'], {}, { runtime });
    assert.ok((await readdir(join(driver.host.stateDir, 'runc'))).includes(c.id));
    const exited = lifecycle.waitExit(c.id);
    await lifecycle.start(c.id);
    assert.equal((await exited).exitCode, 2);
    assert.equal(await logText(c.logPath), 'via runc\n');
    await lifecycle.cleanup(c.id);
    fx.created.delete(c.id);
    assert.ok(!(await readdir(join(driver.host.stateDir, 'runc'))).includes(c.id));
  });
});
