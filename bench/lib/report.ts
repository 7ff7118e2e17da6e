import type { MetricDef, Recorder, Unit } from './recorder.js';

/**
 * The run as a Markdown table (paste-ready for RESULTS.md): per metric and engine the median with
 * min–max, each other engine's median divided by Berth's, and the goal against dockerd.
 */

export function formatValue(unit: Unit, v: number): string {
  switch (unit) {
    case 's':
      return v < 1 ? v.toFixed(3) : v < 10 ? v.toFixed(2) : v.toFixed(1);
    case 'ms':
      return v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0);
    case 'req/s':
      return v < 100 ? v.toFixed(1) : Math.round(v).toString();
    case 'MiB':
      return v.toFixed(1);
  }
}

function cellText(rec: Recorder, def: MetricDef, engine: string): string {
  const c = rec.cells.get(def.id)?.get(engine);
  const s = rec.summary(def.id, engine);
  if (!c || (!s && !c.error)) return '—';
  if (!s) return 'Errored';
  const text = s.n > 1 ? `${formatValue(def.unit, s.median)} (${formatValue(def.unit, s.min)}–${formatValue(def.unit, s.max)})` : formatValue(def.unit, s.median);
  return c.error ? `${text} Errored after ${s.n}` : text;
}

function ratioText(rec: Recorder, def: MetricDef, engine: string): string {
  const b = rec.summary(def.id, 'berth');
  const o = rec.summary(def.id, engine);
  if (!b || !o || b.median === 0) return '—';
  return `${(o.median / b.median).toFixed(2)}×`;
}

function goalText(def: MetricDef): string {
  if (!def.goal) return '';
  return `${def.better === 'lower' ? '≤' : '≥'} ${def.goal.factor} × dockerd`;
}

function metText(rec: Recorder, def: MetricDef): string {
  if (!def.goal) return '';
  const b = rec.summary(def.id, 'berth');
  const d = rec.summary(def.id, 'dockerd');
  if (!b || !d) return '—';
  const ok = def.better === 'lower' ? b.median <= def.goal.factor * d.median : b.median >= def.goal.factor * d.median;
  return ok ? 'yes' : 'no';
}

export function renderTable(rec: Recorder, engines: string[], floorMetric = 'crun-run'): string {
  const others = engines.filter((e) => e !== 'berth');
  const head = ['#', 'workload', 'unit', 'Berth', ...others, ...others.map((o) => `${o} ÷ Berth`), 'goal', 'met'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  const defs = [...rec.metrics.values()].filter((d) => d.id !== floorMetric && !d.floor && rec.cells.has(d.id));
  for (const def of defs) {
    const row = [
      String(def.workload),
      def.title,
      def.unit,
      cellText(rec, def, 'berth'),
      ...others.map((o) => cellText(rec, def, o)),
      ...others.map((o) => ratioText(rec, def, o)),
      goalText(def),
      metText(rec, def),
    ];
    lines.push(`| ${row.join(' | ')} |`);
  }
  const floor = rec.metrics.get(floorMetric);
  if (floor && rec.cells.has(floorMetric)) {
    lines.push('', `Floor (workload 9): ${floor.title}: ${cellText(rec, floor, 'crun')} ${floor.unit}`);
  }
  for (const def of [...rec.metrics.values()].filter((d) => d.floor && rec.cells.has(d.id))) {
    lines.push('', `Floor (workload ${def.workload}): ${def.title}: ${cellText(rec, def, def.floor!)} ${def.unit}`);
  }
  return lines.join('\n');
}

/** Errors and notes under the table, one line each. */
export function renderNotes(rec: Recorder): string {
  const out: string[] = [];
  for (const [id, byEngine] of rec.cells) {
    for (const [engine, c] of byEngine) {
      if (c.error) out.push(`- ${id} on ${engine}: Errored: ${c.error}`);
      for (const n of c.notes) out.push(`- ${id} on ${engine}: ${n}`);
    }
  }
  return out.join('\n');
}
