import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { repoRoot } from '../test/harness/daemon.js';
import { startRegistry, type TestRegistry } from '../test/harness/registry.js';
import { makeTempDir, removeDir } from '../test/harness/temp-dir.js';
import { busyboxImage } from '../test/fixtures/busybox.js';
import { bigImage } from '../test/fixtures/big.js';
import { pushImage } from '../test/fixtures/push-image.js';
import { controllersOnUnified, detectCgroupLayout, fixHybridLayout } from '../src/runtime/cgroups.js';
import { startBerth } from './engines/berth.js';
import { DOCKERD_BINARY, startDockerd } from './engines/dockerd.js';
import { ENGINE_NAMES, type Engine, type EngineName } from './engines/engine.js';
import { installEngines } from './engines/install.js';
import { PODMAN_BINARY, startPodman } from './engines/podman.js';
import { cleanupAll, installSignalCleanup, onCleanup } from './lib/cleanup.js';
import { parseOptions, USAGE, type Options } from './lib/options.js';
import { Recorder } from './lib/recorder.js';
import { renderNotes, renderTable } from './lib/report.js';
import { runCommand } from './lib/run-command.js';
import { errorText, type Ctx, type Workload } from './workloads/context.js';
import { runRm } from './workloads/w1-run-rm.js';
import { apiRoundTrip } from './workloads/w2-api-roundtrip.js';
import { manyContainers } from './workloads/w3-many-containers.js';
import { memoryIdle } from './workloads/w4-memory-idle.js';
import { coldPull } from './workloads/w5-cold-pull.js';
import { logs } from './workloads/w6-logs.js';
import { commit } from './workloads/w7-commit.js';
import { ping } from './workloads/w8-ping.js';
import { crunFloor } from './workloads/w9-crun-floor.js';
import { volumeRun } from './workloads/w10-volume-run.js';
import { build } from './workloads/w11-build.js';
import { push } from './workloads/w12-push.js';
import { saveLoad } from './workloads/w13-save-load.js';
import { cp } from './workloads/w14-cp.js';
import { composeUpDown } from './workloads/w15-compose.js';
import { listUnderLoad } from './workloads/w16-list-under-load.js';
import { swarmCluster } from './workloads/w17-swarm-cluster.js';

/**
 * The benchmark suite: one local registry, berthd plus (when installed) dockerd and podman on temp
 * sockets, every workload taking turns between them, then a table on stdout and the raw figures as
 * JSON. Progress goes to stderr. A workload that fails on an engine is marked Errored; the run goes on.
 */

// Memory is taken at rest first; the many-containers workload, which leaves the most behind, runs last.
const WORKLOADS: Workload[] = [memoryIdle, ping, apiRoundTrip, runRm, crunFloor, coldPull, commit, logs, manyContainers, volumeRun, build, push, saveLoad, cp, composeUpDown, listUnderLoad, swarmCluster];

const log = (msg: string) => process.stderr.write(`${msg}\n`);

async function firstLine(cmd: string, args: string[]): Promise<string> {
  try {
    const r = await runCommand(cmd, args, { timeoutMs: 10_000 });
    return (r.stdout || r.stderr).trim().split('\n')[0] ?? '';
  } catch {
    return 'not found';
  }
}

async function machineInfo(): Promise<Record<string, string>> {
  const cpu = cpus();
  const os = existsSync('/etc/debian_version') ? `Debian ${readFileSync('/etc/debian_version', 'utf8').trim()}` : 'unknown';
  return {
    date: new Date().toISOString(),
    kernel: await firstLine('uname', ['-r']),
    os,
    cpu: `${cpu.length} × ${cpu[0]?.model ?? '?'}`,
    memory: `${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
    // Other work on the machine skews every figure; the load average at the start tells how much there was.
    loadAtStart: loadavg().map((l) => l.toFixed(2)).join(' '),
    cgroups: detectCgroupLayout().kind,
    node: process.version,
    dockerCli: await firstLine('docker', ['--version']),
    crun: await firstLine('crun', ['--version']),
    runc: await firstLine('runc', ['--version']),
    conmon: await firstLine('conmon', ['--version']),
    registry: await firstLine('/usr/bin/docker-registry', ['--version']),
  };
}

async function prepareCgroups(): Promise<void> {
  const layout = detectCgroupLayout();
  const left = await controllersOnUnified(layout);
  if (!left.length) return;
  // crun (podman's runtime, and the floor) refuses a hybrid layout with controllers left on cgroup2.
  log(`cgroups: moving ${left.join(', ')} off cgroup2 for crun`);
  const { failed } = await fixHybridLayout(layout);
  for (const f of failed) log(`cgroups: could not mount ${f.controller}: ${f.error}`);
}

async function startEngines(opts: Options, dockerConfig: string, registry: TestRegistry, pushRegistry: TestRegistry, notes: string[]): Promise<Engine[]> {
  const engines: Engine[] = [];
  const starters: Record<EngineName, () => Promise<Engine>> = {
    berth: () => startBerth({ dockerConfig, logLevel: opts.berthLogLevel }),
    dockerd: () => startDockerd({ dockerConfig }),
    podman: () => startPodman({ dockerConfig, registryHost: registry.host, moreRegistryHosts: [pushRegistry.host] }),
  };
  // Always Berth first, then dockerd, then podman: the table's columns keep that order.
  for (const name of ENGINE_NAMES.filter((n) => opts.engines.includes(n))) {
    if (name === 'dockerd' && !existsSync(DOCKERD_BINARY)) {
      notes.push(`dockerd: not installed (${DOCKERD_BINARY}); --install installs Debian's docker.io`);
      continue;
    }
    if (name === 'podman' && !existsSync(PODMAN_BINARY)) {
      notes.push(`podman: not installed (${PODMAN_BINARY}); --install installs Debian's podman`);
      continue;
    }
    log(`starting ${name}`);
    try {
      const e = await starters[name]();
      onCleanup(`${name} engine`, () => e.stop());
      engines.push(e);
      log(`  ${name} ${e.version} on ${e.dockerHost}`);
    } catch (err) {
      const msg = `${name}: did not start: ${errorText(err)}`;
      notes.push(msg);
      log(`  ${msg}`);
    }
  }
  return engines;
}

async function prePull(engines: Engine[], ref: string): Promise<void> {
  for (const e of engines) {
    const r = await e.docker(['pull', '-q', ref], { timeoutMs: 300_000 });
    if (r.code !== 0) log(`  ${e.name}: docker pull ${ref} failed: ${r.stderr.trim().split('\n').pop()}`);
  }
}

async function main(): Promise<number> {
  let opts: Options | 'help';
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (opts === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  installSignalCleanup();
  const root = repoRoot();
  const notes: string[] = [];
  const rec = new Recorder();
  const workloads = WORKLOADS.filter((w) => !opts.only || opts.only.includes(w.id));
  for (const w of workloads) rec.define(w.metrics(opts));

  if (opts.install) {
    await installEngines(opts.engines.filter((e): e is 'dockerd' | 'podman' => e !== 'berth'), log);
  }
  await prepareCgroups();
  const machine = await machineInfo();

  const tmp = makeTempDir('bench');
  onCleanup('bench temp dir', () => removeDir(tmp));
  const dockerConfig = join(tmp, 'docker-config');
  mkdirSync(dockerConfig);
  writeFileSync(join(dockerConfig, 'config.json'), '{}\n');

  log('starting the local registry and pushing busybox and the big image');
  const registry = await startRegistry('open');
  onCleanup('registry', () => registry.stop());
  const [busybox, big] = await Promise.all([busyboxImage(), bigImage(opts.pullMB)]);
  await pushImage(registry, 'busybox', 'latest', busybox);
  await pushImage(registry, 'big', 'latest', big);
  const refs = { busybox: `${registry.host}/busybox:latest`, big: `${registry.host}/big:latest` };
  // Pushes go to a registry of their own, where no repository holds the image's blobs to mount.
  const pushRegistry = await startRegistry('open');
  onCleanup('push registry', () => pushRegistry.stop());
  const bigBytes = big.layers.reduce((n, l) => n + l.size, 0);
  notes.push(`big image: ${big.layers.length} layers, ${(bigBytes / 1e6).toFixed(1)} MB compressed`);

  const engines = await startEngines(opts, dockerConfig, registry, pushRegistry, notes);
  if (!engines.length) throw new Error('no engine started');
  log(`pulling ${refs.busybox} on every engine`);
  await prePull(engines, refs.busybox);

  const ctx: Ctx = { engines, rec, opts, refs, pushRegistry: { host: pushRegistry.host, storage: join(pushRegistry.dir, 'data') }, busyboxLayerPath: busybox.layers[0]!.path, tmp, log };
  const started = Date.now();
  for (const w of workloads) {
    log(`workload ${w.id}: ${w.name}`);
    const t0 = Date.now();
    try {
      await w.run(ctx);
    } catch (err) {
      // A workload's own failures are recorded per engine; this is a bug in the suite itself.
      log(`  workload ${w.id} stopped: ${errorText(err)}`);
      notes.push(`workload ${w.id} stopped: ${errorText(err)}`);
    }
    log(`  (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  }

  const names = engines.map((e) => e.name);
  const table = renderTable(rec, names);
  const errs = renderNotes(rec);
  machine.loadAtEnd = loadavg().map((l) => l.toFixed(2)).join(' ');
  const header = [
    `Run of ${machine.date} on ${machine.cpu}, ${machine.memory}, ${machine.os}, kernel ${machine.kernel} (cgroups ${machine.cgroups}); node ${machine.node}; client ${machine.dockerCli}; load average ${machine.loadAtStart} at the start, ${machine.loadAtEnd} at the end; ${Math.round((Date.now() - started) / 60_000)} min.`,
    ...engines.map((e) => `- ${e.name} ${e.version}: ${e.details}`),
    ...notes.map((n) => `- ${n}`),
  ].join('\n');
  process.stdout.write(`\n${header}\n\n${table}\n${errs ? `\n${errs}\n` : ''}`);

  const jsonPath = resolve(opts.json ?? join(root, 'bench', 'results', `${machine.date.replace(/[:.]/g, '-')}.json`));
  mkdirSync(dirname(jsonPath), { recursive: true });
  writeFileSync(
    jsonPath,
    `${JSON.stringify(
      {
        machine,
        options: opts,
        seconds: Math.round((Date.now() - started) / 1000),
        engines: engines.map((e) => ({ name: e.name, version: e.version, details: e.details })),
        notes,
        metrics: rec.toJSON(),
      },
      null,
      2,
    )}\n`,
  );
  log(`\nraw figures: ${jsonPath}`);
  return 0;
}

main()
  .then(
    (code) => code,
    (err: Error) => {
      log(`bench: ${err.stack ?? err.message}`);
      return 1;
    },
  )
  .then(async (code) => {
    log('stopping everything the suite started');
    await cleanupAll();
    process.exit(code);
  });
