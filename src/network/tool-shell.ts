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
import { runTool, ToolError } from './run-tool.js';

/** runTool's contract: stdout back, ToolError with the tool's stderr on failure. */
export type RunTool = (cmd: string, args: readonly string[], opts?: { input?: string }) => Promise<string>;

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

  /**
   * One tool, with runTool's contract (stdout alone back; on failure a ToolError with its stderr), from
   * a shell of the pool: the host queries and changes of a network create or remove (ip, nft) then no
   * longer fork berthd. Its stderr is kept in a shell variable and printed after a tag only on failure.
   * Without a shell (none could start) the tool is spawned.
   */
  readonly tool: RunTool = async (cmd, args, opts = {}) => {
    const tag = `@@berth-stderr-${shTag()}@@`;
    const eof = `BERTH_EOF_${shTag()}`;
    const input = opts.input;
    const stdin = input === undefined ? ' </dev/null' : ` <<'${eof}'\n${input}${input === '' || input.endsWith('\n') ? '' : '\n'}${eof}\n`;
    // fd 3 is the job's stdout inside the substitution, whose own stdout captures the stderr.
    const script = `{ e=$(${[cmd, ...args].map(shQuote).join(' ')} 2>&1 >&3 3>&-${stdin}); } 3>&1\ns=$?\n[ "$s" -eq 0 ] || printf '${tag}\\n%s' "$e"\n(exit $s)`;
    let result;
    try {
      result = await this.#shell.run(script);
    } catch (err) {
      if (err instanceof ShellError && err.notStarted) return runTool(cmd, args, input === undefined ? {} : { input });
      throw err instanceof ShellError ? new ToolError(cmd, null, err.message) : err;
    }
    const at = result.output.lastIndexOf(tag);
    if (result.status === 0) return at < 0 ? result.output : result.output.slice(0, at);
    throw new ToolError(`${cmd} ${args.slice(0, 3).join(' ')}`, result.status, at < 0 ? result.output : result.output.slice(at + tag.length + 1));
  };

  /** Ends the shell (when the driver stops); a later run starts a new one. */
  close(): void {
    this.#shell.close();
  }
}
