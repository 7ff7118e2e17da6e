/**
 * Real containers: a busybox rootfs run by conmon + crun (and runc), on this host's cgroups.
 * Needs root. Every container gets a unique id and is cleaned up in after(), even on failure.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { isKind } from '../lib/errors.js';
import { buildSpec, type RuntimeSpecInput } from './build-spec.js';
import { cgroupDirs, controllerDir, controllersOnUnified } from './cgroups.js';
import { hostDevices } from './devices.js';
import type { OciSpec } from './oci-spec.js';
import { SECCOMP_BPF_ANNOTATION } from './seccomp-cache.js';
import { readLogRecords, type LogRecord } from './log-file.js';
import { RuntimeDriver, type CreateOptions } from './runtime-driver.js';
import type { RuntimeName } from './runtime-cli.js';
import { makeBusyboxRootfs, removeDir, specInput, tempDir, uniqueId } from '../../test/fixtures/runtime.js';

// node-unix-socket is CommonJS with a native part; Node's net module cannot open SOCK_SEQPACKET.
const { SeqpacketSocket } = createRequire(import.meta.url)('node-unix-socket') as typeof import('node-unix-socket');

let base = '';
let rootfs = '';
let driver: RuntimeDriver;
const created = new Set<string>();

before(async () => {
  base = await tempDir('berth-rt-');
  rootfs = join(base, 'rootfs');
  await makeBusyboxRootfs(rootfs);
  driver = new RuntimeDriver({ stateDir: join(base, 'state'), defaultRuntime: 'crun' });
  await driver.init();
});

after(async () => {
  for (const id of created) await driver.cleanup(id).catch((err) => console.error('cleanup', id, err));
  await driver?.close();
  await removeDir(base);
});

interface Started {
  id: string;
  logPath: string;
  opts: CreateOptions;
}

async function createContainer(
  args: string[],
  over: Partial<RuntimeSpecInput> = {},
  opts: Partial<CreateOptions> = {},
  d: RuntimeDriver = driver,
): Promise<Started> {
  const id = uniqueId();
  created.add(id);
  const bundleDir = join(base, 'bundles', id);
  await mkdir(bundleDir, { recursive: true });
  const input = specInput(id, rootfs, args, { cgroupVersion: d.cgroupVersion, ...over });
  if (opts.tty) input.process.terminal = true;
  const c: CreateOptions = { id, bundleDir, spec: buildSpec(input), logPath: join(base, `${id}.log`), stdin: false, tty: false, ...opts };
  await d.create(c);
  return { id, logPath: c.logPath, opts: c };
}

async function run(args: string[], over: Partial<RuntimeSpecInput> = {}, opts: Partial<CreateOptions> = {}) {
  const c = await createContainer(args, over, opts);
  const exited = driver.waitExit(c.id);
  await driver.start(c.id);
  return { ...c, exit: await exited };
}

async function logText(path: string): Promise<string> {
  let out = '';
  for await (const r of readLogRecords(path)) out += r.text + (r.partial ? '' : '\n');
  return out;
}

describe('runtime driver (crun)', () => {
  test('after init, no controller is left on a hybrid cgroup2 tree (crun needs that)', async () => {
    assert.deepEqual(await controllersOnUnified(driver.cgroupLayout), []);
  });

  test('while a driver runs it holds a controller-less cgroup hierarchy with favordynmods, mounted nowhere; close lets it go', async (t) => {
    const [major = 0] = (await readFile('/proc/sys/kernel/osrelease', 'utf8')).split('.').map(Number);
    if (major < 6) return t.skip('favordynmods needs Linux 6.0');
    const dir = join(base, 'state-dynmods');
    const d = new RuntimeDriver({ stateDir: dir, defaultRuntime: 'crun' });
    const mountsUnder = async () => (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.split(' ')[4]?.startsWith(dir));
    // The suite's own driver holds one already.
    const held = await cgroupV1Fds();
    await d.init();
    try {
      assert.equal(await cgroupV1Fds(), held + 1, 'one more descriptor on a v1 cgroup hierarchy');
      assert.match(await readFile('/proc/self/cgroup', 'utf8'), /^\d+:name=berth-dynmods:\/$/m);
      assert.deepEqual(await mountsUnder(), [], 'nothing left in the mount table');
      // A second mount of the named hierarchy shows the options it was created with.
      const view = join(base, 'dynmods-view');
      await mkdir(view, { recursive: true });
      await exec('mount', ['-t', 'cgroup', '-o', 'none,name=berth-dynmods', 'cgroup', view]);
      try {
        const line = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').find((l) => l.split(' ')[4] === view);
        assert.match(line ?? '', / - cgroup cgroup \S*favordynmods/);
      } finally {
        await exec('umount', [view]);
      }
    } finally {
      await d.close();
    }
    assert.equal(await cgroupV1Fds(), held, 'the descriptor is closed');
    assert.equal(existsSync(join(dir, 'cgroup-dynmods')), false);
  });

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
    assert.deepEqual(await driver.exitStatus(c.id), c.exit);
    assert.equal((await driver.state(c.id))?.status, 'stopped');
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
    assert.equal((await driver.state(c.id))?.status, 'created');
    const exited = driver.waitExit(c.id);
    await driver.start(c.id);
    const s = await driver.state(c.id);
    assert.equal(s?.status, 'running');
    assert.ok((s?.pid ?? 0) > 0);
    assert.equal(await driver.exitStatus(c.id), undefined);
    await driver.kill(c.id, 'SIGTERM');
    assert.equal((await exited).exitCode, 143);
  });

  test('SIGKILL gives 137; signals and pause after the exit are conflicts', async () => {
    const c = await createContainer(['sleep', '100']);
    const exited = driver.waitExit(c.id);
    await driver.start(c.id);
    await driver.kill(c.id, 9);
    assert.equal((await exited).exitCode, 137);
    await assert.rejects(driver.kill(c.id, 'TERM'), (e: unknown) => isKind(e, 'conflict'));
    await assert.rejects(driver.pause(c.id), (e: unknown) => isKind(e, 'conflict'));
    await assert.rejects(driver.start(c.id), (e: unknown) => isKind(e, 'conflict'));
  });

  test('pause and resume', async () => {
    const c = await createContainer(['sleep', '100']);
    const exited = driver.waitExit(c.id);
    await driver.start(c.id);
    await driver.pause(c.id);
    assert.equal((await driver.state(c.id))?.status, 'paused');
    const freezer = controllerDir(driver.cgroupLayout, 'freezer', await driver.cgroupsPath(c.id));
    if (driver.cgroupVersion === 1 && freezer) {
      assert.equal((await readFile(join(freezer, 'freezer.state'), 'utf8')).trim(), 'FROZEN');
    }
    await driver.resume(c.id);
    assert.equal((await driver.state(c.id))?.status, 'running');
    await driver.kill(c.id, 'KILL');
    assert.equal((await exited).exitCode, 137);
  });

  test('a container outlives its driver; a new driver adopts it', async () => {
    const stateDir = join(base, 'state-adopt');
    const first = new RuntimeDriver({ stateDir, defaultRuntime: 'crun' });
    await first.init();
    const c = await createContainer(['sh', '-c', 'echo before; sleep 100'], {}, {}, first);
    await first.start(c.id);
    // start returns once the process is released, maybe before it printed: wait for the line.
    for await (const r of readLogRecords(c.logPath, { follow: true, signal: AbortSignal.timeout(30_000) })) if (r.text.includes('before')) break;
    await first.close(); // "forget" the first driver entirely

    const second = new RuntimeDriver({ stateDir, defaultRuntime: 'crun' });
    await second.init();
    try {
      assert.deepEqual(await second.list(), [c.id]);
      assert.equal((await second.state(c.id))?.status, 'running');
      const exited = second.waitExit(c.id);
      await second.kill(c.id, 'KILL');
      const exit = await exited;
      assert.equal(exit.exitCode, 137);
      assert.match(await logText(c.logPath), /before/);
      await second.cleanup(c.id);
      assert.deepEqual(await second.list(), []);
    } finally {
      created.delete(c.id);
      await second.cleanup(c.id).catch(() => undefined);
      await second.close();
    }
  });

  test('waitExit does not hang when conmon is killed', async () => {
    const c = await createContainer(['sleep', '100']);
    const exited = driver.waitExit(c.id);
    await driver.start(c.id);
    const conmonPid = Number(await readFile(join(driver.stateDir, 'containers', c.id, 'conmon.pid'), 'utf8'));
    process.kill(conmonPid, 'SIGKILL'); // by pid: the conmon of this test's container only
    assert.equal((await exited).exitCode, 255);
    await driver.cleanup(c.id); // the orphaned container process is killed by delete --force
    created.delete(c.id);
    assert.equal(await driver.state(c.id), undefined);
  });

  test('waitExit right after a fast exit and for an already exited container', async () => {
    const c = await createContainer(['true']);
    await driver.start(c.id);
    const a = await driver.waitExit(c.id); // may register before or after the exit file appears
    const b = await driver.waitExit(c.id); // certainly after
    assert.equal(a.exitCode, 0);
    assert.deepEqual(a, b);
  });

  test('create returns with conmon.pid naming a detached conmon; fast exits in parallel never read as 255', async () => {
    // conmon's first process writes conmon.pid, unordered with its daemon's pid report: waitExit
    // reading "no conmon" right after create settled 255 under load.
    const cs = await Promise.all(Array.from({ length: 8 }, () => createContainer(['true'])));
    for (const c of cs) {
      const conmonPid = Number(await readFile(join(driver.stateDir, 'containers', c.id, 'conmon.pid'), 'utf8'));
      const stat = await readFile(`/proc/${conmonPid}/stat`, 'utf8');
      assert.match(stat, /^\d+ \(conmon\) [RSD] /);
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      assert.notEqual(ppid, process.pid, 'conmon must not be a child of the daemon');
    }
    const exits = await Promise.all(
      cs.map(async (c) => {
        await driver.start(c.id);
        return driver.waitExit(c.id);
      }),
    );
    assert.deepEqual(exits.map((e) => e.exitCode), cs.map(() => 0));
    await Promise.all(cs.map((c) => driver.cleanup(c.id)));
    for (const c of cs) created.delete(c.id);
  });

  test('without the launcher (spawn), containers run the same', async () => {
    const d = new RuntimeDriver({ stateDir: driver.stateDir, defaultRuntime: 'crun', launcher: false });
    await d.init();
    try {
      const c = await createContainer(['sh', '-c', 'echo spawned; exit 3'], {}, {}, d);
      const exited = d.waitExit(c.id);
      await d.start(c.id);
      assert.equal((await exited).exitCode, 3);
      assert.equal(await logText(c.logPath), 'spawned\n');
      await d.cleanup(c.id);
      created.delete(c.id);
    } finally {
      await d.close();
    }
  });

  test('memory and pids limits reach the cgroup and stats', async () => {
    const c = await createContainer(['sleep', '100'], { resources: { memory: 64 * 1024 * 1024, pidsLimit: 50 } });
    const exited = driver.waitExit(c.id);
    await driver.start(c.id);
    const path = await driver.cgroupsPath(c.id);
    const layout = driver.cgroupLayout;
    if (driver.cgroupVersion === 1) {
      const mem = controllerDir(layout, 'memory', path);
      const pids = controllerDir(layout, 'pids', path);
      assert.ok(mem && pids);
      assert.equal((await readFile(join(mem, 'memory.limit_in_bytes'), 'utf8')).trim(), String(64 * 1024 * 1024));
      assert.equal((await readFile(join(pids, 'pids.max'), 'utf8')).trim(), '50');
    } else {
      const dir = controllerDir(layout, 'memory', path);
      assert.ok(dir);
      assert.equal((await readFile(join(dir, 'memory.max'), 'utf8')).trim(), String(64 * 1024 * 1024));
      assert.equal((await readFile(join(dir, 'pids.max'), 'utf8')).trim(), '50');
    }
    const stats = await driver.stats(c.id);
    assert.ok(stats);
    assert.equal(stats.memoryLimit, 64 * 1024 * 1024);
    assert.equal(stats.pidsLimit, 50);
    assert.ok(stats.pids >= 1);
    assert.ok(stats.memoryUsage > 0);
    assert.ok(stats.cpuUsageNs > 0);
    await driver.kill(c.id, 'KILL');
    await exited;
  });

  test('rlimits above berthd hard limits are clamped, so the container starts', async () => {
    const nofile = driver.hardLimits.get('RLIMIT_NOFILE') ?? Infinity;
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
    const exited = driver.waitExit(c.id);
    await driver.start(c.id);
    const lines: string[] = [];
    for await (const r of readLogRecords(c.logPath, { follow: true, until: exited })) {
      lines.push(r.text.replace(/\r$/, ''));
      if (lines.length === 3) break;
    }
    assert.match(lines[0] ?? '', /^\/dev\/pts\/\d+$/);
    assert.equal(lines[1], 'TERM=xterm');
    assert.equal(lines[2], '10 20');
    await driver.resize(c.id, 30, 100);
    const e = await driver.exec(c.id, { execId: uniqueId('ex'), process: { args: ['stty', '-F', lines[0] ?? '', 'size'], env: [], terminal: false }, stdin: false });
    const [size] = await Promise.all([streamText(e.stdout), e.exit]);
    assert.equal(size, '30 100\n');
    await driver.kill(c.id, 'KILL');
    assert.equal((await exited).exitCode, 137);
  });

  test('exec: output, exit codes, a missing binary, a tty', async () => {
    const c = await createContainer(['sleep', '100'], {
      process: { args: ['sleep', '100'], env: ['FOO=bar'], cwd: '/', user: { uid: 0, gid: 0 }, terminal: false },
    });
    const exited = driver.waitExit(c.id);
    await driver.start(c.id);

    const e1 = await driver.exec(c.id, {
      execId: uniqueId('ex'),
      process: { args: ['sh', '-c', 'echo hello $FOO; echo warn >&2; exit 5'], env: ['FOO=baz'], terminal: false },
      stdin: false,
    });
    const [out, err, r1] = await Promise.all([streamText(e1.stdout), streamText(e1.stderr), e1.exit]);
    assert.ok(e1.pid > 0, `exec started (${err} ${r1.error ?? ''})`);
    assert.equal(out, 'hello baz\n');
    assert.equal(err, 'warn\n');
    assert.equal(r1.exitCode, 5);

    const e2 = await driver.exec(c.id, {
      execId: uniqueId('ex'),
      process: { args: ['sh', '-c', 'cat; echo done'], env: [], terminal: false },
      stdin: true,
    });
    e2.stdin?.end('from stdin\n');
    const [out2, r2] = await Promise.all([streamText(e2.stdout), e2.exit]);
    assert.equal(out2, 'from stdin\ndone\n');
    assert.equal(r2.exitCode, 0);

    // Detached: no reader for the output, the exit code still arrives.
    const e5 = await driver.exec(c.id, {
      execId: uniqueId('ex'),
      process: { args: ['sh', '-c', 'i=0; while [ $i -lt 3000 ]; do echo 0123456789012345678901234567890123456789; i=$((i+1)); done; exit 6'], env: [], terminal: false },
      stdin: false,
      discardOutput: true,
    });
    assert.equal(e5.stdout, undefined);
    assert.equal((await e5.exit).exitCode, 6);

    const e3 = await driver.exec(c.id, { execId: uniqueId('ex'), process: { args: ['nosuchcmd'], env: [], terminal: false }, stdin: false });
    const [err3, r3] = await Promise.all([streamText(e3.stderr), e3.exit]);
    assert.equal(e3.pid, 0);
    assert.equal(r3.exitCode, 127);
    assert.match(err3 + (r3.error ?? ''), /not found/);

    let readyPath = '';
    const e4 = await driver.exec(c.id, {
      execId: uniqueId('ex'),
      process: { args: ['sh', '-c', 'tty; exit 4'], env: [], terminal: true },
      stdin: false,
      onAttachReady: (p) => {
        readyPath = p;
        assert.ok(existsSync(p), 'attach socket exists before the process starts');
      },
    });
    assert.equal(readyPath, e4.attachSocketPath);
    assert.equal((await e4.exit).exitCode, 4);
    assert.match(await logText(e4.logPath ?? ''), /^\/dev\/pts\/\d+/);
    await e4.dispose();

    await driver.kill(c.id, 'KILL');
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
    created.add(id);
    const bundleDir = join(base, 'bundles', id);
    await mkdir(bundleDir, { recursive: true });
    const spec = buildSpec(specInput(id, rootfs, ['/no/such/binary'], { cgroupVersion: driver.cgroupVersion }));
    await assert.rejects(
      driver.create({ id, bundleDir, spec, logPath: join(base, `${id}.log`), stdin: false, tty: false }),
      (err: unknown) => isKind(err, 'invalid-argument') && /no such file|not found/i.test((err as Error).message),
    );
    assert.equal(await driver.state(id), undefined);
    assert.ok(!existsSync(join(driver.stateDir, 'containers', id)));
  });

  test('cleanup removes runtime state, cgroup and files, and is idempotent', async () => {
    const c = await createContainer(['sleep', '100'], { resources: { memory: 32 * 1024 * 1024 } });
    await driver.start(c.id);
    const dirs = cgroupDirs(driver.cgroupLayout, await driver.cgroupsPath(c.id));
    assert.ok(dirs.some((d) => existsSync(d)), 'the container has a cgroup while it runs');
    await driver.cleanup(c.id); // still running: killed by delete --force
    await driver.cleanup(c.id);
    created.delete(c.id);
    for (const d of dirs) assert.ok(!existsSync(d), `${d} removed`);
    assert.equal(await driver.state(c.id), undefined);
    const rtRoot = join(driver.stateDir, 'crun');
    assert.ok(!(await readdir(rtRoot)).includes(c.id));
    assert.ok(!existsSync(join(driver.stateDir, 'exits', c.id)));
    assert.ok(!existsSync(join(driver.stateDir, 'sockets', c.id)));
    assert.ok(!existsSync(join(driver.stateDir, 'containers', c.id)));
    assert.ok(!existsSync(join(c.opts.bundleDir, 'attach')));
    await assert.rejects(driver.waitExit(c.id), (err: unknown) => isKind(err, 'not-found'));
  });

  test('follow mode streams a running container and ends after its exit', async () => {
    const c = await createContainer(['sh', '-c', 'for i in 1 2 3; do echo line$i; sleep 0.1; done']);
    const exited = driver.waitExit(c.id);
    await driver.start(c.id);
    const lines: string[] = [];
    for await (const r of readLogRecords(c.logPath, { follow: true, until: exited })) lines.push(r.text);
    assert.deepEqual(lines, ['line1', 'line2', 'line3']);
  });
});

describe('runtime driver: conmon features', () => {
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
    const exited = driver.waitExit(c.id);
    // Connect before start (no output lost), send two packets, half-close, read until conmon closes.
    const sock = new SeqpacketSocket();
    const packets: Buffer[] = [];
    sock.on('data', (p: Buffer) => packets.push(Buffer.from(p)));
    const ended = new Promise<void>((resolve) => {
      sock.on('end', () => resolve());
      sock.on('close', () => resolve());
    });
    await new Promise<void>((resolve) => sock.connect(driver.attachSocketPath(c.id), resolve));
    await driver.start(c.id);
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

describe('runtime driver (runc)', () => {
  test('runc is selectable per container', async () => {
    const runtime: RuntimeName = 'runc';
    const c = await createContainer(['sh', '-c', 'echo via runc; exit 2'], {}, { runtime });
    assert.ok((await readdir(join(driver.stateDir, 'runc'))).includes(c.id));
    const exited = driver.waitExit(c.id);
    await driver.start(c.id);
    assert.equal((await exited).exitCode, 2);
    assert.equal(await logText(c.logPath), 'via runc\n');
    await driver.cleanup(c.id);
    created.delete(c.id);
    assert.ok(!(await readdir(join(driver.stateDir, 'runc'))).includes(c.id));
  });
});

async function streamText(s: NodeJS.ReadableStream | undefined): Promise<string> {
  if (!s) return '';
  let out = '';
  for await (const chunk of s) out += chunk.toString();
  return out;
}

const exec = promisify(execFile);
const CGROUP_SUPER_MAGIC = 0x27e0eb;

/** How many of this process's descriptors are open on a cgroup v1 filesystem. */
async function cgroupV1Fds(): Promise<number> {
  let n = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    const type = await statfs(`/proc/self/fd/${fd}`).then((s) => s.type, () => 0);
    if (type === CGROUP_SUPER_MAGIC) n++;
  }
  return n;
}
