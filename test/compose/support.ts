/**
 * Compose v2 (the `docker compose` CLI plugin, built by scripts/install-compose.sh) and v1 (Debian's
 * docker-compose 1.29) against a test daemon: projects written to a temp dir, the client run with the
 * daemon's DOCKER_HOST and DOCKER_CONFIG, the engine's state read back through the API.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { run } from '../harness/child-process.js';
import type { TestDaemon } from '../harness/daemon.js';

const INSTALL = fileURLToPath(new URL('../../../scripts/install-compose.sh', import.meta.url));

let pluginPath: string | undefined;
/** The compose v2 binary: built once per machine and cached (a no-op after the first run). */
export function composePlugin(): string {
  pluginPath ??= execFileSync('bash', [INSTALL], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 1_800_000 }).trim();
  return pluginPath;
}

/** Links the compose v2 binary into the daemon's DOCKER_CONFIG/cli-plugins (`docker compose`). */
export function installComposePlugin(d: TestDaemon): void {
  const plugins = join(d.dockerConfig, 'cli-plugins');
  mkdirSync(plugins, { recursive: true });
  if (!existsSync(join(plugins, 'docker-compose'))) symlinkSync(composePlugin(), join(plugins, 'docker-compose'));
}

export type ComposeVersion = 'v1' | 'v2';

export interface Compose {
  readonly version: ComposeVersion;
  readonly project: string;
  readonly dir: string;
  readonly file: string;
  /** Runs the client on this project; throws with its output on a non-zero exit unless `allowFail`. */
  run(args: string[], o?: { allowFail?: boolean; timeoutMs?: number; env?: Record<string, string> }): Promise<{ code: number; stdout: string; stderr: string }>;
  /** A long-running client command (logs -f, events): its output so far, and a stop by pid. */
  spawn(args: string[]): { child: ChildProcess; output: () => string; stop: () => Promise<void> };
  /** The container name compose gives replica `n` of a service. */
  container(service: string, n?: number): string;
  /** The ids of a service's containers, from the engine, by compose's labels. */
  ids(service: string, all?: boolean): Promise<string[]>;
}

/** Writes `spec` (JSON is YAML, so both clients read it) as the project's compose file. */
export function composeProject(d: TestDaemon, version: ComposeVersion, project: string, spec: unknown, o: { negotiateApi?: boolean } = {}): Compose {
  const dir = join(d.dir, 'projects', project);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'compose.json');
  writeFileSync(file, JSON.stringify(spec, null, 2));
  if (version === 'v2') installComposePlugin(d);
  const env = (): NodeJS.ProcessEnv => {
    const e: NodeJS.ProcessEnv = { ...process.env, DOCKER_HOST: d.dockerHost, DOCKER_CONFIG: d.dockerConfig, DOCKER_CLI_HINTS: 'false', COMPOSE_ANSI: 'never', COMPOSE_STATUS_STDOUT: '0' };
    // Compose 1.29 negotiates the newest API version and then reads fields that dockerd (and Berth)
    // leave out from 1.45 (image ContainerConfig) and 1.52 (events' id/status/from) on: it fails
    // against any current engine. Pinned to Debian's dockerd 20.10 version, as compose 1.29 sees there.
    // `negotiateApi` leaves compose 1.29 as a new user runs it.
    if (version === 'v1' && !o.negotiateApi) e.COMPOSE_API_VERSION = '1.41';
    for (const k of ['DOCKER_CONTEXT', 'DOCKER_TLS_VERIFY', 'DOCKER_CERT_PATH', 'DOCKER_API_VERSION', 'COMPOSE_PROJECT_NAME', 'COMPOSE_FILE', 'COMPOSE_PROFILES']) delete e[k];
    return e;
  };
  const argv = (args: string[]) =>
    version === 'v2'
      ? { cmd: 'docker', args: ['compose', '--progress', 'plain', '-f', file, '-p', project, '--project-directory', dir, ...args] }
      : { cmd: 'docker-compose', args: ['--no-ansi', '-f', file, '-p', project, '--project-directory', dir, ...args] };
  return {
    version,
    project,
    dir,
    file,
    async run(args, o = {}) {
      const { cmd, args: full } = argv(args);
      const r = await run(cmd, full, { env: { ...env(), ...(o.env ?? {}) }, timeoutMs: o.timeoutMs ?? 180_000 });
      if (!o.allowFail) assert.equal(r.code, 0, `${cmd} ${full.join(' ')}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
      return r;
    },
    spawn(args) {
      const { cmd, args: full } = argv(args);
      const child = spawn(cmd, full, { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout!.on('data', (b: Buffer) => (out += b.toString('utf8')));
      child.stderr!.on('data', (b: Buffer) => (out += b.toString('utf8')));
      const exited = new Promise<void>((r) => child.once('close', () => r()));
      return {
        child,
        output: () => out,
        async stop() {
          if (child.exitCode === null && child.signalCode === null && child.pid) process.kill(child.pid, 'SIGINT');
          const t = setTimeout(() => child.pid && child.exitCode === null && process.kill(child.pid, 'SIGKILL'), 10_000);
          await exited;
          clearTimeout(t);
        },
      };
    },
    container: (service, n = 1) => (version === 'v2' ? `${project}-${service}-${n}` : `${project}_${service}_${n}`),
    async ids(service, all = true) {
      const filters = JSON.stringify({ label: [`com.docker.compose.project=${project}`, `com.docker.compose.service=${service}`] });
      const r = await d.request('GET', `/containers/json?all=${all ? 1 : 0}&filters=${encodeURIComponent(filters)}`);
      assert.equal(r.status, 200, r.text());
      return (r.json() as { Id: string }[]).map((c) => c.Id).sort();
    },
  };
}

export async function inspectContainer(d: TestDaemon, name: string): Promise<any> {
  const r = await d.request('GET', `/containers/${encodeURIComponent(name)}/json`);
  assert.equal(r.status, 200, `inspect ${name}: ${r.text()}`);
  return r.json();
}

/** Polls `check` (bounded) until it returns a value that is not undefined. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, tries = 100, everyMs = 200): Promise<T> {
  let last: unknown;
  for (let i = 0; i < tries; i++) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`${what}: not reached after ${tries} tries${last ? `: ${String(last)}` : ''}`);
}

/** GET over HTTP on 127.0.0.1 (published ports), retried while nothing answers yet. */
export async function httpGet(port: number, path = '/'): Promise<string> {
  return eventually(`http://127.0.0.1:${port}${path}`, async () => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return res.ok ? await res.text() : undefined;
  }, 50, 200);
}
