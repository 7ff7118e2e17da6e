/**
 * A long-lived `sh` that runs short scripts for the daemon. Node's spawn forks the whole daemon
 * (~100 MB of page tables) and holds the event loop until the child has exec'd: 2-10 ms each, more
 * under load. The shell forks a small process instead; the daemon only writes a script to a pipe.
 *
 * One script at a time (callers queue), its stdout and stderr together, ended by a marker line
 * carrying its exit status. The shell is started on first use, replaced when it died, and unref'd
 * (with its pipes): it never keeps the daemon, or a test, alive. It ends when its stdin closes.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomHex } from './random-hex.js';
import { log } from './log.js';

const TIMEOUT_MS = 30_000;

/** Single-quotes a word for sh. */
export const shQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** A random word, for markers and here-document delimiters no script can contain by chance. */
export const shTag = (): string => randomHex(8);

export interface ShellResult {
  status: number;
  /** The script's stdout and stderr, up to the marker. */
  output: string;
}

/** The shell could not run the script to its end (it ended, timed out, or never started). */
export class ShellError extends Error {
  constructor(
    message: string,
    /** What the script printed before that. */
    readonly output: string,
    /** True when no shell ever ran (sh could not be started): nothing of the script ran. */
    readonly notStarted = false,
  ) {
    super(message);
  }
}

export class LongLivedShell {
  #sh: ChildProcessWithoutNullStreams | undefined;
  #queue: Promise<unknown> = Promise.resolve();

  /** `name` goes into messages; `env` is the shell's whole environment (default: berthd's). */
  constructor(
    private readonly name: string,
    private readonly env?: NodeJS.ProcessEnv,
  ) {}

  /** Runs `script` (lines of sh) after the scripts queued before it. */
  run(script: string): Promise<ShellResult> {
    const job = this.#queue.then(() => this.#run(script));
    this.#queue = job.catch(() => {});
    return job;
  }

  /** Ends the shell; a later run starts a new one. */
  close(): void {
    this.#sh?.stdin.end();
    this.#sh = undefined;
  }

  #run(script: string): Promise<ShellResult> {
    const sh = this.#shell();
    const marker = `@@berth-done-${shTag()} `;
    const text = `{\n${script}\n} 2>&1; printf '\\n${marker}%d\\n' $?\n`;
    return new Promise((resolve, reject) => {
      let out = '';
      const done = (err: Error | null, result?: ShellResult) => {
        clearTimeout(timer);
        sh.stdout.off('data', onData);
        sh.off('exit', onExit);
        sh.off('error', onError);
        if (err) reject(err);
        else resolve(result!);
      };
      const onData = (d: Buffer) => {
        out += d.toString();
        const at = out.indexOf(`\n${marker}`);
        if (at < 0) return;
        const end = out.indexOf('\n', at + 1 + marker.length);
        if (end < 0) return;
        done(null, { status: Number(out.slice(at + 1 + marker.length, end)), output: out.slice(0, at) });
      };
      const onExit = () => done(new ShellError(`the ${this.name} ended: ${out}`, out, sh.pid === undefined));
      const onError = (err: Error) => done(new ShellError(`the ${this.name} could not start: ${err.message}`, out, sh.pid === undefined));
      const timer = setTimeout(() => {
        if (this.#sh === sh) this.#sh = undefined;
        sh.kill('SIGKILL');
        done(new ShellError(`the ${this.name} timed out: ${out}`, out));
      }, TIMEOUT_MS);
      sh.stdout.on('data', onData);
      sh.once('exit', onExit);
      sh.once('error', onError);
      sh.stdin.write(text);
    });
  }

  #shell(): ChildProcessWithoutNullStreams {
    if (this.#sh && this.#sh.exitCode === null && this.#sh.signalCode === null) return this.#sh;
    const sh = spawn('sh', [], { stdio: ['pipe', 'pipe', 'pipe'], env: this.env });
    sh.stdin.on('error', () => {}); // an ended shell: the job's 'exit' listener reports it
    sh.on('error', (err) => log.warn(`${this.name} failed`, { err }));
    sh.stderr.resume();
    sh.unref();
    for (const pipe of [sh.stdin, sh.stdout, sh.stderr]) (pipe as unknown as { unref?: () => void }).unref?.();
    this.#sh = sh;
    sh.once('exit', () => {
      if (this.#sh === sh) this.#sh = undefined;
    });
    return sh;
  }
}

/**
 * Up to `max` long-lived shells, for work that comes in bursts on the start path (ten containers
 * starting together): one shell runs their scripts one after another, so the last waits for all the
 * others. A script goes to an idle shell; another shell is started only when every one is busy, so a
 * daemon that starts one container at a time keeps a single shell.
 */
export class ShellPool {
  readonly #shells: { shell: LongLivedShell; busy: number }[] = [];

  constructor(
    private readonly name: string,
    private readonly max: number,
    private readonly env?: NodeJS.ProcessEnv,
  ) {}

  run(script: string): Promise<ShellResult> {
    let slot = this.#shells.find((s) => s.busy === 0);
    if (!slot && this.#shells.length < this.max) {
      slot = { shell: new LongLivedShell(this.name, this.env), busy: 0 };
      this.#shells.push(slot);
    }
    slot ??= this.#shells.reduce((a, b) => (b.busy < a.busy ? b : a));
    const s = slot;
    s.busy++;
    return s.shell.run(script).finally(() => s.busy--);
  }

  /** Ends every shell; a later run starts new ones. */
  close(): void {
    for (const s of this.#shells.splice(0)) s.shell.close();
  }
}
