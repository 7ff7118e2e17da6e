/**
 * A long-lived `sh` that runs tool invocations for background work (namespaces made ahead, their
 * removal). Node's spawn forks the whole daemon and holds the event loop until the child has exec'd:
 * a few ms each, more under load, and right when a container is starting. The shell forks a small
 * process instead, off the daemon's thread; the daemon only writes a script to a pipe.
 *
 * One job at a time: each is the steps joined with &&, each step's stdin a here-document, then a
 * marker line with the exit status. Output (stdout and stderr together) comes back for errors.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { ToolError } from './run-tool.js';

export interface ShellStep {
  argv: readonly string[];
  /** The step's stdin; none: /dev/null. */
  input?: string;
}

const TIMEOUT_MS = 30_000;

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

export class ToolShell {
  #sh: ChildProcessWithoutNullStreams | undefined;
  #queue: Promise<unknown> = Promise.resolve();

  /** Runs the steps in order, stopping at the first failure; resolves with their output. */
  run(steps: readonly ShellStep[]): Promise<string> {
    const job = this.#queue.then(() => this.#run(steps));
    this.#queue = job.catch(() => {});
    return job;
  }

  /** Ends the shell (when the driver stops); a later run starts a new one. */
  close(): void {
    this.#sh?.stdin.end();
    this.#sh = undefined;
  }

  #run(steps: readonly ShellStep[]): Promise<string> {
    const sh = this.#shell();
    const tag = randomBytes(8).toString('hex');
    const marker = `@@berth-done-${tag} `;
    const eof = `BERTH_EOF_${tag}`;
    // `a <<'EOF' &&` then the document: the && has to come before the document's lines.
    const body = steps
      .map((s, i) => {
        const cmd = s.argv.map(quote).join(' ') + (s.input === undefined ? ' </dev/null' : ` <<'${eof}'`) + (i < steps.length - 1 ? ' &&' : '');
        if (s.input === undefined) return `${cmd}\n`;
        return `${cmd}\n${s.input}${s.input === '' || s.input.endsWith('\n') ? '' : '\n'}${eof}\n`;
      })
      .join('');
    const script = `{\n${body}} 2>&1; printf '\\n${marker}%d\\n' $?\n`;
    return new Promise((resolve, reject) => {
      let out = '';
      const done = (err: Error | null, text = '') => {
        clearTimeout(timer);
        sh.stdout.off('data', onData);
        sh.off('exit', onExit);
        if (err) reject(err);
        else resolve(text);
      };
      const onData = (d: Buffer) => {
        out += d.toString();
        const at = out.indexOf(`\n${marker}`);
        if (at < 0) return;
        const end = out.indexOf('\n', at + 1 + marker.length);
        if (end < 0) return;
        const status = Number(out.slice(at + 1 + marker.length, end));
        const text = out.slice(0, at);
        done(status === 0 ? null : new ToolError(steps.map((s) => s.argv[0]).join(' && '), status, text), text);
      };
      const onExit = () => done(new ToolError('sh', null, `the tool shell ended: ${out}`));
      const timer = setTimeout(() => {
        if (this.#sh === sh) this.#sh = undefined;
        sh.kill('SIGKILL');
        done(new ToolError('sh', null, `timed out: ${out}`));
      }, TIMEOUT_MS);
      sh.stdout.on('data', onData);
      sh.once('exit', onExit);
      sh.stdin.write(script);
    });
  }

  #shell(): ChildProcessWithoutNullStreams {
    if (this.#sh && this.#sh.exitCode === null && this.#sh.signalCode === null) return this.#sh;
    const sh = spawn('sh', [], { stdio: ['pipe', 'pipe', 'pipe'] });
    sh.stdin.on('error', () => {}); // an ended shell: the job's 'exit' listener reports it
    sh.stderr.resume();
    // Background work only: the shell must not keep the daemon (or a test) alive.
    sh.unref();
    for (const pipe of [sh.stdin, sh.stdout, sh.stderr]) (pipe as unknown as { unref?: () => void }).unref?.();
    this.#sh = sh;
    sh.once('exit', () => {
      if (this.#sh === sh) this.#sh = undefined;
    });
    return sh;
  }
}
