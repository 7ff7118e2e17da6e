/**
 * A client of conmon's attach socket (SOCK_SEQPACKET, which Node's net module cannot open; the
 * `node-unix-socket` addon can). Protocol, as conmon speaks it:
 *   - every packet from conmon is one read of the process's output: byte 0 says which stream
 *     (2 stdout, 3 stderr; a tty's output is all "stdout"), the rest is data;
 *   - every packet to conmon is raw stdin; conmon reads at most 32 KiB per packet and drops the
 *     rest of a longer one, so input is cut into smaller packets;
 *   - our shutdown(SHUT_WR) is stdin EOF: conmon closes the container's stdin unless it runs
 *     with --leave-stdin-open; closing the socket does the same;
 *   - conmon closes the socket when it exits, after the process exited and its output drained.
 * conmon blocks writing to a client that does not read; this addon cannot stop reading, so flow
 * control happens one level up (the caller pauses the input that causes output, see attach.ts).
 */
import { closeSync, openSync, constants } from 'node:fs';
import { basename, dirname } from 'node:path';
import { createRequire } from 'node:module';
import type { SeqpacketSocket as SeqpacketSocketType } from 'node-unix-socket';
import { log } from '../../lib/log.js';

const require = createRequire(import.meta.url);
const { SeqpacketSocket } = require('node-unix-socket') as typeof import('node-unix-socket');

export type OutputStream = 'stdout' | 'stderr';

/** Input packet size: well under conmon's 32 KiB read buffer. */
const PACKET = 16 * 1024;
/** Input bytes handed to the socket but not yet taken by the kernel before write() says "wait". */
const HIGH_WATER = 256 * 1024;
/** sun_path holds 108 bytes; longer paths are reached through /proc/self/fd/<dir fd>/. */
const MAX_SUN_PATH = 100;
/** Output packets are at most 8 KiB + 1; a larger read buffer only costs memory per read. */
const READ_BUFFER = 64 * 1024;

export class ConmonAttach {
  readonly #sock: SeqpacketSocketType;
  #pending = 0;
  #closed = false;
  #inputEnded = false;
  #onData: ((stream: OutputStream, data: Buffer) => void) | undefined;
  /** Output that arrived before onData() was called (the process may start before the caller is ready). */
  #early: [OutputStream, Buffer][] = [];
  #destroyScheduled = false;
  #drainWaiters: (() => void)[] = [];
  /** Resolves when conmon closed its end (the process is gone) or close() was called. */
  readonly ended: Promise<void>;

  private constructor(sock: SeqpacketSocketType) {
    this.#sock = sock;
    sock.setInternalReadBufferSize(READ_BUFFER);
    // Called from inside the addon's read loop: must not throw, and must not destroy the socket
    // synchronously (close() defers that).
    sock.on('data', (packet: Buffer) => {
      if (this.#closed || packet.length < 2) return;
      const type = packet[0];
      const stream: OutputStream | undefined = type === 2 ? 'stdout' : type === 3 ? 'stderr' : undefined;
      if (!stream) return;
      try {
        if (this.#onData) this.#onData(stream, packet.subarray(1));
        else this.#early.push([stream, packet.subarray(1)]);
      } catch (err) {
        log.error('attach output handler failed', { err });
        this.close();
      }
    });
    this.ended = new Promise((resolve) => {
      const done = () => {
        this.#closed = true;
        for (const w of this.#drainWaiters.splice(0)) w();
        resolve();
      };
      // Settle from a macrotask: the addon calls in from libuv without Node's callback scope, so
      // promise reactions queued here might otherwise wait for some unrelated event.
      const later = () => setImmediate(done);
      sock.on('end', later);
      sock.on('close', later);
      sock.on('error', later);
    });
    // Once conmon closed its end there is nothing left to read: release the fd.
    void this.ended.then(() => this.close());
  }

  /** Connects to a conmon attach socket; rejects when nothing listens there (process gone). */
  static connect(socketPath: string): Promise<ConmonAttach> {
    return new Promise((resolve, reject) => {
      let dirFd: number | undefined;
      let target = socketPath;
      if (socketPath.length > MAX_SUN_PATH) {
        dirFd = openSync(dirname(socketPath), constants.O_RDONLY | constants.O_DIRECTORY);
        target = `/proc/self/fd/${dirFd}/${basename(socketPath)}`;
      }
      const sock = new SeqpacketSocket();
      const fail = (err: unknown) => {
        if (dirFd !== undefined) closeSync(dirFd);
        sock.destroy();
        reject(err instanceof Error ? err : new Error(String(err)));
      };
      sock.once('error', fail);
      try {
        sock.connect(target, () => {
          if (dirFd !== undefined) closeSync(dirFd);
          sock.off('error', fail);
          const attach = new ConmonAttach(sock);
          setImmediate(() => resolve(attach)); // see `later` in the constructor
        });
      } catch (err) {
        fail(err);
      }
    });
  }

  /** Receives the process's output, starting with whatever arrived before this call. */
  onData(fn: (stream: OutputStream, data: Buffer) => void): void {
    this.#onData = fn;
    for (const [stream, data] of this.#early.splice(0)) fn(stream, data);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Sends stdin bytes; false when the caller should wait for drained() before writing more. */
  write(data: Buffer): boolean {
    if (this.#closed || this.#inputEnded) return true;
    for (let off = 0; off < data.length; off += PACKET) {
      const part = data.subarray(off, Math.min(off + PACKET, data.length));
      this.#pending += part.length;
      try {
        this.#sock.write(part, 0, part.length, () => {
          this.#pending -= part.length;
          if (this.#pending <= HIGH_WATER / 2 && this.#drainWaiters.length) {
            const waiters = this.#drainWaiters.splice(0);
            setImmediate(() => waiters.forEach((w) => w()));
          }
        });
      } catch {
        this.close();
        return true;
      }
    }
    return this.#pending <= HIGH_WATER;
  }

  /** Resolves once buffered input has mostly reached the kernel (or the socket closed). */
  drained(): Promise<void> {
    if (this.#closed || this.#pending <= HIGH_WATER / 2) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** Stdin EOF, after everything written so far. Output keeps coming. */
  endInput(): void {
    if (this.#closed || this.#inputEnded) return;
    this.#inputEnded = true;
    try {
      this.#sock.end();
    } catch {
      // already gone
    }
  }

  /**
   * Closes the socket. The native close is deferred: the addon's read loop goes on reading after
   * each 'data' callback and aborts the process if the fd vanished under it (which is what a
   * close from inside a callback would do).
   */
  close(): void {
    this.#closed = true;
    for (const w of this.#drainWaiters.splice(0)) w();
    if (this.#destroyScheduled) return;
    this.#destroyScheduled = true;
    setImmediate(() => {
      try {
        this.#sock.destroy();
      } catch {
        // already gone
      }
    });
  }
}
