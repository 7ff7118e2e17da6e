/**
 * A task's log records, wherever the task runs. On its own node they come from the container's log
 * file; a manager asks the task's node for them over the swarm port (mutual TLS: both sides show a
 * node certificate of the cluster CA), as one JSON line per record, streamed as they are read.
 */
import { request } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createInterface } from 'node:readline';
import type { ContainerService } from '../containers/container-service.js';
import { isRunningLike } from '../containers/container-model.js';
import type { ContainerLogReader, LogRecord } from '../containers/log-reader.js';
import { errorMessage, unavailable } from '../../lib/errors.js';
import { decodePathPart, replyJson, splitRemote } from './cluster/peer-tls.js';
import type { TaskLogQuery } from './swarm-model.js';

export const wantedBy = (q: TaskLogQuery) => (rec: LogRecord) => (rec.stream === 'stdout' ? q.stdout : q.stderr) && (q.since === undefined || rec.timeNs > q.since);

/**
 * The last `tail` wanted records of one log (all with -1), holding only those in memory; `seen.last`
 * ends as the time of the last record read, so that following goes on after it (even with tail 0).
 */
export async function* tailRecords(log: ContainerLogReader, tail: number, wanted: (r: LogRecord) => boolean, signal: AbortSignal, seen = { last: -1n }): AsyncGenerator<LogRecord> {
  if (tail < 0) {
    for await (const rec of log.liveRecords({ signal })) {
      seen.last = rec.timeNs;
      if (wanted(rec)) yield rec;
    }
    return;
  }
  const ring: LogRecord[] = [];
  for await (const rec of log.liveRecords({ signal })) {
    seen.last = rec.timeNs;
    if (!wanted(rec)) continue;
    ring.push(rec);
    if (ring.length > tail) ring.shift();
  }
  yield* ring;
}

/** One local container's records: the tail, then (following) whatever it writes until it exits or the reader leaves. */
export async function* containerRecords(containers: ContainerService, containerId: string, q: TaskLogQuery, signal: AbortSignal): AsyncGenerator<LogRecord> {
  const c = containers.find(containerId);
  if (!c) return;
  const log = containers.logReaderOf(c);
  const wanted = wantedBy(q);
  const seen = { last: -1n };
  yield* tailRecords(log, q.tail, wanted, signal, seen);
  if (!q.follow) return;
  const now = containers.find(containerId);
  if (!now || !isRunningLike(now.state) || signal.aborted) return;
  const exited = containers.waiters.add(now.id, 'next-exit');
  for await (const rec of log.liveRecords({ follow: true, until: exited, signal })) {
    if (rec.timeNs > seen.last && wanted(rec)) yield rec;
  }
}

interface WireRecord {
  t: string;
  s: 'stdout' | 'stderr';
  d: string;
  p?: 1;
}

const queryOf = (q: TaskLogQuery) =>
  new URLSearchParams({ stdout: q.stdout ? '1' : '0', stderr: q.stderr ? '1' : '0', follow: q.follow ? '1' : '0', tail: String(q.tail), ...(q.since !== undefined ? { since: String(q.since) } : {}) });

function parseQuery(search: URLSearchParams): TaskLogQuery {
  const since = search.get('since');
  return {
    stdout: search.get('stdout') === '1',
    stderr: search.get('stderr') === '1',
    follow: search.get('follow') === '1',
    tail: Math.max(-1, Number(search.get('tail') ?? -1) || 0),
    ...(since && /^\d+$/.test(since) ? { since: BigInt(since) } : {}),
  };
}

/**
 * The node's side: `GET /task-logs/<task id>` on the swarm port, for current managers only:
 * swarm-peers.ts checks the peer's certificate (of the cluster CA, signed for a manager) and record
 * before. Records are written as they are read; a slow reader pauses the reading.
 */
export async function serveTaskLogs(req: IncomingMessage, res: ServerResponse, containerOf: (taskId: string) => string | undefined, containers: ContainerService): Promise<void> {
  const url = new URL(req.url ?? '/', 'https://node');
  const taskId = decodePathPart(url.pathname.slice('/task-logs/'.length));
  if (taskId === undefined) return replyJson(res, 400, { message: 'malformed task id' });
  const containerId = containerOf(taskId);
  if (!containerId) return replyJson(res, 404, { message: `task ${taskId} has no container on this node` });
  const abort = new AbortController();
  res.on('close', () => abort.abort());
  res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
  res.flushHeaders();
  try {
    for await (const rec of containerRecords(containers, containerId, parseQuery(url.searchParams), abort.signal)) {
      const wire: WireRecord = { t: String(rec.timeNs), s: rec.stream, d: rec.data.toString('base64'), ...(rec.partial ? { p: 1 as const } : {}) };
      if (!res.write(JSON.stringify(wire) + '\n') && !res.destroyed) await new Promise((r) => res.once('drain', r));
    }
  } catch {
    // The reader left or the log went away: the stream just ends.
  }
  res.end();
}

/** The manager's side: the records of a task on the node at `addr` (host:port of its swarm port). */
export async function* remoteTaskRecords(addr: string, tls: { ca: string; cert: string; key: string }, taskId: string, q: TaskLogQuery, signal: AbortSignal): AsyncGenerator<LogRecord> {
  const { host, port } = splitRemote(addr);
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request({
      host, port, method: 'GET', path: `/task-logs/${encodeURIComponent(taskId)}?${queryOf(q)}`,
      ca: tls.ca, cert: tls.cert, key: tls.key, signal,
      // Node certificates name the node's address, not a host name: the CA's signature is what counts.
      checkServerIdentity: () => undefined,
    }, resolve);
    req.on('error', (err) => reject(unavailable(`could not reach the node at ${addr} for the logs of task ${taskId}: ${errorMessage(err)}`)));
    req.end();
  });
  if (res.statusCode !== 200) {
    res.resume();
    if (res.statusCode === 404) return;
    throw unavailable(`the node at ${addr} refused the logs of task ${taskId} (${res.statusCode})`);
  }
  try {
    for await (const line of createInterface({ input: res, crlfDelay: Infinity })) {
      if (!line) continue;
      const w = JSON.parse(line) as WireRecord;
      const timeNs = BigInt(w.t);
      const data = Buffer.from(w.d, 'base64');
      yield { time: new Date(Number(timeNs / 1_000_000n)), timeNs, stream: w.s, partial: !!w.p, data, text: data.toString('utf8') };
    }
  } finally {
    res.destroy();
  }
}
