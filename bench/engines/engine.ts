import { ApiClient } from '../lib/api-client.js';
import { engineMemory } from '../lib/memory.js';
import { runCommand, type CommandOptions, type CommandResult } from '../lib/run-command.js';
import { mapLimit, sleep } from '../lib/timing.js';

/** One engine under test, reached by the docker CLI (DOCKER_HOST) and by an in-process API client. */

export type EngineName = 'berth' | 'dockerd' | 'podman';
export const ENGINE_NAMES: readonly EngineName[] = ['berth', 'dockerd', 'podman'];

export interface Engine {
  readonly name: EngineName;
  readonly socket: string;
  readonly dockerHost: string;
  /** The engine's private temp dir: data root, exec root, socket, logs. */
  readonly dir: string;
  /** The daemon's pid (podman: the API service). */
  readonly pid: number;
  readonly api: ApiClient;
  /** Server version and what it runs containers with, for the report. */
  readonly version: string;
  readonly details: string;
  /** PSS of the daemon and its per-container monitors. */
  memory(): { bytes: number; byName: Record<string, { bytes: number; count: number }> };
  /** The docker CLI against this engine. */
  docker(args: string[], opts?: CommandOptions): Promise<CommandResult>;
  stop(): Promise<void>;
}

/** Variables that would point the docker CLI elsewhere. */
const DOCKER_ENV_TO_DROP = ['DOCKER_CONTEXT', 'DOCKER_TLS_VERIFY', 'DOCKER_CERT_PATH', 'DOCKER_TLS', 'DOCKER_API_VERSION', 'DOCKER_HOST'];

export function dockerCliEnv(dockerHost: string, dockerConfig: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of DOCKER_ENV_TO_DROP) delete env[k];
  return { ...env, DOCKER_HOST: dockerHost, DOCKER_CONFIG: dockerConfig, DOCKER_CLI_HINTS: 'false' };
}

export interface EngineParts {
  name: EngineName;
  socket: string;
  dir: string;
  pid: () => number;
  dockerConfig: string;
  details: string;
  stopDaemon: () => Promise<void>;
}

/** Builds the Engine around a started daemon: asks its version, wires the CLI and the API client. */
export async function assembleEngine(p: EngineParts): Promise<Engine> {
  const api = new ApiClient(p.socket);
  const v = (await api.expect('GET', '/version', [200], { timeoutMs: 10_000 })).json<{ Version?: string; ApiVersion?: string }>();
  const dockerHost = `unix://${p.socket}`;
  const env = dockerCliEnv(dockerHost, p.dockerConfig);
  let stopped = false;
  return {
    name: p.name,
    socket: p.socket,
    dockerHost,
    dir: p.dir,
    get pid() {
      return p.pid();
    },
    api,
    version: `${v.Version ?? '?'} (API ${v.ApiVersion ?? '?'})`,
    details: p.details,
    memory: () => engineMemory(p.dir, [p.pid()]),
    docker: (args, opts = {}) => runCommand('docker', args, { ...opts, env: { ...env, ...(opts.env ?? {}) } }),
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        await removeAllContainers({ api } as Engine, 120_000);
      } catch (err) {
        process.stderr.write(`bench: ${p.name}: removing containers before stop: ${(err as Error).message}\n`);
      }
      api.close();
      await p.stopDaemon();
    },
  };
}

/** Waits until GET /_ping answers 200 on the socket (or the process exits, or time runs out). */
export async function waitForPing(socket: string, timeoutMs: number, exited: () => boolean, describe: () => string): Promise<void> {
  const api = new ApiClient(socket);
  const deadline = Date.now() + timeoutMs;
  let last = '';
  try {
    while (Date.now() < deadline) {
      if (exited()) throw new Error(`exited during start-up\n${describe()}`);
      try {
        const r = await api.request('GET', '/_ping', { timeoutMs: 2000 });
        if (r.status === 200) return;
        last = `/_ping answered ${r.status}`;
      } catch (err) {
        last = (err as Error).message;
      }
      await sleep(100);
    }
    throw new Error(`no answer to /_ping within ${timeoutMs / 1000} s (${last})\n${describe()}`);
  } finally {
    api.close();
  }
}

/** Force-removes every container of the engine (the engines are private to the run). */
export async function removeAllContainers(engine: Pick<Engine, 'api'>, timeoutMs = 600_000, concurrency = 4): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  const list = (await engine.api.expect('GET', '/containers/json?all=1', [200], { timeoutMs: 60_000 })).json<Array<{ Id: string }>>();
  await mapLimit(list, concurrency, async (c) => {
    if (Date.now() > deadline) throw new Error(`removing ${list.length} containers took over ${timeoutMs / 1000} s`);
    await engine.api.expect('DELETE', `/containers/${c.Id}?force=1&v=1`, [200, 204, 404], { timeoutMs: 60_000 });
  });
  return list.length;
}
