/**
 * Running an extra process in a container through `conmon --exec` (which runs `<runtime> exec
 * --process <process.json> --detach <id>`).
 *
 * Each exec gets its own directory, <execs>/<container id>/<exec id>/, used as conmon's bundle and
 * exit dir: process.json, pid, the exit file (named after the *container* id: conmon names exit
 * files by -c), and for a tty: attach socket, ctl/winsz FIFOs and the k8s-file log.
 * A separate directory matters: conmon puts its attach socket and FIFOs in the bundle dir and its
 * exit file in the exit dir, which would clash with the container's own.
 *
 * Without a tty: `-l passthrough --sync`. The process inherits conmon's stdio, which are pipes to
 * berthd: stdout and stderr are plain streams, stdin (optional) a writable. --sync keeps conmon
 * as our direct child for the life of the exec (Node closes a child's stdin when that child exits,
 * so a daemonizing conmon would cut stdin off). The exit code arrives as the second sync message.
 *
 * With a tty: `--exec-attach -t -l k8s-file:<dir>/log`. conmon owns the pty; I/O goes through its
 * attach socket (see README.md "Attach socket") and the output is also logged to <dir>/log.
 * Sequence: we write a byte to the start pipe, conmon makes the socket and says {"data":0} on the
 * attach pipe, the caller connects (onAttachReady), we write a second start byte, the process runs.
 *
 * Runtime failures (no such binary, permission denied) give exit code 127 / 126 like dockerd, with
 * the runtime's message on stderr (non-tty) or in `error`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { conmonEnv, SyncPipeReader, type SyncMessage } from './conmon-sync.js';
import { ALL_CAPABILITIES } from './build-spec.js';
import type { OciProcess, OciSpec } from './oci-spec.js';
import type { HardLimits } from './rlimits.js';
import { clampRlimits } from './rlimits.js';
import { clampCapabilities } from './capabilities.js';
import type { RuntimeBinary } from './runtime-cli.js';
import type { ExecShell } from './exec-by-shell.js';
import { cleanMessage } from './runtime-cli.js';

export interface ExecProcess {
  args: string[];
  /** Variables for this exec; they override the container's own (config.json) by key. */
  env: string[];
  cwd?: string;
  user?: { uid: number; gid: number; additionalGids?: number[] };
  terminal: boolean;
  consoleSize?: { height: number; width: number };
}

export interface ExecOptions {
  /** Unique, path-safe id of the exec session. */
  execId: string;
  process: ExecProcess;
  privileged?: boolean;
  stdin: boolean;
  /** Non-tty: send the output nowhere (Docker's detached exec); unread pipes would block the process. */
  discardOutput?: boolean;
  /**
   * Non-tty without stdin: stdout and stderr may come as one stream (`stdout`; a healthcheck's
   * output), which lets the exec start from a long-lived shell (exec-by-shell.ts), not a fork of berthd.
   */
  combinedOutput?: boolean;
  /**
   * tty only: called once conmon's attach socket exists, with its path; the process starts
   * after it resolves, so a client that connects here misses no output.
   */
  onAttachReady?: (attachSocketPath: string) => Promise<void> | void;
}

export interface ExecResult {
  exitCode: number;
  /** The runtime's message when it could not start the process. */
  error?: string;
}

export interface ExecSession {
  execId: string;
  /** Host pid of the process; 0 when the runtime could not start it. */
  pid: number;
  /** Non-tty with stdin: write to it, end() to close the process's stdin. */
  stdin?: Writable;
  /** Non-tty: the process's stdout and stderr. They end when every holder of the pipes has closed them. */
  stdout?: Readable;
  stderr?: Readable;
  /** tty: conmon's attach socket for this exec (SOCK_SEQPACKET). */
  attachSocketPath?: string;
  /** tty: the output as a k8s-file log. */
  logPath?: string;
  /** Resolves when the process has exited. */
  exit: Promise<ExecResult>;
  /** Removes the exec's directory (done automatically after exit without a tty). */
  dispose(): Promise<void>;
}

export interface ExecContext {
  conmonPath: string;
  runtime: RuntimeBinary;
  containerId: string;
  /** The container's bundle, for the process defaults (capabilities, rlimits...). */
  bundleDir: string;
  execDir: string;
  socketsDir: string;
  hardLimits: HardLimits;
  capabilities: ReadonlySet<string>;
  /** Starts `combinedOutput` execs without forking berthd, where it can. */
  shell?: ExecShell;
}

/** The exec's process.json: the container's process settings with the exec's overrides. */
export function execProcessSpec(base: OciProcess, p: ExecProcess, privileged: boolean, hard: HardLimits): OciProcess {
  const caps = privileged ? [...ALL_CAPABILITIES] : base.capabilities?.bounding ?? [];
  const out: OciProcess = {
    terminal: p.terminal,
    user: p.user ? { ...p.user } : { ...base.user },
    args: [...p.args],
    env: mergeEnv(base.env, p.env),
    cwd: p.cwd || base.cwd || '/',
    capabilities: { bounding: caps, effective: caps, permitted: caps, inheritable: [], ambient: [] },
    noNewPrivileges: base.noNewPrivileges ?? false,
  };
  if (p.terminal && p.consoleSize) out.consoleSize = { ...p.consoleSize };
  if (base.rlimits) out.rlimits = clampRlimits(base.rlimits, hard);
  if (base.apparmorProfile) out.apparmorProfile = base.apparmorProfile;
  if (base.selinuxLabel) out.selinuxLabel = base.selinuxLabel;
  return out;
}

/** `over` wins by key; order: base's keys first, then new ones. */
export function mergeEnv(base: readonly string[], over: readonly string[]): string[] {
  const keyOf = (e: string) => (e.includes('=') ? e.slice(0, e.indexOf('=')) : e);
  const merged = new Map<string, string>();
  for (const e of [...base, ...over]) merged.set(keyOf(e), e);
  return [...merged.values()];
}

/** Exit code dockerd reports when an exec cannot start: 127 not found, 126 otherwise. */
export function failedExecExitCode(message: string): number {
  return /not found|no such file/i.test(message) ? 127 : 126;
}

export async function startExec(ctx: ExecContext, opts: ExecOptions): Promise<ExecSession> {
  const config = JSON.parse(await readFile(join(ctx.bundleDir, 'config.json'), 'utf8')) as OciSpec;
  const proc = execProcessSpec(config.process, opts.process, opts.privileged ?? false, ctx.hardLimits);
  proc.capabilities = clampCapabilities(proc.capabilities, ctx.capabilities);
  await rm(ctx.execDir, { recursive: true, force: true });
  await mkdir(ctx.execDir, { recursive: true });
  const processPath = join(ctx.execDir, 'process.json');
  await writeFile(processPath, JSON.stringify(proc));

  const dispose = () => rm(ctx.execDir, { recursive: true, force: true }).then(() => rm(join(ctx.socketsDir, opts.execId), { force: true }));
  const args = [
    '--api-version', '1',
    '-e', '--exec-process-spec', processPath,
    '-c', ctx.containerId, '-u', opts.execId, '-n', ctx.containerId,
    '-r', ctx.runtime.path, '--runtime-arg', '--root', '--runtime-arg', ctx.runtime.root,
    '-b', ctx.execDir, '-p', join(ctx.execDir, 'pid'), '--exit-dir', ctx.execDir,
    '--socket-dir-path', ctx.socketsDir, '--sync',
  ];
  if (opts.stdin) args.push('-i');
  try {
    if (ctx.shell && opts.combinedOutput && !opts.stdin && !opts.process.terminal && !opts.discardOutput) {
      const session = await ctx.shell.start(opts.execId, ctx.conmonPath, args, ctx.execDir, dispose);
      if (session) return session;
    }
    return opts.process.terminal ? await startTtyExec(ctx, opts, args, dispose) : await startPipedExec(ctx, opts, args, dispose);
  } catch (err) {
    await dispose();
    throw err;
  }
}

function conmonExit(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 255 : 0)));
  });
}

async function startPipedExec(ctx: ExecContext, opts: ExecOptions, args: string[], dispose: () => Promise<void>): Promise<ExecSession> {
  const child = spawn(ctx.conmonPath, [...args, '-l', 'passthrough'], {
    stdio: [opts.stdin ? 'pipe' : 'ignore', opts.discardOutput ? 'ignore' : 'pipe', opts.discardOutput ? 'ignore' : 'pipe', 'pipe'],
    env: conmonEnv({ _OCI_SYNCPIPE: '3' }),
    detached: true,
    cwd: ctx.execDir,
  });
  child.on('error', () => undefined); // surfaces as a missing pid / conmon exit code
  const sync = new SyncPipeReader(child.stdio[3] as Readable);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exited = conmonExit(child);
  // Node resumes a child's unread stdio once the child has exited (child_process's flushStdio),
  // dropping what it reads: a conmon that ends before the caller attaches (a quick command
  // under load) would lose the output. Piped into streams of our own right away, nothing is
  // dropped, and back-pressure still reaches the process.
  const stdout = child.stdout ? child.stdout.pipe(new PassThrough()) : undefined;
  // Keep the start of stderr: when the runtime fails, its message is the only explanation.
  let errHead = '';
  const stderr = new PassThrough();
  child.stderr?.on('data', (d: Buffer) => {
    if (errHead.length < 4096) errHead += d.toString('utf8');
  });
  if (child.stderr) child.stderr.pipe(stderr);
  else stderr.end();
  // A reader that gives up (destroys its stream) closes the pipe itself, as before.
  stdout?.once('close', () => child.stdout?.destroy());
  stderr.once('close', () => child.stderr?.destroy());

  const first = await sync.next();
  if (!first || first.data < 0) {
    await closed;
    const message = cleanMessage(first?.message || errHead || `conmon exited with code ${await exited}`);
    void dispose();
    return {
      execId: opts.execId,
      pid: 0,
      stdin: child.stdin ?? undefined,
      stdout,
      stderr,
      exit: Promise.resolve({ exitCode: failedExecExitCode(message), error: message }),
      dispose,
    };
  }
  const exit = exitFrom(sync, exited);
  // The directory goes once the process is done and conmon let go of everything.
  void Promise.all([exit, closed]).then(dispose, () => undefined);
  return { execId: opts.execId, pid: first.data, stdin: child.stdin ?? undefined, stdout, stderr, exit, dispose };
}

async function exitFrom(sync: SyncPipeReader, exited: Promise<number>): Promise<ExecResult> {
  const m: SyncMessage | undefined = await sync.next();
  if (m && m.data >= 0) return { exitCode: m.data };
  return { exitCode: await exited, ...(m?.message ? { error: m.message } : {}) };
}

async function startTtyExec(ctx: ExecContext, opts: ExecOptions, args: string[], dispose: () => Promise<void>): Promise<ExecSession> {
  const logPath = join(ctx.execDir, 'log');
  const child = spawn(ctx.conmonPath, [...args, '--exec-attach', '-t', '-l', `k8s-file:${logPath}`], {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
    env: conmonEnv({ _OCI_SYNCPIPE: '3', _OCI_ATTACHPIPE: '4', _OCI_STARTPIPE: '5' }),
    detached: true,
    cwd: ctx.execDir,
  });
  child.on('error', () => undefined); // surfaces as a missing attach message / conmon exit code
  let errHead = '';
  child.stderr?.on('data', (d: Buffer) => {
    if (errHead.length < 4096) errHead += d.toString('utf8');
  });
  const sync = new SyncPipeReader(child.stdio[3] as Readable);
  const attach = new SyncPipeReader(child.stdio[4] as Readable);
  const start = (child.stdio as unknown as Writable[])[5] as Writable;
  const exited = conmonExit(child);
  start.on('error', () => undefined); // conmon gone: reported through the sync pipe
  start.write('0');
  const ready = await attach.next();
  if (!ready || ready.data < 0) {
    const message = cleanMessage(ready?.message || errHead || `conmon exited with code ${await exited}`);
    throw new Error(`exec: conmon could not set up the attach socket: ${message}`);
  }
  const attachSocketPath = join(ctx.socketsDir, opts.execId, 'attach');
  try {
    await opts.onAttachReady?.(attachSocketPath);
  } finally {
    start.end('0');
  }
  const first = await sync.next();
  if (!first || first.data < 0) {
    const message = cleanMessage(first?.message || errHead || `conmon exited with code ${await exited}`);
    return { execId: opts.execId, pid: 0, attachSocketPath, logPath, exit: Promise.resolve({ exitCode: failedExecExitCode(message), error: message }), dispose };
  }
  return { execId: opts.execId, pid: first.data, attachSocketPath, logPath, exit: exitFrom(sync, exited), dispose };
}
