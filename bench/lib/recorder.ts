import { summarize, type Summary } from './stats.js';

/**
 * The figures of one run: for every metric and engine, the samples taken, or the error that stopped
 * the engine on that workload ("Errored" in the table), plus free-form notes.
 */

export type Unit = 's' | 'ms' | 'req/s' | 'MiB';

export interface MetricDef {
  id: string;
  workload: number;
  title: string;
  unit: Unit;
  better: 'lower' | 'higher';
  /** Berth's median against dockerd's: at most `factor` × (lower is better) or at least (higher). */
  goal?: { factor: number; dockerdReference: string };
  /** Not an engine's figure: recorded under this name and shown as a floor line under the table. */
  floor?: string;
}

export interface Cell {
  samples: number[];
  error?: string;
  notes: string[];
}

export class Recorder {
  readonly cells = new Map<string, Map<string, Cell>>();
  readonly metrics = new Map<string, MetricDef>();

  define(defs: MetricDef[]): void {
    for (const d of defs) this.metrics.set(d.id, d);
  }

  cell(metric: string, engine: string): Cell {
    if (!this.metrics.has(metric)) throw new Error(`unknown metric ${metric}`);
    let byEngine = this.cells.get(metric);
    if (!byEngine) this.cells.set(metric, (byEngine = new Map()));
    let c = byEngine.get(engine);
    if (!c) byEngine.set(engine, (c = { samples: [], notes: [] }));
    return c;
  }

  sample(metric: string, engine: string, value: number): void {
    this.cell(metric, engine).samples.push(value);
  }

  error(metric: string, engine: string, message: string): void {
    const c = this.cell(metric, engine);
    c.error ??= message;
  }

  note(metric: string, engine: string, text: string): void {
    const c = this.cell(metric, engine);
    if (!c.notes.includes(text)) c.notes.push(text);
  }

  summary(metric: string, engine: string): Summary | undefined {
    return summarize(this.cells.get(metric)?.get(engine)?.samples ?? []);
  }

  toJSON(): unknown {
    const out: Record<string, unknown> = {};
    for (const [id, def] of this.metrics) {
      const engines: Record<string, unknown> = {};
      for (const [engine, c] of this.cells.get(id) ?? []) {
        engines[engine] = { samples: c.samples, summary: summarize(c.samples) ?? null, error: c.error ?? null, notes: c.notes };
      }
      out[id] = { ...def, engines };
    }
    return out;
  }
}
