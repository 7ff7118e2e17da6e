/**
 * Helpers for the interactive tests: the docker CLI with binary stdio, a real terminal (tmux on a
 * private server socket, so tests never touch anyone else's sessions), and raw hijacked streams.
 */
import { spawn, execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { Socket } from 'node:net';
import { promisify } from 'node:util';
import type { TestDaemon } from '../harness/index.js';

const execFileP = promisify(execFile);

export function dockerEnv(daemon: TestDaemon): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, DOCKER_HOST: daemon.dockerHost, DOCKER_CONFIG: daemon.dockerConfig, DOCKER_CLI_HINTS: 'false' };
  for (const k of ['DOCKER_CONTEXT', 'DOCKER_TLS_VERIFY', 'DOCKER_CERT_PATH', 'DOCKER_API_VERSION']) delete env[k];
  return env;
}

/** Runs the CLI with a file as stdin; hashes stdout instead of holding it. */
export function dockerPipe(daemon: TestDaemon, args: string[], inputFile: string, timeoutMs = 180_000): Promise<{ code: number; sha256: string; bytes: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', args, { env: dockerEnv(daemon), stdio: ['pipe', 'pipe', 'pipe'] });
    const hash = createHash('sha256');
    let bytes = 0;
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => {
      hash.update(b);
      bytes += b.length;
    });
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.stdin.on('error', () => undefined);
    createReadStream(inputFile).pipe(child.stdin);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 128, sha256: hash.digest('hex'), bytes, stderr });
    });
  });
}

/** A terminal of a given size running one command, driven like a person would (tmux). */
export class Terminal {
  readonly server = `berth-test-${randomBytes(4).toString('hex')}`;

  static async open(command: string, env: NodeJS.ProcessEnv, cols = 200, rows = 50): Promise<Terminal> {
    const t = new Terminal();
    // The shell after the command keeps the pane (and its last screen) around for reading.
    const wrapped = `${command}; echo "[exit $?]"; sleep 600`;
    await t.#tmux(['new-session', '-d', '-s', 'main', '-x', String(cols), '-y', String(rows), wrapped], env);
    return t;
  }

  #tmux(args: string[], env?: NodeJS.ProcessEnv): Promise<{ stdout: string }> {
    return execFileP('tmux', ['-L', this.server, '-f', '/dev/null', ...args], { env: env ?? process.env });
  }

  async type(text: string): Promise<void> {
    await this.#tmux(['send-keys', '-t', 'main', '-l', text]);
  }

  /** tmux key names: Enter, C-p, C-d... */
  async keys(...names: string[]): Promise<void> {
    await this.#tmux(['send-keys', '-t', 'main', ...names]);
  }

  async resize(cols: number, rows: number): Promise<void> {
    await this.#tmux(['resize-window', '-t', 'main', '-x', String(cols), '-y', String(rows)]);
  }

  async screen(): Promise<string> {
    return (await this.#tmux(['capture-pane', '-p', '-t', 'main'])).stdout;
  }

  /** Waits until the screen matches. */
  async waitFor(re: RegExp, timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      last = await this.screen();
      if (re.test(last)) return last;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`terminal never showed ${re}; screen:\n${last}`);
  }

  /** Ends this tmux server (and the processes in its panes): by its own socket, never by name. */
  async close(): Promise<void> {
    await this.#tmux(['kill-server']).catch(() => undefined);
  }
}

/** A docker-CLI-style multiplexed stream, parsed as it arrives. */
export function demux(buf: Buffer): { stdout: Buffer; stderr: Buffer; system: Buffer; rest: Buffer } {
  const out = { stdout: [] as Buffer[], stderr: [] as Buffer[], system: [] as Buffer[] };
  let pos = 0;
  while (buf.length - pos >= 8) {
    const type = buf[pos]!;
    const len = buf.readUInt32BE(pos + 4);
    if (buf.length - pos - 8 < len) break;
    const payload = buf.subarray(pos + 8, pos + 8 + len);
    (type === 2 ? out.stderr : type === 3 ? out.system : out.stdout).push(payload);
    pos += 8 + len;
  }
  return { stdout: Buffer.concat(out.stdout), stderr: Buffer.concat(out.stderr), system: Buffer.concat(out.system), rest: buf.subarray(pos) };
}

/** Everything the socket sends until the server closes it (or the timeout). */
export function readToEnd(socket: Socket, head: Buffer = Buffer.alloc(0), timeoutMs = 30_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [head];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`stream did not end within ${timeoutMs} ms; got ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 500))}`));
    }, timeoutMs);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.once('end', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
