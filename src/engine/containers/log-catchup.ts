/**
 * The container's log file as a second source for an attach stream, for a client that fell far
 * behind: conmon cannot be told to stop sending on the attach socket, but everything it sends
 * there it has written to the k8s-file log first. So instead of buffering without end, the attach
 * drops the socket's output and reads the log from the point the client had reached, at the
 * client's pace.
 *
 * The log is opened when the attach socket is connected, and its size then is the baseline:
 * from there on, the log's bytes per stream are the socket's bytes per stream. Reading continues
 * through a rotation (the path gets a new inode) and ends once the process side has closed and
 * the file is drained.
 */
import { open, stat, type FileHandle } from 'node:fs/promises';
import { parseLogLine } from '../../runtime/log-file.js';
import type { OutputStream } from './conmon-attach.js';

const CHUNK = 64 * 1024;
const POLL_MS = 50;
/** After a rotation, how long conmon may still write to the old file before it reopens the path. */
const ROTATION_SETTLE_MS = 200;

export class LogCatchUp {
  readonly #path: string;
  #fh: FileHandle;
  #ino: number;
  readonly #baseline: number;

  private constructor(path: string, fh: FileHandle, ino: number, baseline: number) {
    this.#path = path;
    this.#fh = fh;
    this.#ino = ino;
    this.#baseline = baseline;
  }

  /** Opens the log and takes its current size as the baseline; undefined when there is no log. */
  static async open(path: string): Promise<LogCatchUp | undefined> {
    const fh = await open(path, 'r').catch(() => undefined);
    if (!fh) return undefined;
    const st = await fh.stat();
    return new LogCatchUp(path, fh, st.ino, st.size);
  }

  /**
   * The output after the baseline, minus the first `skip[stream]` bytes of each stream (what the
   * client already got from the socket). Follows the file until `until` settled and the file
   * (and any file that replaced it) is drained.
   */
  async *read(skip: Record<OutputStream, number>, until: Promise<unknown>, signal: AbortSignal): AsyncGenerator<[OutputStream, Buffer]> {
    let finished = false;
    void until.then(() => (finished = true), () => (finished = true));
    const left = { ...skip };
    let pos = this.#baseline;
    let carry = Buffer.alloc(0);
    const buf = Buffer.alloc(CHUNK);
    for (;;) {
      if (signal.aborted) return;
      const wasFinished = finished;
      const { bytesRead } = await this.#fh.read(buf, 0, CHUNK, pos);
      if (bytesRead > 0) {
        pos += bytesRead;
        const data = carry.length ? Buffer.concat([carry, buf.subarray(0, bytesRead)]) : buf.subarray(0, bytesRead);
        let start = 0;
        let nl: number;
        while ((nl = data.indexOf(0x0a, start)) >= 0) {
          const rec = parseLogLine(data.subarray(start, nl));
          start = nl + 1;
          if (!rec) continue;
          let bytes = rec.partial ? rec.data : Buffer.concat([rec.data, NEWLINE]);
          const s = rec.stream;
          if (left[s] > 0) {
            const cut = Math.min(left[s], bytes.length);
            left[s] -= cut;
            bytes = bytes.subarray(cut);
          }
          if (bytes.length) yield [s, bytes];
        }
        carry = Buffer.from(data.subarray(start));
        continue;
      }
      // At the end of this file: was the path rotated to a new one?
      const now = await stat(this.#path).catch(() => undefined);
      if (now && now.ino !== this.#ino) {
        await sleep(ROTATION_SETTLE_MS);
        const more = (await this.#fh.stat()).size > pos;
        if (more) continue; // drain what conmon wrote before it reopened
        await this.#fh.close();
        const fh = await open(this.#path, 'r').catch(() => undefined);
        if (!fh) return;
        this.#fh = fh;
        this.#ino = (await fh.stat()).ino;
        pos = 0;
        carry = Buffer.alloc(0);
        continue;
      }
      if (wasFinished) return;
      await sleep(POLL_MS);
    }
  }

  async close(): Promise<void> {
    await this.#fh.close().catch(() => undefined);
  }
}

const NEWLINE = Buffer.from('\n');

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
