#!/usr/bin/env node
/**
 * The harness for test suites in other languages (Go, Python):
 *
 *   node dist/test/harness/cli.js up --out env.json [options]   starts everything, writes env.json, returns
 *   node dist/test/harness/cli.js down --env env.json            stops everything and removes env.json
 *
 * `up` starts seeded registries (open, basic, token), a Docker Hub mirror holding library/busybox, and
 * berthd (pulling docker.io through that mirror). The resources live in a background supervisor
 * process; `up` returns once env.json is written. With --foreground the supervisor is this process and
 * it runs until SIGINT/SIGTERM. Options:
 *   --registries open,basic,token   which registries (default all)
 *   --no-daemon                     registries only
 *   --no-hub-mirror                 no mirror (and no --registry-mirror for berthd)
 *   --hostile                       also push the hostile images (repo "hostile") to the open registry
 *   --daemon-arg ARG                extra berthd argument (repeatable)
 *   --timeout SECONDS               how long `up` waits for readiness (default 90)
 *   --ttl SECONDS                   the supervisor tears down by itself after this long (default 7200),
 *                                   so a suite that dies without `down` leaves nothing running for long
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { isRunning, signal, tailFile } from './child-process.js';
import { handleSignalsManually, runExitCleanupNow } from './exit-cleanup.js';
import { startDaemon, type TestDaemon } from './daemon.js';
import { startRegistry, type RegistryKind, type TestRegistry } from './registry.js';
import { seedHostile, seedHubMirror, seedRegistry } from '../fixtures/seed-registry.js';

const USAGE = 'usage: cli.js up --out FILE [--foreground] [--ttl SECONDS] [--registries open,basic,token] [--no-daemon] [--no-hub-mirror] [--hostile] [--daemon-arg ARG]... | cli.js down --env FILE';

interface RegistryEntry {
  kind: RegistryKind;
  host: string;
  url: string;
  username?: string;
  password?: string;
  tokenServerUrl?: string;
  /** Manifest digests of the seeded images (busybox, layered, multiarch, zstd). */
  digests: Record<string, string>;
  multiarchChildren: Record<string, string>;
  refs: Record<string, string>;
  logDir: string;
}

export interface HarnessEnv {
  /** The supervisor process that owns everything; `down` signals it. */
  pid: number;
  dockerHost?: string;
  socket?: string;
  dataRoot?: string;
  execRoot?: string;
  daemonPid?: number;
  daemonLog?: string;
  registries: Partial<Record<RegistryKind, RegistryEntry>>;
  hubMirror?: string;
  hostile?: Array<{ tag: string; ref: string; digest: string; marker: string; hostPath?: string; description: string }>;
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      out: { type: 'string' },
      env: { type: 'string' },
      foreground: { type: 'boolean', default: false },
      registries: { type: 'string', default: 'open,basic,token' },
      'no-daemon': { type: 'boolean', default: false },
      'no-hub-mirror': { type: 'boolean', default: false },
      hostile: { type: 'boolean', default: false },
      'daemon-arg': { type: 'string', multiple: true, default: [] },
      timeout: { type: 'string', default: '90' },
      ttl: { type: 'string', default: '7200' },
    },
  });
}

/** Writes through a temp name so a reader polling for the file never sees half of it. */
function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

async function foreground(values: ReturnType<typeof parse>['values']): Promise<void> {
  handleSignalsManually();
  const out = resolve(values.out!);
  const kinds = values.registries!.split(',').map((s) => s.trim()).filter(Boolean) as RegistryKind[];
  for (const k of kinds) if (!['open', 'basic', 'token'].includes(k)) throw new Error(`unknown registry kind ${k}`);
  const registries: TestRegistry[] = [];
  let daemon: TestDaemon | undefined;
  let stopping = false;

  const teardown = async () => {
    await daemon?.teardown().catch((err: Error) => process.stderr.write(`daemon teardown: ${err.message}\n`));
    for (const r of registries) await r.stop().catch((err: Error) => process.stderr.write(`registry stop: ${err.message}\n`));
    runExitCleanupNow();
    rmSync(out, { force: true });
  };
  const onSignal = (sig: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`harness: ${sig}, tearing down\n`);
    teardown().finally(() => process.exit(0));
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));

  try {
    const env: HarnessEnv = { pid: process.pid, registries: {} };
    const started = await Promise.all(kinds.map((k) => startRegistry(k)));
    registries.push(...started);
    for (const reg of started) {
      const seeded = await seedRegistry(reg);
      env.registries[reg.kind] = {
        kind: reg.kind,
        host: reg.host,
        url: reg.url,
        username: reg.username,
        password: reg.password,
        tokenServerUrl: reg.tokenServerUrl,
        digests: seeded.digests,
        multiarchChildren: seeded.multiarchChildren,
        refs: seeded.refs,
        logDir: reg.dir,
      };
    }
    if (values.hostile) {
      const open = started.find((r) => r.kind === 'open');
      if (!open) throw new Error('--hostile needs the open registry');
      env.hostile = (await seedHostile(open)).map((h) => ({
        tag: h.case.tag,
        ref: h.ref,
        digest: h.digest,
        marker: h.case.marker,
        hostPath: h.case.hostPath,
        description: h.case.description,
      }));
    }
    const daemonArgs = [...values['daemon-arg']!];
    if (!values['no-hub-mirror']) {
      const mirror = await startRegistry('open');
      registries.push(mirror);
      await seedHubMirror(mirror);
      env.hubMirror = mirror.url;
      daemonArgs.push('--registry-mirror', mirror.url);
    }
    if (!values['no-daemon']) {
      daemon = await startDaemon({ args: daemonArgs });
      Object.assign(env, {
        dockerHost: daemon.dockerHost,
        socket: daemon.socket,
        dataRoot: daemon.dataRoot,
        execRoot: daemon.execRoot,
        daemonPid: daemon.pid,
        daemonLog: daemon.logFile,
      });
    }
    if (stopping) return;
    writeAtomic(out, `${JSON.stringify(env, null, 2)}\n`);
    process.stdout.write(`harness ready: ${out}\n`);
  } catch (err) {
    process.stderr.write(`harness: ${(err as Error).stack ?? String(err)}\n`);
    stopping = true;
    await teardown();
    process.exit(1);
  }
  // Stay alive (the token server lives in this process) until a signal arrives or the ttl runs out.
  const ttlMs = Number(values.ttl) * 1000;
  if (Number.isFinite(ttlMs) && ttlMs > 0) setTimeout(() => onSignal('ttl expired'), Math.min(ttlMs, 2 ** 31 - 1));
  setInterval(() => undefined, 1 << 30);
}

async function up(argv: string[], values: ReturnType<typeof parse>['values']): Promise<number> {
  if (!values.out) throw new Error(USAGE);
  const out = resolve(values.out);
  rmSync(out, { force: true });
  const logPath = `${out}.log`;
  const fd = openSync(logPath, 'w');
  const self = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, [self, ...argv, '--foreground'], { detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  child.unref();
  let exitCode: number | null = null;
  child.once('exit', (code) => (exitCode = code ?? 1));
  const deadline = Date.now() + Number(values.timeout) * 1000;
  while (Date.now() < deadline) {
    if (existsSync(out)) {
      process.stdout.write(`${out}\n`);
      return 0;
    }
    if (exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  if (exitCode === null && child.pid) {
    // Not ready in time: have the supervisor clean up after itself.
    signal(child.pid, 'SIGTERM');
    await waitExit(child.pid, 60_000);
  }
  process.stderr.write(`harness did not come up (log ${logPath}):\n${tailFile(logPath, 80)}\n`);
  return 1;
}

async function waitExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isRunning(pid)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

async function down(values: ReturnType<typeof parse>['values']): Promise<number> {
  if (!values.env) throw new Error(USAGE);
  const path = resolve(values.env);
  if (!existsSync(path)) {
    process.stderr.write(`${path} does not exist; nothing to stop\n`);
    return 0;
  }
  const env = JSON.parse(readFileSync(path, 'utf8')) as HarnessEnv;
  const cmdline = (() => {
    try {
      return readFileSync(`/proc/${env.pid}/cmdline`, 'utf8');
    } catch {
      return '';
    }
  })();
  // Only signal the pid if it is still our supervisor (pids get reused).
  if (cmdline.includes('cli.js') && cmdline.includes('--foreground')) {
    signal(env.pid, 'SIGTERM');
    if (!(await waitExit(env.pid, 90_000))) {
      process.stderr.write(`supervisor ${env.pid} did not stop in 90 s; killing it\n`);
      signal(env.pid, 'SIGKILL');
      return 1;
    }
  }
  rmSync(path, { force: true });
  rmSync(`${path}.log`, { force: true });
  return 0;
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  const { values, positionals } = parse(argv);
  const command = positionals[0];
  if (command === 'up') {
    if (values.foreground) {
      await foreground(values);
      return -1;
    }
    return up(argv, values);
  }
  if (command === 'down') return down(values);
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

main().then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`${(err as Error).message ?? String(err)}\n`);
    process.exitCode = 2;
  },
);
