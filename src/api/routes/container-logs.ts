/** GET /containers/{id}/logs: conmon's log file, framed when the container has no TTY. */
import type { Router } from '../router.js';
import { queryBool, queryString, type RequestContext } from '../request.js';
import type { ContainerService } from '../../engine/containers.js';
import { isRunningLike } from '../../engine/container-model.js';
import { invalidArgument } from '../../lib/errors.js';
import { readLogRecords, formatRfc3339Nano, type LogRecord } from '../../runtime/log-file.js';
import { StreamType, writeFrame, streamContentType } from '../stdcopy.js';
import { versionAtLeast } from '../api-version.js';
import { logFiles, logLimits } from '../../engine/log-rotation.js';

export function containerLogRoutes(r: Router, containers: ContainerService, defaultLogOpts: Record<string, string>): void {
  r.on('GET', '/containers/:id/logs', (ctx) => streamLogs(ctx, containers, defaultLogOpts));
}

/** Rotated files first (oldest first), then the live file, followed until `until` settles. */
async function* allRecords(path: string, maxFiles: number, opts: { follow: boolean; until?: Promise<unknown>; signal: AbortSignal }): AsyncGenerator<LogRecord> {
  const files = logFiles(path, maxFiles);
  for (const f of files.slice(0, -1)) yield* readLogRecords(f, { signal: opts.signal });
  yield* readLogRecords(path, opts);
}

/** `since`/`until`: Unix seconds with an optional fraction, as nanoseconds. */
function toNs(v: string | undefined, name: string): bigint | undefined {
  if (v === undefined || v === '0') return undefined;
  const m = /^(\d+)(?:\.(\d{1,9}))?$/.exec(v);
  if (!m) throw invalidArgument(`invalid value for "${name}": ${v}`);
  return BigInt(m[1]!) * 1_000_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
}

async function streamLogs(ctx: RequestContext, containers: ContainerService, defaultLogOpts: Record<string, string>): Promise<void> {
  const q = ctx.query;
  const stdout = queryBool(q, 'stdout');
  const stderr = queryBool(q, 'stderr');
  if (!stdout && !stderr) throw invalidArgument("must specify at least one of 'stdout' or 'stderr'");
  const c = containers.get(ctx.params.id!);
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
  const maxFiles = logLimits(c.hostConfig.LogConfig?.Config, defaultLogOpts)?.maxFiles ?? 1;
  const res = ctx.res;
  res.writeHead(200, { 'Content-Type': streamContentType(tty, ctx.version, versionAtLeast) });
  res.flushHeaders();

  const abort = new AbortController();
  res.on('close', () => abort.abort());
  const exited = follow && isRunningLike(c.state) ? containers.waiters.add(c.id, 'next-exit') : undefined;
  const wanted = (rec: LogRecord) =>
    (rec.stream === 'stdout' ? stdout : stderr) && (since === undefined || rec.timeNs > since) && (until === undefined || rec.timeNs <= until);

  const emit = async (rec: LogRecord) => {
    let data = rec.partial ? rec.data : Buffer.concat([rec.data, NEWLINE]);
    if (timestamps) data = Buffer.concat([Buffer.from(formatRfc3339Nano(rec.timeNs) + ' '), data]);
    const ok = tty ? res.write(data) : writeFrame(res, rec.stream === 'stdout' ? StreamType.Stdout : StreamType.Stderr, data);
    if (!ok && !res.destroyed) await new Promise((r) => res.once('drain', r));
  };

  try {
    if (tail >= 0) {
      // Only the last N lines are held, never the whole log.
      const ring: LogRecord[] = [];
      for await (const rec of allRecords(c.logPath, maxFiles, { follow: false, signal: abort.signal })) {
        if (!wanted(rec)) continue;
        ring.push(rec);
        if (ring.length > tail) ring.shift();
      }
      for (const rec of ring) await emit(rec);
      if (follow && exited) {
        // Continue after what was just read: records newer than the last one shown.
        const last = ring.length ? ring[ring.length - 1]!.timeNs : -1n;
        for await (const rec of readLogRecords(c.logPath, { follow: true, until: exited, signal: abort.signal })) {
          if (rec.timeNs > last && wanted(rec)) await emit(rec);
        }
      }
    } else {
      for await (const rec of allRecords(c.logPath, maxFiles, { follow: !!exited, until: exited, signal: abort.signal })) {
        if (wanted(rec)) await emit(rec);
        if (until !== undefined && rec.timeNs > until) break;
      }
    }
  } catch (err) {
    if (!abort.signal.aborted && !tty && !res.destroyed) writeFrame(res, StreamType.SystemErr, `Error grabbing logs: ${(err as Error).message}\n`);
  }
  res.end();
}

const NEWLINE = Buffer.from('\n');
