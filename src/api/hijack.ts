/**
 * Hijacking a connection for attach and exec start, as dockerd does it.
 *
 * With `Upgrade: tcp` (every current client) the server answers `101 UPGRADED` and the socket
 * becomes a two-way byte pipe: the client's stdin in, output out (framed iff no tty). The client
 * half-closes at stdin EOF and keeps reading; the stream ends when we end it.
 *
 * Without Upgrade (old clients, curl) the answer is a `200` raw-stream response with no length
 * that ends when the connection closes; stdin is the request body, if the client sends one.
 *
 * Node does not parse the body of an upgrade request: exec start's JSON arrives after the headers
 * on the socket; readUpgradeBody() reads exactly that much and leaves the rest as stdin.
 */
import type { Duplex, Readable } from 'node:stream';
import { PassThrough } from 'node:stream';
import type { RequestContext } from './request.js';
import { invalidArgument } from '../lib/errors.js';
import { COMMON_HEADERS } from './router.js';
import { StreamType, writeFrame } from './stdcopy.js';
import type { AttachClient, OutputStream } from '../engine/containers/attach-bridge.js';

export const RAW_STREAM = 'application/vnd.docker.raw-stream';

const MAX_BODY = 1024 * 1024;

export interface Hijacked {
  /** The client's stdin: bytes after the request (upgrade) or the request body (fallback). */
  input: Readable;
  /** Raw output bytes. */
  write(data: Buffer): boolean;
  drained(): Promise<void>;
  backlog(): number;
  /** Resolves when the connection is gone. */
  gone: Promise<void>;
  /** Ends the stream after everything written so far is sent. */
  end(): void;
}

/** Whether the request asked for a protocol switch (we serve `tcp`). */
export function isUpgrade(ctx: RequestContext): boolean {
  return ctx.socket !== undefined;
}

/**
 * Reads the request body of an upgrade request (exec start's JSON) from `head` and the socket.
 * Content-Length or chunked; what follows the body is pushed back for the stream to read.
 */
export async function readUpgradeBody(ctx: RequestContext): Promise<Buffer> {
  const socket = ctx.socket!;
  const te = String(ctx.req.headers['transfer-encoding'] ?? '').toLowerCase();
  const len = Number(ctx.req.headers['content-length'] ?? 0);
  let buf = ctx.head ?? Buffer.alloc(0);
  ctx.head = Buffer.alloc(0);
  const more = async (): Promise<boolean> => {
    const chunk = await readChunk(socket);
    if (!chunk) return false;
    buf = Buffer.concat([buf, chunk]);
    if (buf.length > MAX_BODY + 64) throw invalidArgument('request body too large');
    return true;
  };
  if (te.includes('chunked')) {
    const parts: Buffer[] = [];
    let pos = 0;
    for (;;) {
      let eol = buf.indexOf('\r\n', pos);
      while (eol < 0) {
        if (!(await more())) throw invalidArgument('unexpected end of request body');
        eol = buf.indexOf('\r\n', pos);
      }
      const size = Number.parseInt(buf.subarray(pos, eol).toString('latin1'), 16);
      if (!Number.isFinite(size) || size < 0) throw invalidArgument('malformed chunked request body');
      const need = eol + 2 + size + 2;
      while (buf.length < need) if (!(await more())) throw invalidArgument('unexpected end of request body');
      if (size === 0) {
        pos = need; // no trailers from the clients we know
        break;
      }
      parts.push(buf.subarray(eol + 2, eol + 2 + size));
      pos = need;
    }
    ctx.head = buf.subarray(pos);
    return Buffer.concat(parts);
  }
  if (!Number.isInteger(len) || len < 0 || len > MAX_BODY) throw invalidArgument('invalid Content-Length');
  while (buf.length < len) if (!(await more())) throw invalidArgument('unexpected end of request body');
  ctx.head = buf.subarray(len);
  return buf.subarray(0, len);
}

function readChunk(socket: Duplex): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const chunk = socket.read() as Buffer | null;
    if (chunk) return resolve(chunk);
    const cleanup = () => {
      socket.off('readable', onReadable);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
    };
    const onReadable = () => {
      const c = socket.read() as Buffer | null;
      if (!c) return;
      cleanup();
      resolve(c);
    };
    const onEnd = () => {
      cleanup();
      resolve(undefined);
    };
    socket.on('readable', onReadable);
    socket.on('end', onEnd);
    socket.on('close', onEnd);
  });
}

/** Takes the connection over and sends the response head. */
export function hijack(ctx: RequestContext, contentType: string): Hijacked {
  return ctx.socket ? hijackUpgraded(ctx, ctx.socket, contentType) : hijackPlain(ctx);
}

function hijackUpgraded(ctx: RequestContext, socket: Duplex, contentType: string): Hijacked {
  const headers = { ...COMMON_HEADERS, 'Content-Type': contentType, Connection: 'Upgrade', Upgrade: 'tcp' };
  let head = 'HTTP/1.1 101 UPGRADED\r\n';
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  socket.write(`${head}\r\n`);
  (socket as Duplex & { setNoDelay?: (v: boolean) => void }).setNoDelay?.(true);
  socket.on('error', () => undefined); // a reset client is just gone

  const input = new PassThrough();
  if (ctx.head?.length) input.write(ctx.head);
  socket.pipe(input); // ends input at the client's half-close; pauses the socket when input is full
  const gone = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return {
    input,
    write: (data) => !socket.destroyed && socket.write(data),
    drained: () => waitDrain(socket, gone),
    backlog: () => socket.writableLength,
    gone,
    end: () => {
      if (socket.destroyed) return;
      socket.end();
      // The client closes once it has read to EOF; one that does not is cut off after a while.
      socket.once('finish', () => setTimeout(() => socket.destroy(), 5000).unref());
    },
  };
}

function hijackPlain(ctx: RequestContext): Hijacked {
  const res = ctx.res;
  // No length and no chunking: the body runs until the connection closes.
  res.useChunkedEncodingByDefault = false;
  res.shouldKeepAlive = false;
  res.writeHead(200, { 'Content-Type': RAW_STREAM });
  res.flushHeaders();
  res.socket?.setNoDelay?.(true);
  const hasBody = ctx.req.headers['transfer-encoding'] !== undefined || Number(ctx.req.headers['content-length'] ?? 0) > 0;
  // Without a body there is no stdin at all: an immediate EOF would close a StdinOnce container's stdin.
  const input = hasBody ? ctx.req : new PassThrough();
  const gone = new Promise<void>((resolve) => res.once('close', () => resolve()));
  return {
    input,
    write: (data) => !res.destroyed && res.write(data),
    drained: () => waitDrain(res, gone),
    backlog: () => res.writableLength,
    gone,
    end: () => res.end(),
  };
}

function waitDrain(w: NodeJS.WritableStream & { writableNeedDrain?: boolean; destroyed?: boolean }, gone: Promise<void>): Promise<void> {
  if (w.destroyed || !w.writableNeedDrain) return Promise.resolve();
  return Promise.race([new Promise<void>((resolve) => w.once('drain', () => resolve())), gone]);
}

/** An AttachClient over a hijacked connection: multiplexed frames without a tty, raw bytes with one. */
export function attachClient(h: Hijacked, framed: boolean): AttachClient {
  return {
    input: h.input,
    write: framed
      ? (stream: OutputStream, data: Buffer) => writeFrame({ write: (b: Buffer) => h.write(b) } as NodeJS.WritableStream, stream === 'stdout' ? StreamType.Stdout : StreamType.Stderr, data)
      : (_stream: OutputStream, data: Buffer) => h.write(data),
    drained: () => h.drained(),
    backlog: () => h.backlog(),
    gone: h.gone,
  };
}

/** After the takeover an error can only be reported in the stream itself. */
export function writeStreamError(h: Hijacked, framed: boolean, err: unknown): void {
  const message = `${err instanceof Error ? err.message : String(err)}\n`;
  if (framed) writeFrame({ write: (b: Buffer) => h.write(b) } as NodeJS.WritableStream, StreamType.SystemErr, message);
  else h.write(Buffer.from(message));
}
