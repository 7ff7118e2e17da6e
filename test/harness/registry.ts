import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { killProcess, run, signal, spawnLogged, stopProcess, tailFile, type LoggedProcess } from './child-process.js';
import { onExitCleanup } from './exit-cleanup.js';
import { freePort } from './free-port.js';
import { httpRequest } from './http-client.js';
import { makeTempDir, removeDir, removeDirSync } from './temp-dir.js';
import { startTokenServer, type TokenServer } from './token-server.js';

/**
 * Starts Debian's docker-registry (distribution 2.8) on 127.0.0.1 with its storage in a temp dir:
 * open, with htpasswd Basic auth, or with token auth backed by our own token server.
 */

export type RegistryKind = 'open' | 'basic' | 'token';

export interface TestRegistry {
  readonly kind: RegistryKind;
  /** "127.0.0.1:PORT", the name a client puts in front of a repository. */
  readonly host: string;
  /** "http://127.0.0.1:PORT" */
  readonly url: string;
  readonly username?: string;
  readonly password?: string;
  /** The Bearer realm, for token registries. */
  readonly tokenServerUrl?: string;
  /** The token server itself (requests it answered, direct token issue), for token registries. */
  readonly tokenServer?: TokenServer;
  readonly pid: number;
  readonly dir: string;
  /** The registry's own log so far. */
  logs(): string;
  stop(): Promise<void>;
}

export interface RegistryOptions {
  username?: string;
  password?: string;
  /** Token registries only: let anonymous clients pull (by default they get no access at all). */
  anonymousPull?: boolean;
}

export const REGISTRY_BINARY = process.env.BERTH_TEST_REGISTRY_BIN ?? '/usr/bin/docker-registry';
const START_TIMEOUT_MS = 10_000;

export async function startRegistry(kind: RegistryKind, opts: RegistryOptions = {}): Promise<TestRegistry> {
  const dir = makeTempDir(`registry-${kind}`);
  let tokenServer: TokenServer | undefined;
  let proc: LoggedProcess | undefined;
  // Until startup succeeds, the exit hook owns the cleanup.
  const unregister = onExitCleanup(() => {
    if (proc && !proc.hasExited()) signal(proc.pid, 'SIGKILL');
    removeDirSync(dir);
  });
  try {
    const username = kind === 'open' ? undefined : (opts.username ?? 'berth-tester');
    const password = kind === 'open' ? undefined : (opts.password ?? randomBytes(12).toString('hex'));
    const auth: Record<string, unknown> = {};
    if (kind === 'basic') {
      const htpasswdPath = join(dir, 'htpasswd');
      const h = await run('htpasswd', ['-Bbn', username!, password!], { timeoutMs: 15000 });
      if (h.code !== 0) throw new Error(`htpasswd failed: ${h.stderr}`);
      writeFileSync(htpasswdPath, h.stdout);
      auth.htpasswd = { realm: 'berth-test-registry', path: htpasswdPath };
    } else if (kind === 'token') {
      tokenServer = await startTokenServer({
        dir,
        username: username!,
        password: password!,
        service: 'berth-test-registry',
        issuer: 'berth-test-token-issuer',
        anonymousPull: opts.anonymousPull,
      });
      auth.token = {
        realm: tokenServer.url,
        service: tokenServer.service,
        issuer: tokenServer.issuer,
        rootcertbundle: tokenServer.certPath,
      };
    }

    const logFile = join(dir, 'registry.log');
    mkdirSync(join(dir, 'data'));
    let port = 0;
    for (let attempt = 0; ; attempt++) {
      port = await freePort();
      // JSON is valid YAML, so the config needs no YAML writer.
      const config = {
        version: 0.1,
        log: { level: 'info', formatter: 'text', accesslog: { disabled: false } },
        storage: {
          filesystem: { rootdirectory: join(dir, 'data') },
          delete: { enabled: true },
          maintenance: { uploadpurging: { enabled: false } },
        },
        http: { addr: `127.0.0.1:${port}`, secret: randomBytes(16).toString('hex') },
        health: { storagedriver: { enabled: false } },
        ...(Object.keys(auth).length ? { auth } : {}),
      };
      const configPath = join(dir, 'config.yml');
      writeFileSync(configPath, JSON.stringify(config, null, 2));
      // REGISTRY_* variables override the config file; a stray one from the caller must not leak in.
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('REGISTRY_')));
      const startedAt = readLog(logFile).length;
      proc = spawnLogged(REGISTRY_BINARY, ['serve', configPath], { logFile, env });
      const outcome = await waitForRegistry(proc, `http://127.0.0.1:${port}`, port, logFile, startedAt);
      if (outcome === 'ready') break;
      if (outcome === 'port-taken' && attempt < 4) continue;
      throw new Error(`docker-registry (${kind}) did not start: ${outcome}\n--- registry log ---\n${tailFile(logFile)}`);
    }

    const started = proc;
    let stopped = false;
    unregister();
    const unregisterRunning = onExitCleanup(() => {
      if (!started.hasExited()) signal(started.pid, 'SIGKILL');
      removeDirSync(dir);
    });
    return {
      kind,
      host: `127.0.0.1:${port}`,
      url: `http://127.0.0.1:${port}`,
      username,
      password,
      tokenServerUrl: tokenServer?.url,
      tokenServer,
      pid: started.pid,
      dir,
      logs: () => readLog(logFile),
      async stop() {
        if (stopped) return;
        stopped = true;
        await stopProcess(started, 5000);
        await tokenServer?.stop();
        await removeDir(dir);
        unregisterRunning();
      },
    };
  } catch (err) {
    if (proc) await killProcess(proc);
    await tokenServer?.stop();
    await removeDir(dir);
    unregister();
    throw err;
  }
}

function readLog(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/**
 * Ready means our process logged that it listens on our port and /v2/ answers; checking the log as
 * well keeps us from mistaking another process that grabbed the port for our registry.
 */
async function waitForRegistry(
  proc: LoggedProcess,
  url: string,
  port: number,
  logFile: string,
  logOffset: number,
): Promise<'ready' | 'port-taken' | string> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const log = readLog(logFile).slice(logOffset);
    if (proc.hasExited()) {
      if (/address already in use/i.test(log)) return 'port-taken';
      return `exited with ${await proc.exited}`;
    }
    if (log.includes(`listening on 127.0.0.1:${port}`)) {
      try {
        const res = await httpRequest({ url: `${url}/v2/` }, { timeoutMs: 2000 });
        if (res.status === 200 || res.status === 401) return 'ready';
      } catch {
        // not accepting connections yet
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await killProcess(proc);
  return `no answer on ${url}/v2/ within ${START_TIMEOUT_MS} ms`;
}
