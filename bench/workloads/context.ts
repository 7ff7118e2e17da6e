import type { Engine } from '../engines/engine.js';
import type { Options } from '../lib/options.js';
import type { MetricDef, Recorder } from '../lib/recorder.js';
import { withTimeout } from '../lib/timing.js';

/** What every workload gets, and the loop that takes turns between engines. */

export interface Ctx {
  engines: Engine[];
  rec: Recorder;
  opts: Options;
  /** Image references in the local registry. */
  refs: { busybox: string; big: string };
  /** The registry pushes go to (`host:port`) and its storage dir, emptied before each push. */
  pushRegistry: { host: string; storage: string };
  /** The busybox layer (gzip tar) the registry serves, for the crun floor's bundle. */
  busyboxLayerPath: string;
  /** A temp dir of the suite's own. */
  tmp: string;
  log(msg: string): void;
}

export interface Workload {
  id: number;
  name: string;
  /** The metrics it records (titles may depend on the options). */
  metrics(opts: Options): MetricDef[];
  run(ctx: Ctx): Promise<void>;
}

export function errorText(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.split('\n')[0]!.slice(0, 300);
}

/**
 * Runs `fn` `iterations` times on every engine, one engine after another within an iteration and
 * starting with a different engine each time, so drift on the machine (caches, other load) spreads
 * evenly. The first failure of an engine marks `metrics` Errored for it and drops it from the loop.
 * `warmup` untimed rounds go first; `fn` records its own samples. Returns the engines that never failed.
 */
export async function alternate(
  ctx: Ctx,
  metrics: string[],
  iterations: number,
  fn: (engine: Engine, i: number, warmup: boolean) => Promise<void>,
  o: { warmup?: number; timeoutMs?: number; engines?: Engine[] } = {},
): Promise<Engine[]> {
  const engines = [...(o.engines ?? ctx.engines)];
  const failed = new Set<string>();
  const warmup = o.warmup ?? 0;
  for (let i = 0; i < warmup + iterations; i++) {
    const turn = engines.map((_, k) => engines[(k + i) % engines.length]!);
    for (const engine of turn) {
      if (failed.has(engine.name)) continue;
      try {
        await withTimeout(`${metrics[0]} on ${engine.name}`, o.timeoutMs ?? 300_000, fn(engine, i - warmup, i < warmup));
      } catch (err) {
        failed.add(engine.name);
        const msg = errorText(err);
        ctx.log(`  ${engine.name}: Errored: ${msg}`);
        for (const m of metrics) ctx.rec.error(m, engine.name, msg);
      }
    }
  }
  return engines.filter((e) => !failed.has(e.name));
}

/** Runs `fn` once per engine in turn, with the same error handling as alternate(). */
export function eachEngine(
  ctx: Ctx,
  metrics: string[],
  fn: (engine: Engine) => Promise<void>,
  o: { timeoutMs?: number; engines?: Engine[] } = {},
): Promise<Engine[]> {
  return alternate(ctx, metrics, 1, (e) => fn(e), { timeoutMs: o.timeoutMs ?? 900_000, engines: o.engines });
}

/** The container's id once a CLI `run -d`, `create` or `commit` printed it. */
export function printedId(stdout: string): string {
  const id = stdout.trim().split('\n').pop()?.trim() ?? '';
  if (!/^(sha256:)?[0-9a-f]{12,64}$/.test(id)) throw new Error(`expected an id on stdout, got ${JSON.stringify(stdout.slice(0, 200))}`);
  return id;
}

export function cliFailure(args: string[], r: { code: number; stderr: string; stdout: string }): Error {
  return new Error(`docker ${args.join(' ')}: exit ${r.code}: ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ').slice(0, 300)}`);
}
