/**
 * Run as its own process by workload 10: GET /containers/json?all=1 over the engine's socket, one
 * request at a time every 50 ms for the given seconds; prints {median, p90, samples} in ms as JSON.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';

const [socketPath, seconds] = [process.argv[2]!, Number(process.argv[3])];
const lat: number[] = [];
const until = Date.now() + seconds * 1000;
while (Date.now() < until) {
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    http.get({ socketPath, path: '/containers/json?all=1', headers: { host: 'docker' } }, (r) => {
      if (r.statusCode !== 200) reject(new Error(`GET /containers/json: ${r.statusCode}`));
      r.resume();
      r.on('end', resolve);
    }).on('error', reject);
  });
  lat.push(performance.now() - t0);
  await new Promise((r) => setTimeout(r, 50));
}
lat.sort((a, b) => a - b);
const at = (q: number) => lat[Math.min(lat.length - 1, Math.floor(lat.length * q))]!;
process.stdout.write(JSON.stringify({ median: at(0.5), p90: at(0.9), samples: lat.length }));
