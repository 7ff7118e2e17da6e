/**
 * Preloaded into a berthd by bench/tools/build-cached.ts (`node --import <this> bin/berthd ...`), never
 * by the daemon itself: records, for each POST /build, when the request came, when its first and last
 * body chunks were read and how big they were, when the first and last bytes of the answer were
 * written and when it finished; V8's GC events; the event loop's delay. Served as one JSON document
 * (then reset) to whoever connects to $BUILD_PROBE_SOCK.
 */
import { createServer, Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { isMainThread } from 'node:worker_threads';
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';

const now = () => performance.timeOrigin + performance.now();
let builds = [];
let gcs = [];
const eld = monitorEventLoopDelay({ resolution: 1 });
eld.enable();

new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcs.push({ at: performance.timeOrigin + e.startTime, ms: e.duration, kind: e.detail?.kind ?? e.kind });
}).observe({ entryTypes: ['gc'] });

const emit = Server.prototype.emit;
Server.prototype.emit = function (event, req, res) {
  if (event === 'request' && req.method === 'POST' && /\/build\b/.test(req.url ?? '') && !/prune/.test(req.url ?? '')) {
    const b = { url: req.url, te: req.headers['transfer-encoding'] ?? '', cl: req.headers['content-length'] ?? '', at: now(), firstData: 0, lastData: 0, chunks: 0, bytes: 0, maxChunk: 0, end: 0, firstWrite: 0, lastWrite: 0, writes: 0, finish: 0, closed: 0 };
    builds.push(b);
    // Seen through emit, not listeners: a 'data' listener would set the body flowing before the route reads it.
    const reqEmit = req.emit;
    req.emit = function (ev, c) {
      if (ev === 'data') {
        const t = now();
        if (!b.firstData) b.firstData = t;
        b.lastData = t;
        b.chunks++;
        b.bytes += c.length;
        if (c.length > b.maxChunk) b.maxChunk = c.length;
      } else if (ev === 'end') b.end = now();
      return reqEmit.apply(this, arguments);
    };
    const write = res.write;
    res.write = function (...a) {
      const t = now();
      if (!b.firstWrite) b.firstWrite = t;
      b.lastWrite = t;
      b.writes++;
      return write.apply(this, a);
    };
    res.on('finish', () => (b.finish = now()));
    res.on('close', () => (b.closed = now()));
  }
  return emit.apply(this, arguments);
};

// Only berthd's main thread serves it: its workers and forks get the flag too, not the variable.
const sock = isMainThread ? process.env.BUILD_PROBE_SOCK : undefined;
delete process.env.BUILD_PROBE_SOCK;
if (sock) {
  const srv = createNetServer((c) => {
    const doc = { builds, gcs, eld: { max: eld.max / 1e6, mean: eld.mean / 1e6, p99: eld.percentile(99) / 1e6 }, mem: process.memoryUsage() };
    builds = [];
    gcs = [];
    eld.reset();
    c.end(JSON.stringify(doc));
  });
  srv.listen(sock);
  srv.unref();
}
void createServer;
