/**
 * conmon's sync pipe protocol (with --api-version 1). conmon finds the pipe's fd number in the
 * environment variable _OCI_SYNCPIPE and writes one JSON object per line:
 *   {"data": <pid>}                        the runtime created the container / started the exec
 *   {"data": -1, "message": "<error>"}     the runtime failed (message = runtime's stderr)
 *   {"data": <exit code>}                  exec only: the exec'd process exited
 * The pipe reaches EOF when conmon exits (or, for a container, when it closes it).
 *
 * _OCI_STARTPIPE (fd number, optional): conmon blocks reading one byte from it before doing anything,
 * and with --exec-attach once more after its attach socket is ready.
 * _OCI_ATTACHPIPE (fd number, with --exec-attach): conmon writes {"data": 0} when its attach socket is ready.
 */
import type { Readable } from 'node:stream';

export interface SyncMessage {
  data: number;
  message?: string;
}

/** Reads sync messages in order; `next()` gives undefined at EOF. */
export class SyncPipeReader {
  #buf = '';
  #queue: SyncMessage[] = [];
  #waiters: ((m: SyncMessage | undefined) => void)[] = [];
  #ended = false;

  constructor(stream: Readable) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      this.#buf += chunk;
      let nl: number;
      while ((nl = this.#buf.indexOf('\n')) >= 0) {
        const line = this.#buf.slice(0, nl).trim();
        this.#buf = this.#buf.slice(nl + 1);
        if (line) this.#push(parseSyncLine(line));
      }
    });
    const end = () => {
      if (this.#ended) return;
      if (this.#buf.trim()) this.#push(parseSyncLine(this.#buf.trim()));
      this.#buf = '';
      this.#ended = true;
      for (const w of this.#waiters.splice(0)) w(undefined);
    };
    stream.on('end', end);
    stream.on('close', end);
    stream.on('error', end);
  }

  #push(m: SyncMessage): void {
    const w = this.#waiters.shift();
    if (w) w(m);
    else this.#queue.push(m);
  }

  next(): Promise<SyncMessage | undefined> {
    const m = this.#queue.shift();
    if (m) return Promise.resolve(m);
    if (this.#ended) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

export function parseSyncLine(line: string): SyncMessage {
  try {
    const obj = JSON.parse(line) as { data?: unknown; message?: unknown };
    if (typeof obj.data === 'number') {
      return typeof obj.message === 'string' ? { data: obj.data, message: obj.message } : { data: obj.data };
    }
  } catch {
    // fall through
  }
  return { data: -1, message: `unexpected message from conmon: ${line}` };
}

/**
 * conmon's environment, which it passes on to the runtime. Only PATH is needed; systemd's
 * NOTIFY_SOCKET or LISTEN_FDS meant for berthd would make crun hand them to the container.
 */
export function conmonEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...extra };
}
