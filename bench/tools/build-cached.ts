/**
 * Bench workload 11's cached build, on berthd alone, build by build:
 *   node bench/dist/bench/tools/build-cached.js [rounds=15] [pairs|cached] [--alt <berthd launcher>] [--probe] [--mib 20]
 *
 * pairs: each round a cold build (nocache=1) then the cached one, as workload 11 does; cached: cached
 * builds only, one after another (after one cold build). The context is workload 11's (a plain tar,
 * POSTed with Content-Length from a keep-alive client). With `--alt`, a second berthd started from that
 * launcher (e.g. a copy of the base build) takes turns with this one, round by round (A/B). Each cached
 * build prints its wall time, berthd's main-thread and whole-process CPU (schedstat) and minor faults;
 * with `--probe`, berthd runs with bench/tools/build-probe.mjs preloaded (no other change) and each line
 * adds when the body's first and last bytes were read, the answer's first write and its end, relative
 * to the client's send, and the GC events and the event loop's longest delay meanwhile.
 */
import { copyFileSync, readdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { busyboxImage, makeTempDir, pushImage, removeDirSync, repoRoot, startDaemon, startRegistry, type TestDaemon } from '../../test/harness/index.js';
import { ApiClient } from '../lib/api-client.js';
import { buildOnce, contextTar } from '../workloads/w11-build.js';

const args = process.argv.slice(2);
const take = (flag: string): string | undefined => {
  const at = args.indexOf(flag);
  return at >= 0 ? args.splice(at, 2)[1] : undefined;
};
const alt = take('--alt');
const mib = Number(take('--mib') ?? 20);
const probeAt = args.indexOf('--probe');
const probe = probeAt >= 0 && args.splice(probeAt, 1).length > 0;
const rounds = Number(args[0] ?? 15);
const mode = args[1] ?? 'pairs';

const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const fmt = (xs: number[]) => `${median(xs).toFixed(1)} ms (${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)})`;
const now = () => performance.timeOrigin + performance.now();

/** ns on CPU of the main thread, of every thread of `pid`, and of each thread. */
function cpuNs(pid: number): { main: number; all: number; threads: Map<string, number> } {
  const of = (tid: string) => {
    try {
      return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) || 0;
    } catch {
      return 0; // a thread that ended meanwhile
    }
  };
  let all = 0;
  const threads = new Map<string, number>();
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    const ns = of(t);
    threads.set(t, ns);
    all += ns;
  }
  return { main: of(String(pid)), all, threads };
}
const minFaults = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[7]);

interface ProbeBuild { at: number; firstData: number; lastData: number; end: number; chunks: number; bytes: number; maxChunk: number; firstWrite: number; lastWrite: number; writes: number; finish: number }
interface ProbeDoc { builds: ProbeBuild[]; gcs: { at: number; ms: number; kind: number }[]; eld: { max: number } }

function readProbe(sock: string): Promise<ProbeDoc> {
  return new Promise((resolve, reject) => {
    let text = '';
    connect(sock)
      .on('data', (d) => (text += d.toString()))
      .on('end', () => resolve(JSON.parse(text) as ProbeDoc))
      .on('error', reject);
  });
}

interface Daemon { name: string; d: TestDaemon; api: ApiClient; probeSock: string; samples: Map<string, number[]> }

async function main(): Promise<void> {
  const tmp = makeTempDir('build-cached');
  const registry = await startRegistry('open');
  const daemons: Daemon[] = [];
  try {
    await pushImage(registry, 'busybox', 'latest', await busyboxImage());
    const image = `${registry.host}/busybox:latest`;
    for (const [name, launcher] of [['this build', join(repoRoot(), 'bin', 'berthd')], ...(alt ? [['alt', alt]] : [])] as [string, string][]) {
      const probeSock = join(tmp, `probe-${daemons.length}.sock`);
      // As the launcher's first line does, plus the probe: node runs the launcher as a script.
      // BC_NODE_FLAGS: more node flags for berthd (--cpu-prof, --trace-gc ...), with or without the probe.
      const flags = (process.env.BC_NODE_FLAGS ?? '').split(' ').filter(Boolean);
      const wrap = probe || flags.length ? [process.execPath, '--max-semi-space-size=2', ...flags, ...(probe ? ['--import', join(repoRoot(), 'bench', 'tools', 'build-probe.mjs')] : [])] : [];
      const before = process.env.BERTHD_BIN;
      process.env.BERTHD_BIN = launcher;
      const d = await startDaemon({ args: ['--log-level', 'info'], readyTimeoutMs: 60_000, wrap, env: { BUILD_PROBE_SOCK: probeSock } });
      if (before === undefined) delete process.env.BERTHD_BIN;
      else process.env.BERTHD_BIN = before;
      const e: Daemon = { name, d, api: new ApiClient(d.socket), probeSock, samples: new Map() };
      daemons.push(e);
      const pull = await d.docker(['pull', image]);
      if (pull.code !== 0) throw new Error(`pull: ${pull.stderr}`);
    }
    const context = await contextTar(image, mib);
    const tag = 'bench/build:cached';
    for (const e of daemons) await buildOnce(e.api, context, `nocache=1&t=${tag}`);
    const add = (e: Daemon, k: string, v: number) => {
      const list = e.samples.get(k) ?? [];
      list.push(v);
      e.samples.set(k, list);
    };
    for (let round = -1; round < rounds; round++) {
      for (const e of round % 2 ? daemons : [...daemons].reverse()) {
        const pid = e.d.pid;
        if (mode === 'pairs') await buildOnce(e.api, context, `nocache=1&t=${tag}`);
        if (probe) await readProbe(e.probeSock);
        const c0 = cpuNs(pid);
        const f0 = minFaults(pid);
        const m0 = process.hrtime.bigint();
        const t0 = now();
        await buildOnce(e.api, context, `t=${tag}`);
        const t1 = now();
        const m1 = process.hrtime.bigint();
        const c1 = cpuNs(pid);
        const faults = minFaults(pid) - f0;
        const wall = t1 - t0;
        const main = (c1.main - c0.main) / 1e6;
        const all = (c1.all - c0.all) / 1e6;
        // the other threads that ran meanwhile (tid - pid: V8's platform workers start right after the main thread)
        const others = [...c1.threads].filter(([t]) => t !== String(pid)).map(([t, ns]) => [Number(t) - pid, (ns - (c0.threads.get(t) ?? 0)) / 1e6] as const).filter(([, ms]) => ms >= 0.1);
        let extra = '';
        if (probe) {
          const p = await readProbe(e.probeSock);
          const b = p.builds[p.builds.length - 1];
          const gcs = p.gcs.filter((g) => g.at >= t0 && g.at <= t1);
          if (b) {
            const r = (x: number) => (x ? (x - t0).toFixed(1) : '-');
            extra = ` | req ${r(b.at)} data ${r(b.firstData)}..${r(b.lastData)} (${b.chunks} chunks, max ${b.maxChunk}) end ${r(b.end)} write ${r(b.firstWrite)}..${r(b.lastWrite)} (${b.writes}) finish ${r(b.finish)}`;
            if (round >= 0) {
              add(e, 'body read (first to last byte)', b.lastData - b.firstData);
              add(e, 'body end to finish', b.finish - b.end);
              add(e, 'finish to client done', t1 - b.finish);
            }
          }
          extra += ` | gc ${gcs.map((g) => `${g.kind}:${g.ms.toFixed(1)}`).join(',') || '-'} eld.max ${p.eld.max.toFixed(1)}`;
        }
        if (round < 0) continue;
        add(e, 'wall', wall);
        add(e, 'main thread CPU', main);
        add(e, 'process CPU', all);
        add(e, 'minor faults', faults);
        console.log(`round ${round} ${e.name}: ${wall.toFixed(1)} ms, cpu main ${main.toFixed(1)} all ${all.toFixed(1)} ms, faults ${faults}, other threads ${others.map(([t, ms]) => `+${t}:${ms.toFixed(1)}`).join(' ') || '-'}${extra}; load ${load()}; mono ${m0} ${m1} pid ${pid} client ${process.pid}`);
      }
    }
    for (const e of daemons) {
      const status = readFileSync(`/proc/${e.d.pid}/status`, 'utf8');
      const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
      console.log(`\ncached build, berthd ${e.name}, ${mode}, medians of ${rounds} (load at the end ${load()}); its RSS now ${(kib('VmRSS') / 1024).toFixed(1)} MiB (peak ${(kib('VmHWM') / 1024).toFixed(1)}):`);
      for (const [k, xs] of e.samples) console.log(`  ${k.padEnd(32)} ${fmt(xs)}`);
    }
  } finally {
    for (const e of daemons) {
      e.api.close();
      // BC_KEEP_LOG=<path>: keep berthd's log (--trace-gc goes there) before the teardown removes it.
      if (process.env.BC_KEEP_LOG) copyFileSync(e.d.logFile, `${process.env.BC_KEEP_LOG}.${e.name.replace(/\W/g, '-')}`);
      await e.d.teardown();
    }
    await registry.stop();
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
