/**
 * The floor of bench workload 15 (compose `up -d --wait` of 10 services), measured in pieces:
 *   node bench/dist/bench/tools/compose-floor.js [rounds=8] [compose|crun|both|run|health] [--alt <berthd launcher>]
 *
 * compose: berthd (this checkout, `--log-level info` as in the bench) behind a timestamping HTTP proxy
 * on its own socket; workload 15's project; per round the phases of `up -d --wait` (compose's exec to
 * its first request, the network create, the creates, first start request to last start answer, last
 * start answer to compose's exit) and the whole `down -v`. With `--alt`, a second berthd started from
 * that launcher (e.g. a copy of the base build) takes turns with this one, round by round (A/B).
 * crun: no berthd. Ten `crun create` + `crun start` of a sleeping busybox bundle at once (wall time
 * until all ten starts answered, i.e. all ten processes run), and ten `crun run` of `true` at once.
 * run: workload 1 (`docker run --rm busybox true`, 3 x rounds runs) on each berthd, taking turns.
 * health: a container probed every 100 ms on each berthd in turn; the p99 of /_ping meanwhile.
 * Each figure is printed with the load average at that moment. Everything made is removed at the end.
 * Besides the phases, each round counts the machine's busy CPU during the starts (share of both cores,
 * /proc/stat) and the CPU time of berthd's main thread and of its other threads (schedstat).
 *
 * Environment, for looking inside (compose mode):
 *   CF_HITS=1            every request of the last round's up, when it came and its answer time
 *   CF_MARKS=<file>      CLOCK_MONOTONIC stamps of each round's phases (to cut `perf record -k
 *                        CLOCK_MONOTONIC` samples into phases)
 *   CF_PERF=<dir>        berthd runs under `perf record ... --control fifo:<dir>/ctl,<dir>/ack -D -1`
 *                        (a BERTHD_BIN wrapper): sampling is switched on for each timed up only
 *   CF_STRACE_UP=<pfx>   strace -f -tt -T of berthd, its threads and children during each up
 *   CF_STRACE=<pfx>      what berthd execs during each down
 *   CF_KEEP_LOG=<pfx>    keep berthd's log
 *   CF_NETWORK_MODE=none the project without its network (no plumbing, no DNS), for comparison
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, closeSync, copyFileSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { request as httpRequest, createServer, Agent, type Server } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { busyboxImage, makeTempDir, pushImage, removeDirSync, startDaemon, startRegistry, type TestDaemon } from '../../test/harness/index.js';
import { mustRun, runCommand } from '../lib/run-command.js';

const args = process.argv.slice(2);
const altAt = args.indexOf('--alt');
const alt = altAt >= 0 ? args.splice(altAt, 2)[1] : undefined;
const rounds = Number(args[0] ?? 8);
const what = args[1] ?? 'both';
const CRUN = process.env.BENCH_CRUN ?? '/usr/bin/crun';

const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const fmt = (xs: number[]) => `${median(xs).toFixed(1)} ms (${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)})`;

interface Hit {
  method: string;
  path: string;
  at: number;
  answered: number;
  /** The machine's busy CPU time (ms, /proc/stat) when the request came and when it was answered. */
  busyAt: number;
  busyAnswered: number;
}

/** An HTTP proxy from `socket` to berthd's socket that records when each request came and was answered. */
function proxy(socket: string, upstream: string, hits: Hit[]): Promise<Server> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const server = createServer((req, res) => {
    const hit: Hit = { method: req.method ?? '', path: req.url ?? '', at: performance.now(), answered: 0, busyAt: machineBusyMs(), busyAnswered: 0 };
    hits.push(hit);
    const up = httpRequest({ socketPath: upstream, method: req.method, path: req.url, headers: req.headers, agent }, (r) => {
      hit.answered = performance.now();
      hit.busyAnswered = machineBusyMs();
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  return new Promise((resolve) => server.listen(socket, () => resolve(server)));
}

function project(image: string): unknown {
  const services: Record<string, unknown> = {};
  for (let i = 1; i <= 10; i++) {
    const s: Record<string, unknown> = { image, command: ['sleep', '3600'], init: true, stop_grace_period: '1s' };
    // CF_NETWORK_MODE=none: a variant without the project network (no plumbing, no DNS), for comparison.
    if (process.env.CF_NETWORK_MODE) s.network_mode = process.env.CF_NETWORK_MODE;
    if (i === 1) {
      s.command = ['sh', '-c', 'touch /tmp/ready; exec sleep 3600'];
      s.healthcheck = { test: ['CMD', 'test', '-f', '/tmp/ready'], interval: '200ms', retries: 100 };
      s.volumes = ['data:/data'];
    }
    services[`svc${i}`] = s;
  }
  return { services, volumes: { data: {} } };
}

function timeSpawn(bin: string, argv: string[], env: NodeJS.ProcessEnv): Promise<{ t0: number; end: number; code: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(bin, argv, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ t0, end: performance.now(), code: code ?? -1, stderr }));
  });
}

const PHASES = ['exec → first request', 'POST /networks/create', 'creates (first request → last answer)', 'first start request → last start answer', 'last start answer → exit', 'whole up', 'down -v', 'berthd CPU during up', 'machine CPU busy during up', 'slowest /_ping during down', 'machine CPU busy during the starts (% of 2 cores)', 'berthd main thread CPU during up', 'berthd other threads CPU during up'] as const;

/** GET /_ping to berthd one after another until stopped: how long its event loop was held meanwhile. */
function pingWhile(socket: string): { stop: () => Promise<number[]> } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const times: number[] = [];
  let stopped = false;
  const loop = (async () => {
    for (let i = 0; i < 10_000 && !stopped; i++) {
      const t = performance.now();
      await new Promise<void>((resolve) => {
        const r = httpRequest({ socketPath: socket, path: '/_ping', agent }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        r.on('error', () => resolve());
        r.end();
      });
      times.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      agent.destroy();
      return times.length ? times : [0];
    },
  };
}

/** Writes a command to perf record's control FIFO and waits for its acknowledgement. */
function perfControl(dir: string, cmd: 'enable' | 'disable'): void {
  writeFileSync(join(dir, 'ctl'), `${cmd}\n`);
  const fd = openSync(join(dir, 'ack'), 'r');
  try {
    readSync(fd, Buffer.alloc(16));
  } finally {
    closeSync(fd);
  }
}

/** performance.now() to CLOCK_MONOTONIC nanoseconds: the offset between the two. */
const monoBase = Number(process.hrtime.bigint()) - performance.now() * 1e6;

/** Every thread of a process and of its descendants (strace -p each: -f follows only new ones). */
function treeTasks(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    for (const t of readdirSync(`/proc/${p}/task`)) {
      out.push(Number(t));
      for (const c of readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) walk(Number(c));
    }
  };
  walk(pid);
  return out;
}

const TICK_MS = 1000 / 100; // USER_HZ
/** utime + stime of a process, ms. */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) * TICK_MS;
}
/**
 * CPU time of a process's main thread and of its other threads (libuv's pool, V8's), ms, from each
 * task's schedstat (nanoseconds; the tick-based utime/stime are too coarse for one `up`). Threads that
 * ended meanwhile are not counted.
 */
function threadCpuMs(pid: number): { main: number; others: number } {
  let main = 0;
  let others = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    let ns = 0;
    try {
      ns = Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      continue; // ended meanwhile
    }
    if (Number(t) === pid) main += ns / 1e6;
    else others += ns / 1e6;
  }
  return { main, others };
}

/** Every CPU's non-idle time since boot, ms (includes everyone else's work on a shared machine). */
function machineBusyMs(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (f.reduce((a, b) => a + b, 0) - f[3]! - f[4]!) * TICK_MS;
}

async function composeFloor(tmp: string): Promise<void> {
  const bin = (await mustRun('bash', [join(process.cwd(), 'scripts', 'install-compose.sh')], { timeoutMs: 1_800_000 })).stdout.trim();
  const registry = await startRegistry('open');
  const daemons: { name: string; d: TestDaemon; hits: Hit[]; server?: Server; sock: string; samples: Map<string, number[]> }[] = [];
  try {
    await pushImage(registry, 'busybox', 'latest', await busyboxImage());
    const image = `${registry.host}/busybox:latest`;
    const launchers: [string, string | undefined][] = [['this build', undefined], ...(alt ? [['alt', alt] as [string, string]] : [])];
    for (const [name, launcher] of launchers) {
      const before = process.env.BERTHD_BIN;
      if (launcher) process.env.BERTHD_BIN = launcher;
      const d = await startDaemon({ args: ['--log-level', 'info'], readyTimeoutMs: 60_000 });
      if (launcher) {
        if (before === undefined) delete process.env.BERTHD_BIN;
        else process.env.BERTHD_BIN = before;
      }
      const sock = join(tmp, `proxy-${daemons.length}.sock`);
      const entry = { name, d, hits: [] as Hit[], sock, samples: new Map<string, number[]>() };
      daemons.push(entry);
      (entry as { server?: Server }).server = await proxy(sock, d.socket, entry.hits);
      const pull = await d.docker(['pull', image]);
      if (pull.code !== 0) throw new Error(`pull: ${pull.stderr}`);
    }
    const dir = join(tmp, 'project');
    const config = join(tmp, 'docker-config');
    mkdirSync(dir, { recursive: true });
    mkdirSync(config, { recursive: true });
    writeFileSync(join(config, 'config.json'), '{}\n');
    writeFileSync(join(dir, 'compose.json'), JSON.stringify(project(image), null, 2));
    const compose = (sock: string, more: string[]) =>
      timeSpawn(bin, ['-f', join(dir, 'compose.json'), '-p', 'floorcompose', '--progress', 'quiet', ...more], {
        ...process.env,
        DOCKER_HOST: `unix://${sock}`,
        DOCKER_CONFIG: config,
        DOCKER_CLI_HINTS: 'false',
      });
    if (what === 'health') {
      // A container probed every 100 ms (its probe prints to stdout and stderr) on each berthd in turn,
      // 3 s each round: the slowest /_ping meanwhile, and the last probe's output as inspect shows it.
      const slowest = new Map(daemons.map((e) => [e.name, [] as number[]]));
      for (let round = 0; round < rounds; round++) {
        for (const e of round % 2 ? daemons : [...daemons].reverse()) {
          const r = await e.d.docker(['run', '-d', '--health-cmd', 'echo out; echo err >&2', '--health-interval', '100ms', image, 'sleep', '60']);
          if (r.code !== 0) throw new Error(`docker run: ${r.stderr}`);
          const id = r.stdout.trim();
          await new Promise((res) => setTimeout(res, 500));
          const pinger = pingWhile(e.d.socket);
          await new Promise((res) => setTimeout(res, 3000));
          const pings = await pinger.stop();
          const health = await e.d.docker(['inspect', '-f', '{{json .State.Health}}', id]);
          await e.d.docker(['rm', '-f', id]);
          const sorted = [...pings].sort((a, b) => a - b);
          slowest.get(e.name)!.push(sorted[Math.floor(sorted.length * 0.99)]!);
          if (round === 0) console.log(`${e.name}: ${health.stdout.trim().slice(-160)}`);
        }
      }
      for (const [name, xs] of slowest) console.log(`p99 /_ping while probed every 100 ms, berthd ${name}: ${fmt(xs)}; load ${load()}`);
      return;
    }
    if (what === 'run') {
      // Workload 1's `docker run --rm busybox true` (the default bridge), the engines taking turns: a
      // change to the start or exit path must not slow it.
      const runs = new Map(daemons.map((e) => [e.name, [] as number[]]));
      for (let round = -1; round < rounds * 3; round++) {
        for (const e of round % 2 ? daemons : [...daemons].reverse()) {
          const t = performance.now();
          const r = await e.d.docker(['run', '--rm', image, 'true']);
          if (r.code !== 0) throw new Error(`docker run: ${r.stderr}`);
          if (round >= 0) runs.get(e.name)!.push(performance.now() - t);
        }
      }
      for (const [name, xs] of runs) console.log(`docker run --rm busybox true, berthd ${name}, ${xs.length} runs: ${fmt(xs)}; load ${load()}`);
      return;
    }
    for (let round = -1; round < rounds; round++) {
      for (const e of round % 2 ? daemons : [...daemons].reverse()) {
        e.hits.length = 0;
        const cpu0 = [cpuMs(e.d.pid), machineBusyMs()];
        const threads0 = threadCpuMs(e.d.pid);
        // CF_PERF=<dir>: berthd runs under `perf record --control fifo:<dir>/ctl,<dir>/ack -D -1` (see
        // the header); sampling is on during each timed `up` only.
        if (process.env.CF_PERF && round >= 0) perfControl(process.env.CF_PERF, 'enable');
        // CF_STRACE_UP=<prefix>: every syscall of berthd and what it starts during the up (strace -f -tt -T).
        const upTracer = process.env.CF_STRACE_UP && round >= 0 ? spawn('strace', ['-f', '-qq', '-tt', '-T', '-o', `${process.env.CF_STRACE_UP}.${round}`, ...treeTasks(e.d.pid).flatMap((t) => ['-p', String(t)])], { stdio: 'ignore' }) : undefined;
        if (upTracer) await new Promise((r) => setTimeout(r, 500));
        const up = await compose(e.sock, ['up', '-d', '--wait']);
        if (upTracer) {
          upTracer.kill('SIGINT');
          await new Promise((r) => upTracer.once('exit', r));
        }
        if (process.env.CF_PERF && round >= 0) perfControl(process.env.CF_PERF, 'disable');
        const cpu = [cpuMs(e.d.pid) - cpu0[0]!, machineBusyMs() - cpu0[1]!];
        const threads1 = threadCpuMs(e.d.pid);
        const hits = [...e.hits];
        // CF_STRACE=<prefix>: the processes berthd itself execs during `down` (strace -f on berthd).
        const tracer = process.env.CF_STRACE ? spawn('strace', ['-f', '-qq', '-e', 'trace=execve,clone,clone3,vfork,fork', '-o', `${process.env.CF_STRACE}.${round}`, '-p', String(e.d.pid)], { stdio: 'ignore' }) : undefined;
        if (tracer) await new Promise((r) => setTimeout(r, 300));
        const pinger = pingWhile(e.d.socket);
        const down = await compose(e.sock, ['down', '-v', '-t', '0']);
        const pings = await pinger.stop();
        if (tracer) {
          await new Promise((r) => setTimeout(r, 300));
          tracer.kill('SIGINT');
          await new Promise((r) => tracer.once('exit', r));
        }
        if (up.code !== 0 || down.code !== 0) throw new Error(`compose: up ${up.code} ${up.stderr} down ${down.code} ${down.stderr}`);
        if (round < 0) continue;
        // CF_HITS=1: every request of the last round's up, when it came and how long its answer took.
        if (process.env.CF_HITS && round === rounds - 1) {
          for (const h of hits) console.log(`  ${(h.at - up.t0).toFixed(1).padStart(7)} ms +${(h.answered - h.at).toFixed(1).padStart(6)} ms  ${h.method} ${h.path.replace(/[0-9a-f]{64}/, '<id>')}`);
        }
        const of = (m: string, re: RegExp) => hits.filter((h) => h.method === m && re.test(h.path));
        const creates = [...of('POST', /\/containers\/create/), ...of('GET', /\/containers\/[0-9a-f]{64}\/json/).filter((h) => h.at < of('POST', /\/start$/)[0]!.at)];
        const starts = of('POST', /\/containers\/[^/]+\/start$/);
        const net = of('POST', /\/networks\/create/)[0] ?? { ...hits[0]!, answered: hits[0]!.at };
        const lastStart = Math.max(...starts.map((h) => h.answered));
        const figures = [
          hits[0]!.at - up.t0,
          net.answered - net.at,
          Math.max(...creates.map((h) => h.answered)) - Math.min(...creates.map((h) => h.at)),
          lastStart - Math.min(...starts.map((h) => h.at)),
          up.end - lastStart,
          up.end - up.t0,
          down.end - down.t0,
          cpu[0]!,
          cpu[1]!,
          Math.max(...pings),
          (100 * (Math.max(...starts.map((h) => h.busyAnswered)) - Math.min(...starts.map((h) => h.busyAt)))) / (2 * (lastStart - Math.min(...starts.map((h) => h.at)))),
          threads1.main - threads0.main,
          threads1.others - threads0.others,
        ];
        PHASES.forEach((p, i) => {
          const list = e.samples.get(p) ?? [];
          list.push(figures[i]!);
          e.samples.set(p, list);
        });
        console.log(`round ${round} ${e.name}: ${figures.map((f) => f.toFixed(0)).join(' / ')} ms; load ${load()}`);
        // CF_MARKS=<file>: per round, CLOCK_MONOTONIC seconds of the up's exec, the network create, the
        // first create, the first start request, the last start answer and the exit (to cut perf samples
        // recorded with `-k CLOCK_MONOTONIC` into phases).
        if (process.env.CF_MARKS) {
          const mono = (t: number) => ((monoBase + t * 1e6) / 1e9).toFixed(6);
          const firstCreate = Math.min(...creates.map((h) => h.at));
          appendFileSync(process.env.CF_MARKS, `${e.name.replace(/\W/g, '-')} ${round} ${[up.t0, net.at, firstCreate, Math.min(...starts.map((h) => h.at)), lastStart, up.end].map(mono).join(' ')}\n`);
        }
      }
    }
    for (const e of daemons) {
      console.log(`\ncompose up -d --wait, berthd ${e.name}, medians of ${rounds} (load at the end ${load()}):`);
      for (const p of PHASES) console.log(`  ${p.padEnd(42)} ${fmt(e.samples.get(p)!)}`);
    }
  } finally {
    for (const e of daemons) {
      e.server?.close();
      // CF_KEEP_LOG=<path>: keep berthd's log (e.g. for phase traces) before the teardown removes it.
      if (process.env.CF_KEEP_LOG) copyFileSync(e.d.logFile, `${process.env.CF_KEEP_LOG}.${e.name.replace(/\W/g, '-')}`);
      await e.d.teardown();
    }
    await registry.stop();
  }
}

async function crunFloor(tmp: string): Promise<void> {
  const bundle = join(tmp, 'bundle');
  const state = join(tmp, 'crun-state');
  mkdirSync(join(bundle, 'rootfs'), { recursive: true });
  mkdirSync(state, { recursive: true });
  const image = await busyboxImage();
  await mustRun('tar', ['-xzf', image.layers[0]!.path, '-C', join(bundle, 'rootfs')]);
  await mustRun(CRUN, ['spec'], { cwd: bundle });
  const spec = JSON.parse(readFileSync(join(bundle, 'config.json'), 'utf8')) as { process: { args: string[]; terminal: boolean } };
  spec.process.terminal = false;
  const write = (argv: string[]) => writeFileSync(join(bundle, 'config.json'), JSON.stringify({ ...spec, process: { ...spec.process, args: argv } }));
  const crun = (argv: string[]) => runCommand(CRUN, ['--root', state, ...argv], { timeoutMs: 60_000 });
  // crun create's process inherits stdio: /dev/null, so that nothing waits for the sleeping process's pipes.
  const detached = (argv: string[]) =>
    new Promise<number>((resolve) => {
      const c = spawn(CRUN, ['--root', state, ...argv], { stdio: 'ignore' });
      c.on('exit', (code) => resolve(code ?? -1));
      c.on('error', () => resolve(-1));
    });
  const sleepers: number[] = [];
  const runs: number[] = [];
  const all: string[] = [];
  try {
    for (let round = -1; round < rounds; round++) {
      write(['sleep', '3600']);
      const ids = Array.from({ length: 10 }, () => `berth-floor-${randomBytes(6).toString('hex')}`);
      all.push(...ids);
      let t = performance.now();
      const codes = await Promise.all(ids.map(async (id) => [await detached(['create', '--bundle', bundle, id]), await detached(['start', id])]));
      const sleepMs = performance.now() - t;
      if (codes.flat().some((c) => c !== 0)) throw new Error(`crun create/start failed: ${JSON.stringify(codes)}`);
      const loadSleep = load();
      await Promise.all(ids.map((id) => crun(['delete', '--force', id])));
      write(['true']);
      const runIds = Array.from({ length: 10 }, () => `berth-floor-${randomBytes(6).toString('hex')}`);
      all.push(...runIds);
      t = performance.now();
      const rs = await Promise.all(runIds.map((id) => crun(['run', '--bundle', bundle, id])));
      const runMs = performance.now() - t;
      if (rs.some((r) => r.code !== 0)) throw new Error(`crun run failed: ${rs.map((r) => r.stderr).join(' ')}`);
      await Promise.all(runIds.map((id) => crun(['delete', '--force', id])));
      if (round < 0) continue;
      sleepers.push(sleepMs);
      runs.push(runMs);
      console.log(`round ${round}: ten create+start of sleep ${sleepMs.toFixed(1)} ms (load ${loadSleep}); ten run of true ${runMs.toFixed(1)} ms (load ${load()})`);
    }
    console.log(`\ncrun, no berthd, medians of ${rounds} (load at the end ${load()}):`);
    console.log(`  ten crun create + start of sleep at once, until all run  ${fmt(sleepers)}`);
    console.log(`  ten crun run of true at once, until all exited          ${fmt(runs)}`);
  } finally {
    for (const id of all) await runCommand(CRUN, ['--root', state, 'delete', '--force', id]).catch(() => {});
  }
}

async function main(): Promise<void> {
  const tmp = makeTempDir('compose-floor');
  try {
    if (what === 'crun' || what === 'both') await crunFloor(tmp);
    if (what !== 'crun') await composeFloor(tmp); // 'run', 'health': instead of the project
  } finally {
    removeDirSync(tmp);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
