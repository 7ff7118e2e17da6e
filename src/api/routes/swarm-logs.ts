/**
 * GET /services/{id}/logs and /tasks/{id}/logs: the logs of the tasks' containers, each line carrying
 * the task context (`details`) the CLI reads to print `service.slot.task@node | line`. Without follow
 * the containers' logs are merged by time, one record per source in memory; with follow every task
 * container is followed, including those of tasks that start later.
 */
import type { Router } from '../router.js';
import { queryBool, queryString, type RequestContext } from '../request.js';
import { invalidArgument } from '../../lib/errors.js';
import type { SwarmService } from '../../engine/swarm/swarm.js';
import type { TaskLogQuery, TaskRecord } from '../../engine/swarm/swarm-model.js';
import { formatLogTimestamp, type LogRecord } from '../../engine/containers/log-reader.js';
import { StreamType, writeFrame, streamContentType } from '../stdcopy.js';
import { versionAtLeast } from '../api-version.js';

export function swarmLogRoutes(r: Router, swarm: SwarmService): void {
  r.on('GET', '/services/:id/logs', async (ctx) => {
    const s = await swarm.service(ctx.params.id!);
    return streamLogs(ctx, swarm, {
      tty: !!s.spec.TaskTemplate?.ContainerSpec?.TTY,
      tasks: () => swarm.tasksOfService(s.id),
      serviceId: s.id,
    });
  });
  r.on('GET', '/tasks/:id/logs', async (ctx) => {
    const t = await swarm.task(ctx.params.id!);
    return streamLogs(ctx, swarm, { tty: !!t.spec.ContainerSpec?.TTY, tasks: () => (swarm.hasTask(t.id) ? [t] : []) });
  });
}

interface Source {
  task: TaskRecord;
  records: AsyncIterable<LogRecord>;
}

async function streamLogs(
  ctx: RequestContext,
  swarm: SwarmService,
  opts: { tty: boolean; tasks: () => TaskRecord[]; serviceId?: string },
): Promise<void> {
  const q = ctx.query;
  const stdout = queryBool(q, 'stdout');
  const stderr = queryBool(q, 'stderr');
  if (!stdout && !stderr) throw invalidArgument("must specify at least one of 'stdout' or 'stderr'");
  const follow = queryBool(q, 'follow');
  const timestamps = queryBool(q, 'timestamps');
  const details = queryBool(q, 'details');
  const sinceRaw = queryString(q, 'since');
  if (sinceRaw !== undefined && !/^\d+(\.\d{1,9})?$/.test(sinceRaw)) throw invalidArgument(`invalid value for "since": ${sinceRaw}`);
  const since = sinceRaw && sinceRaw !== '0' ? BigInt(sinceRaw.split('.')[0]!) * 1_000_000_000n + BigInt((sinceRaw.split('.')[1] ?? '').padEnd(9, '0')) : undefined;
  const tailRaw = queryString(q, 'tail') ?? 'all';
  if (tailRaw !== 'all' && !/^-?\d+$/.test(tailRaw)) throw invalidArgument(`invalid value for "tail": ${tailRaw}`);
  const tail = tailRaw === 'all' ? -1 : Math.max(-1, Number(tailRaw));

  const res = ctx.res;
  res.writeHead(200, { 'Content-Type': streamContentType(opts.tty, ctx.version, versionAtLeast) });
  res.flushHeaders();
  const abort = new AbortController();
  res.on('close', () => abort.abort());

  const query: TaskLogQuery = { stdout, stderr, follow, tail, ...(since !== undefined ? { since } : {}) };
  const emit = async (src: Source, rec: LogRecord) => {
    const parts: Buffer[] = [];
    if (timestamps) parts.push(Buffer.from(formatLogTimestamp(rec.timeNs) + ' '));
    if (details) parts.push(Buffer.from(contextDetails(src.task) + ' '));
    parts.push(rec.data);
    if (!rec.partial) parts.push(NEWLINE);
    const data = Buffer.concat(parts);
    const ok = opts.tty ? res.write(data) : writeFrame(res, rec.stream === 'stdout' ? StreamType.Stdout : StreamType.Stderr, data);
    if (!ok && !res.destroyed) await new Promise((r) => res.once('drain', r));
  };
  const failed = (err: unknown) => {
    if (!abort.signal.aborted && !opts.tty && !res.destroyed) writeFrame(res, StreamType.SystemErr, `Error grabbing logs: ${(err as Error).message}\n`);
  };
  // A node that cannot be reached ends its tasks' part with an error line; the others go on. Without
  // follow the error comes last: the CLI stops reading at the first one.
  const deferred: unknown[] = [];
  async function* guarded(records: AsyncIterable<LogRecord>): AsyncGenerator<LogRecord> {
    try {
      yield* records;
    } catch (err) {
      if (follow) failed(err);
      else deferred.push(err);
    }
  }
  const sourceOf = (t: TaskRecord, fromStart = false): Source | undefined => {
    const records = swarm.taskLogRecords(t, fromStart ? { ...query, tail: -1 } : query, abort.signal);
    return records ? { task: t, records: guarded(records) } : undefined;
  };

  try {
    const sources = opts.tasks().map((t) => sourceOf(t)).filter((s): s is Source => s !== undefined);
    if (!follow) {
      await mergeByTime(sources, emit, abort.signal);
      for (const err of deferred) failed(err);
    } else {
      const followed = new Set<string>();
      const running: Promise<void>[] = [];
      const start = (src: Source) => {
        if (followed.has(src.task.id + '/' + (src.task.status.containerId ?? ''))) return;
        followed.add(src.task.id + '/' + (src.task.status.containerId ?? ''));
        running.push(
          (async () => {
            for await (const rec of src.records) await emit(src, rec);
          })().catch(failed),
        );
      };
      for (const src of sources) start(src);
      // Tasks that start later are followed from their first line.
      const stop = swarm.onTaskChange((t) => {
        if (t.serviceId !== opts.serviceId || t.status.state !== 'running') return;
        const src = sourceOf(t, true);
        if (src) start(src);
      });
      await new Promise<void>((resolve) => (abort.signal.aborted ? resolve() : abort.signal.addEventListener('abort', () => resolve())));
      stop();
      await Promise.allSettled(running);
    }
  } catch (err) {
    failed(err);
  }
  res.end();
}

/** The task context the CLI parses: sorted `key=value` pairs, URL-query-escaped, comma-separated. */
function contextDetails(t: TaskRecord): string {
  const pairs: [string, string][] = [
    ['com.docker.swarm.node.id', t.nodeId],
    ['com.docker.swarm.service.id', t.serviceId],
    ['com.docker.swarm.task.id', t.id],
  ];
  return pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join(',');
}

/** A k-way merge of the sources' records by time. */
async function mergeByTime(sources: Source[], emit: (s: Source, r: LogRecord) => Promise<void>, signal: AbortSignal): Promise<void> {
  const heads = await Promise.all(
    sources.map(async (src) => {
      const it = src.records[Symbol.asyncIterator]();
      const first = await it.next();
      return { src, it, rec: first.done ? undefined : first.value };
    }),
  );
  for (;;) {
    let best: (typeof heads)[number] | undefined;
    for (const h of heads) if (h.rec && (!best || h.rec.timeNs < best.rec!.timeNs)) best = h;
    if (!best || signal.aborted) break;
    await emit(best.src, best.rec!);
    const next = await best.it.next();
    best.rec = next.done ? undefined : next.value;
  }
}

const NEWLINE = Buffer.from('\n');
