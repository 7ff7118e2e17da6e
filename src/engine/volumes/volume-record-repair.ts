/**
 * A stored volume row read back as a usable record. Rows are written by this engine, but a database
 * edited by hand or damaged must not keep the daemon from starting, nor lose the volume's data: the
 * volume keeps its name (its directory is found by it), and fields of the wrong type read as unset.
 */
import type { StoredVolume } from '../../state/volume-records.js';
import type { VolumeRecord } from './volume-model.js';

const isStringMap = (v: unknown): v is Record<string, string> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string');

/** The record, and what was wrong with the row ('' when nothing was). */
export function repairVolumeRow(row: StoredVolume): { volume: VolumeRecord; problem: string } {
  const d = (typeof row.data === 'object' && row.data !== null ? row.data : {}) as Partial<Record<keyof VolumeRecord, unknown>>;
  const problems: string[] = [];
  if (row.unreadable !== undefined) problems.push(`unreadable: ${row.unreadable}`);
  const field = <T>(key: keyof VolumeRecord, ok: (v: unknown) => v is T, fallback: T): T => {
    if (ok(d[key])) return d[key] as T;
    if (row.unreadable === undefined && d[key] !== undefined) problems.push(`${key} of the wrong type`);
    return fallback;
  };
  const createdAt = field('createdAt', (v): v is string => typeof v === 'string' && !Number.isNaN(Date.parse(v)), new Date(row.createdAt).toISOString().replace(/\.\d+Z$/, 'Z'));
  const labels = field('labels', (v): v is Record<string, string> | null => v === null || isStringMap(v), null);
  const options = field('options', (v): v is Record<string, string> | null => v === null || isStringMap(v), null);
  if (d.name !== undefined && d.name !== row.name) problems.push('a name unlike its row');
  if (d.driver !== undefined && d.driver !== 'local') problems.push(`driver ${JSON.stringify(d.driver)}`);
  return { volume: { name: row.name, driver: 'local', createdAt, labels, options }, problem: problems.join('; ') };
}
