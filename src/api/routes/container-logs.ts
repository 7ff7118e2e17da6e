/** GET /containers/{id}/logs: conmon's log file, framed when the container has no TTY. */
import type { ServerResponse } from 'node:http';
import type { Router } from '../router.js';
import { queryBool, queryString, type RequestContext } from '../request.js';
import type { ContainerService } from '../../engine/containers/container-service.js';
import { isRunningLike } from '../../engine/containers/container-model.js';
import { invalidArgument } from '../../lib/errors.js';
import { StreamType, writeFrame, frameHeader, streamContentType } from '../stdcopy.js';
import { frameLogChunk, type FrameOptions } from '../log-frames.js';
import { versionAtLeast } from '../api-version.js';
import { formatLogTimestamp, type ContainerLogReader, type LogRecord } from '../../engine/containers/log-reader.js';

export function containerLogRoutes(r: Router, containers: ContainerService): void {
  r.on('GET', '/containers/:id/logs', (ctx) => streamLogs(ctx, containers));
}

/** A long tail goes out this many records per write. */
const WRITE_RECORDS = 4096;

/** Resolves once the response takes more data again, or is gone. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed) return resolve();
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/**
 * The whole log, no filter but the streams: each chunk read is rewritten in place into response
 * bytes (log-frames.ts) and written as it is. The previous write's backpressure is awaited only
 * before the next write, so the next chunk is read and framed while the socket drains: at most
 * two chunks are held.
 */
async function copyLog(res: ServerResponse, chunks: AsyncIterable<Buffer>, reader: ContainerLogReader, opts: FrameOptions): Promise<void> {
  let pending: Promise<void> | undefined;
  for await (const chunk of chunks) {
    const out = frameLogChunk(chunk, opts);
    if (out.length === 0) {
      reader.release(chunk);
      continue;
    }
    if (pending) await pending;
    if (res.destroyed) return;
    // The callback runs once the socket is done with the bytes (on error too).
    pending = res.write(out, () => reader.release(out)) ? undefined : drained(res);
  }
  await pending;
}

/** `since`/`until`: Unix seconds with an optional fraction, as nanoseconds. */
function toNs(v: string | undefined, name: string): bigint | undefined {
  if (v === undefined || v === '0') return undefined;
  const m = /^(\d+)(?:\.(\d{1,9}))?$/.exec(v);
  if (!m) throw invalidArgument(`invalid value for "${name}": ${v}`);
  return BigInt(m[1]!) * 1_000_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
}

async function streamLogs(ctx: RequestContext, containers: ContainerService): Promise<void> {
  const q = ctx.query;
  const stdout = queryBool(q, 'stdout');
  const stderr = queryBool(q, 'stderr');
  if (!stdout && !stderr) throw invalidArgument("must specify at least one of 'stdout' or 'stderr'");
  const { container: c, reader } = containers.logs(ctx.params.id!);
  const follow = queryBool(q, 'follow');
  const timestamps = queryBool(q, 'timestamps');
  const since = toNs(queryString(q, 'since'), 'since');
  const until = toNs(queryString(q, 'until'), 'until');
  const tailRaw = queryString(q, 'tail') ?? 'all';
  let tail = -1;
  if (tailRaw !== 'all') {
    if (!/^-?\d+$/.test(tailRaw)) throw invalidArgument(`invalid value for "tail": ${tailRaw}`);
    tail = Math.max(-1, Number(tailRaw));
  }
  const tty = !!c.config.Tty;
  const res = ctx.res;
  res.writeHead(200, { 'Content-Type': streamContentType(tty, ctx.version, versionAtLeast) });
  res.flushHeaders();

  const abort = new AbortController();
  res.on('close', () => abort.abort());
  const exited = follow && isRunningLike(c.state) ? containers.waiters.add(c.id, 'next-exit') : undefined;
  const wanted = (rec: LogRecord) =>
    (rec.stream === 'stdout' ? stdout : stderr) && (since === undefined || rec.timeNs > since) && (until === undefined || rec.timeNs <= until);

  // A batch goes out in one write. Consecutive records of the same stream share one frame: frame
  // boundaries carry no meaning for clients, and fewer frames make the client's demultiplexing cheap.
  const write = async (recs: LogRecord[]) => {
    const parts: Buffer[] = [];
    let frame: { header: number; start: number } | undefined;
    const close = () => {
      if (frame && !tty) {
        const type = frame.header === 1 ? StreamType.Stdout : StreamType.Stderr;
        parts.splice(frame.start, 0, frameHeader(type, parts.slice(frame.start).reduce((n, b) => n + b.length, 0)));
      }
      frame = undefined;
    };
    for (const rec of recs) {
      if (rec.data.length === 0 && rec.partial && !timestamps) continue;
      const type = rec.stream === 'stdout' ? 1 : 2;
      if (frame?.header !== type) {
        close();
        frame = { header: type, start: parts.length };
      }
      if (timestamps) parts.push(Buffer.from(formatLogTimestamp(rec.timeNs) + ' '));
      parts.push(rec.data);
      if (!rec.partial) parts.push(NEWLINE);
    }
    close();
    if (parts.length === 0 || res.destroyed) return;
    if (!res.write(Buffer.concat(parts))) await drained(res);
  };

  try {
    if (tail < 0 && !timestamps && since === undefined && until === undefined) {
      const chunks = reader.chunks({ follow: !!exited, until: exited, signal: abort.signal });
      await copyLog(res, chunks, reader, { stdout, stderr, framed: !tty });
    } else if (tail >= 0) {
      // Read backwards from the newest file: only the last N lines are read and held.
      const ring = await reader.lastLines(tail, wanted, abort.signal);
      for (let i = 0; i < ring.length; i += WRITE_RECORDS) await write(ring.slice(i, i + WRITE_RECORDS));
      if (follow && exited) {
        // Continue after what was just read: records newer than the last one shown.
        const last = ring.length ? ring[ring.length - 1]!.timeNs : -1n;
        for await (const batch of reader.liveBatches({ follow: true, until: exited, signal: abort.signal })) {
          await write(batch.filter((rec) => rec.timeNs > last && wanted(rec)));
        }
      }
    } else {
      for await (const batch of reader.batches({ follow: !!exited, until: exited, signal: abort.signal })) {
        await write(batch.filter(wanted));
        if (until !== undefined && batch[batch.length - 1]!.timeNs > until) break;
      }
    }
  } catch (err) {
    if (!abort.signal.aborted && !tty && !res.destroyed) writeFrame(res, StreamType.SystemErr, `Error grabbing logs: ${(err as Error).message}\n`);
  }
  res.end();
}

const NEWLINE = Buffer.from('\n');
