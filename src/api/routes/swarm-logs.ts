/**
 * GET /services/{id}/logs and /tasks/{id}/logs: the logs of the tasks' containers, each line carrying
 * the task context (`details`) the CLI reads to print `service.slot.task@node | line`. Without follow
 * the containers' logs are merged by time, one record per source in memory; with follow every task
 * container is followed, including those of tasks that start later.
 */
import type { Router } from '../router.js';
import { queryBool, queryString, type RequestContext } from '../request.js';
import { invalidArgument } from '../../lib/errors.js';
import type { ContainerService } from '../../engine/containers/container-service.js';
import type { SwarmService } from '../../engine/swarm/swarm.js';
import { isRunningLike } from '../../engine/containers/container-model.js';
import type { TaskRecord } from '../../engine/swarm/swarm-model.js';
import { formatLogTimestamp, type ContainerLogReader, type LogRecord } from '../../engine/containers/log-reader.js';
import { StreamType, writeFrame, streamContentType } from '../stdcopy.js';
import { versionAtLeast } from '../api-version.js';

export function swarmLogRoutes(r: Router, swarm: SwarmService, containers: ContainerService): void {
  r.on('GET', '/services/:id/logs', (ctx) => {
    const s = swarm.service(ctx.params.id!);
    return streamLogs(ctx, swarm, containers, {
      tty: !!s.spec.TaskTemplate?.ContainerSpec?.TTY,
      tasks: () => swarm.store.tasksOf(s.id),
      serviceId: s.id,
    });
  });
  r.on('GET', '/tasks/:id/logs', (ctx) => {
    const t = swarm.task(ctx.params.id!);
    return streamLogs(ctx, swarm, containers, { tty: !!t.spec.ContainerSpec?.TTY, tasks: () => (swarm.store.tasks.has(t.id) ? [t] : []) });
  });
}

interface Source {
  task: TaskRecord;
  log: ContainerLogReader;
  containerId: string;
}

async function streamLogs(
  ctx: RequestContext,
  swarm: SwarmService,
  containers: ContainerService,
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

  const wanted = (rec: LogRecord) => (rec.stream === 'stdout' ? stdout : stderr) && (since === undefined || rec.timeNs > since);
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
  const sourceOf = (t: TaskRecord): Source | undefined => {
    const c = t.status.containerId ? containers.find(t.status.containerId) : undefined;
    return c ? { task: t, log: containers.logReaderOf(c), containerId: c.id } : undefined;
  };

  try {
    const sources = opts.tasks().map(sourceOf).filter((s): s is Source => s !== undefined);
    if (!follow) {
      await mergeByTime(sources, tail, wanted, emit, abort.signal);
    } else {
      const followed = new Set<string>();
      const running: Promise<void>[] = [];
      const start = (src: Source, fromStart: boolean) => {
        if (followed.has(src.containerId)) return;
        followed.add(src.containerId);
        running.push(followOne(src, fromStart ? -1 : tail, containers, wanted, emit, abort.signal));
      };
      for (const src of sources) start(src, false);
      // Tasks that start later are followed from their first line.
      const stop = swarm.runner.onTaskChange((t) => {
        if (t.serviceId !== opts.serviceId || t.status.state !== 'running') return;
        const src = sourceOf(t);
        if (src) start(src, true);
      });
      await new Promise<void>((resolve) => (abort.signal.aborted ? resolve() : abort.signal.addEventListener('abort', () => resolve())));
      stop();
      await Promise.allSettled(running);
    }
  } catch (err) {
    if (!abort.signal.aborted && !opts.tty && !res.destroyed) writeFrame(res, StreamType.SystemErr, `Error grabbing logs: ${(err as Error).message}\n`);
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

/** The last `tail` wanted records of one log (all with -1), holding only those in memory. */
async function* tailRecords(log: ContainerLogReader, tail: number, wanted: (r: LogRecord) => boolean, signal: AbortSignal): AsyncGenerator<LogRecord> {
  if (tail < 0) {
    for await (const rec of log.liveRecords({ signal })) if (wanted(rec)) yield rec;
    return;
  }
  const ring: LogRecord[] = [];
  for await (const rec of log.liveRecords({ signal })) {
    if (!wanted(rec)) continue;
    ring.push(rec);
    if (ring.length > tail) ring.shift();
  }
  yield* ring;
}

/** A k-way merge of the sources' records by time. */
async function mergeByTime(sources: Source[], tail: number, wanted: (r: LogRecord) => boolean, emit: (s: Source, r: LogRecord) => Promise<void>, signal: AbortSignal): Promise<void> {
  const heads = await Promise.all(
    sources.map(async (src) => {
      const it = tailRecords(src.log, tail, wanted, signal);
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

/** One container's log: the tail, then whatever it writes until it exits or the client leaves. */
async function followOne(src: Source, tail: number, containers: ContainerService, wanted: (r: LogRecord) => boolean, emit: (s: Source, r: LogRecord) => Promise<void>, signal: AbortSignal): Promise<void> {
  let last = -1n;
  for await (const rec of tailRecords(src.log, tail, wanted, signal)) {
    await emit(src, rec);
    last = rec.timeNs;
  }
  const c = containers.find(src.containerId);
  if (!c || !isRunningLike(c.state) || signal.aborted) return;
  const exited = containers.waiters.add(c.id, 'next-exit');
  for await (const rec of src.log.liveRecords({ follow: true, until: exited, signal })) {
    if (rec.timeNs > last && wanted(rec)) await emit(src, rec);
  }
}

const NEWLINE = Buffer.from('\n');
