/**
 * Moves bytes between an attach client (the API's hijacked connection, a websocket...) and a
 * process: its conmon attach socket (containers, tty execs) or its pipes (execs without a tty).
 * The client side is wire-format free: the API layer frames or not.
 *
 * Flow control: input waits when the process side is full. Output from pipes waits when the
 * client is backed up; conmon's socket cannot be paused from here, so a backed-up client pauses
 * the input instead (which is what feeds `cat`-like processes). A client that falls more than
 * MAX_BACKLOG behind a process writing on its own is switched to reading the log file from where
 * it was (log-catchup.ts), or, without a log to read, cut off: nothing is buffered without end.
 */
import type { Readable, Writable } from 'node:stream';
import { log } from '../../lib/log.js';
import type { ConmonAttach, OutputStream } from './conmon-attach.js';
import { DetachKeyScanner } from './detach-keys.js';
import type { LogCatchUp } from './log-catchup.js';

export type { OutputStream } from './conmon-attach.js';

export interface AttachClient {
  /** What the client types; 'end' is its stdin EOF (half-close). Paused and resumed from here. */
  input?: Readable;
  /** Delivers output; false when the client is backed up (wait for drained()). */
  write(stream: OutputStream, data: Buffer): boolean;
  /** Resolves when the client can take more output, or is gone. */
  drained(): Promise<void>;
  /** Output bytes accepted but not yet sent. */
  backlog(): number;
  /** Resolves when the client connection is gone. */
  gone: Promise<void>;
}

/** Why an attach ended: the process side closed, the detach keys, or the client went away. */
export type AttachEnd = 'exited' | 'detached' | 'client-gone';

export interface BridgeOptions {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  /** Only with a tty, as dockerd does: binary input must pass untouched otherwise. */
  detachKeys?: Buffer;
  /**
   * After the client leaves, keep reading until conmon closes instead of closing the socket:
   * conmon treats any attach socket's close as stdin EOF for a StdinOnce container, and a client
   * that never attached stdin must not close it.
   */
  drainAfterClient?: boolean;
  /** The process's log, opened when the socket was connected: where a slow client catches up. */
  catchUp?: LogCatchUp;
}

const MAX_BACKLOG = 64 * 1024 * 1024;

/** Runs until the process side closes, the detach keys arrive, or the client goes away. */
export function bridgeConmon(sock: ConmonAttach, client: AttachClient, o: BridgeOptions): Promise<AttachEnd> {
  return new Promise<AttachEnd>((resolve) => {
    let done = false;
    let outputBlocked = false;
    let inputBlocked = false;
    let catchingUp = false;
    /** Socket bytes per stream so far, wanted or not: where the log takes over. */
    const consumed: Record<OutputStream, number> = { stdout: 0, stderr: 0 };
    const input = client.input;
    const resumeInput = () => {
      if (!done && !outputBlocked && !inputBlocked) input?.resume();
    };
    const finish = (why: AttachEnd) => {
      if (done) return;
      done = true;
      input?.removeListener('data', onInput);
      input?.removeListener('end', onInputEnd);
      input?.resume(); // discard whatever else the client sends
      if (why === 'client-gone' && o.drainAfterClient) void sock.ended.then(() => sock.close());
      else if (why !== 'exited') sock.close();
      resolve(why);
    };

    const wanted = (stream: OutputStream) => (stream === 'stdout' ? o.stdout : o.stderr);
    const catchUp = (source: LogCatchUp) => {
      catchingUp = true;
      const abort = new AbortController();
      void client.gone.then(() => abort.abort());
      void (async () => {
        for await (const [stream, data] of source.read({ ...consumed }, sock.ended, abort.signal)) {
          if (done) return;
          if (wanted(stream) && !client.write(stream, data)) await client.drained();
        }
        finish('exited');
      })().catch((err) => {
        log.warn('attach: reading the log for a slow client failed', { err });
        finish('client-gone');
      });
    };

    sock.onData((stream, data) => {
      if (done || catchingUp) return;
      consumed[stream] += data.length;
      if (!wanted(stream) || client.write(stream, data)) return;
      if (client.backlog() > MAX_BACKLOG) {
        if (o.catchUp) {
          log.info('attach client fell behind, continuing from the log file', { backlog: client.backlog() });
          catchUp(o.catchUp);
        } else {
          log.warn('attach client too slow, disconnecting it', { backlog: client.backlog() });
          finish('client-gone');
        }
        return;
      }
      if (!outputBlocked) {
        outputBlocked = true;
        input?.pause();
        void client.drained().then(() => {
          outputBlocked = false;
          resumeInput();
        });
      }
    });

    const scanner = o.detachKeys?.length ? new DetachKeyScanner(o.detachKeys) : undefined;
    const onInput = (chunk: Buffer) => {
      let data = chunk;
      if (scanner) {
        const r = scanner.push(chunk);
        if (r.out.length) sock.write(r.out);
        if (r.detached) return finish('detached');
        data = Buffer.alloc(0);
      }
      if (data.length && !sock.write(data) && !inputBlocked) {
        inputBlocked = true;
        input?.pause();
        void sock.drained().then(() => {
          inputBlocked = false;
          resumeInput();
        });
      }
    };
    const onInputEnd = () => sock.endInput();
    if (input) {
      if (o.stdin) {
        input.on('data', onInput);
        input.on('end', onInputEnd);
      }
      input.resume();
    }

    void sock.ended.then(() => {
      if (!catchingUp) finish('exited'); // else the log reader ends it once the file is drained
    });
    void client.gone.then(() => finish('client-gone'));
  });
}

export interface ProcessPipes {
  stdin?: Writable;
  stdout?: Readable;
  stderr?: Readable;
}

/**
 * Connects a process's pipes to the client. `done` resolves when both output pipes have ended
 * (every holder closed them); input stops at the client's EOF or departure. Output the client did
 * not ask for, or that comes after it left, is read and dropped so the process never blocks on it.
 */
export function bridgePipes(p: ProcessPipes, client: AttachClient, o: BridgeOptions): { done: Promise<void> } {
  const input = client.input;
  let clientGone = false;
  void client.gone.then(() => {
    clientGone = true;
    p.stdin?.end();
    input?.resume();
  });

  const pump = (stream: OutputStream, r: Readable | undefined, wanted: boolean): Promise<void> => {
    if (!r) return Promise.resolve();
    const ended = new Promise<void>((resolve) => {
      r.once('end', resolve);
      r.once('close', resolve);
      r.once('error', () => resolve());
    });
    r.on('data', (data: Buffer) => {
      if (!wanted || clientGone) return;
      if (!client.write(stream, data)) {
        r.pause();
        void client.drained().then(() => r.resume());
      }
    });
    return ended;
  };

  if (input) {
    if (o.stdin && p.stdin) {
      const stdin = p.stdin;
      stdin.on('error', () => input.resume()); // the process closed its stdin or exited
      input.on('data', (chunk: Buffer) => {
        if (!stdin.writable) return;
        if (!stdin.write(chunk)) {
          input.pause();
          stdin.once('drain', () => input.resume());
        }
      });
      input.on('end', () => stdin.end());
    }
    input.resume();
  }
  const done = Promise.all([pump('stdout', p.stdout, o.stdout), pump('stderr', p.stderr, o.stderr)]).then(() => undefined);
  return { done };
}
