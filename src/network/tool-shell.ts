/**
 * Tool invocations for background work (namespaces made ahead, their removal) and a container's
 * network at start run by long-lived `sh`s (lib/long-lived-shell.ts) instead of spawned by the
 * daemon: a fork of berthd holds the event loop for milliseconds, ten of them when ten containers
 * start together.
 *
 * A job is the steps joined with &&, each step's stdin a here-document. Output (stdout and stderr
 * together) comes back for errors.
 */
import { ShellError, ShellPool, shQuote, shTag } from '../lib/long-lived-shell.js';
import { ToolError } from './run-tool.js';

export interface ShellStep {
  argv: readonly string[];
  /** The step's stdin; none: /dev/null. */
  input?: string;
}

export class ToolShell {
  readonly #shell: ShellPool;

  /** `shells`: jobs run side by side at most (each in a shell of its own). */
  constructor(shells = 1) {
    this.#shell = new ShellPool('tool shell', shells);
  }

  /** Runs the steps in order, stopping at the first failure; resolves with their output. */
  run(steps: readonly ShellStep[]): Promise<string> {
    const eof = `BERTH_EOF_${shTag()}`;
    // `a <<'EOF' &&` then the document: the && has to come before the document's lines.
    const script = steps
      .map((s, i) => {
        const cmd = s.argv.map(shQuote).join(' ') + (s.input === undefined ? ' </dev/null' : ` <<'${eof}'`) + (i < steps.length - 1 ? ' &&' : '');
        if (s.input === undefined) return `${cmd}\n`;
        return `${cmd}\n${s.input}${s.input === '' || s.input.endsWith('\n') ? '' : '\n'}${eof}\n`;
      })
      .join('');
    return this.#shell.run(script).then(
      ({ status, output }) => {
        if (status !== 0) throw new ToolError(steps.map((s) => s.argv[0]).join(' && '), status, output);
        return output;
      },
      (err: unknown) => {
        throw err instanceof ShellError ? new ToolError('sh', null, err.message) : err;
      },
    );
  }

  /** Ends the shell (when the driver stops); a later run starts a new one. */
  close(): void {
    this.#shell.close();
  }
}
