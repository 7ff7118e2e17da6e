/**
 * Records stored before requests were checked against the API schema (or by a berthd with a bug)
 * may hold values of the wrong type, e.g. `HostConfig.NetworkMode: 5`. Each is read as if the bad
 * field had never been sent, so one such container cannot break listing or inspect for everyone.
 * Berth's own part of a record (state, network, paths) is rebuilt from what is still readable; a
 * container whose state is lost reads as `dead` with an error saying so, as dockerd marks a
 * container it cannot restore, so that `docker rm` can remove it.
 */
import { join } from 'node:path';
import { repairToDefinition } from '../../lib/engine-api-schema.js';
import { log } from '../../lib/log.js';
import { ZERO_TIME, type ContainerRecord, type ContainerState } from './container-model.js';

const STATUSES: ContainerState['status'][] = ['created', 'running', 'paused', 'restarting', 'removing', 'exited', 'dead'];

/** The row a record came from: its columns are still right when the JSON is not. */
export interface StoredRow {
  id: string;
  name: string;
  createdAt: number;
  /** The JSON text could not be parsed (the message), or undefined. */
  unreadable?: string;
}

/**
 * The record of a stored row, repaired in place where possible: Berth's own fields rebuilt from the
 * row and defaults (logged as one warning), then the client-given parts as below.
 */
export function repairStoredRecord(data: unknown, row: StoredRow, containerDir: string, defaultRuntime: 'crun' | 'runc'): ContainerRecord {
  const rec = (isObject(data) ? data : {}) as Record<string, unknown>;
  const dropped: string[] = row.unreadable ? ['(the whole record)'] : [];
  const fix = (key: string, ok: (v: unknown) => boolean, value: () => unknown) => {
    if (ok(rec[key])) return;
    if (!row.unreadable) dropped.push(key);
    rec[key] = value();
  };
  const str = (v: unknown) => typeof v === 'string';
  fix('id', (v) => v === row.id, () => row.id);
  fix('name', (v) => v === row.name, () => row.name);
  fix('created', (v) => str(v) && !Number.isNaN(Date.parse(v as string)), () => new Date(row.createdAt).toISOString());
  fix('imageId', str, () => '');
  fix('runtime', (v) => v === 'crun' || v === 'runc', () => defaultRuntime);
  fix('restartCount', (v) => Number.isInteger(v), () => 0);
  fix('manuallyStopped', (v) => typeof v === 'boolean', () => false);
  for (const [key, file] of [['logPath', 'ctr.log'], ['hostnamePath', 'hostname'], ['hostsPath', 'hosts'], ['resolvConfPath', 'resolv.conf']] as const) {
    fix(key, (v) => str(v) && (v as string).startsWith(containerDir), () => join(containerDir, file));
  }
  if (rec.mountPoints !== undefined && !(Array.isArray(rec.mountPoints) && rec.mountPoints.every(isObject))) {
    dropped.push('mountPoints');
    delete rec.mountPoints;
  }
  if (rec.modeDisconnected !== undefined && typeof rec.modeDisconnected !== 'boolean') delete rec.modeDisconnected;
  const net = isObject(rec.network) ? rec.network : {};
  if (!isObject(rec.network) || !isObject(net.endpoints) || !isObject(net.ports) || !str(net.sandboxKey)) {
    dropped.push('network');
    rec.network = { endpoints: isObject(net.endpoints) ? net.endpoints : {}, ports: isObject(net.ports) ? net.ports : {}, sandboxKey: str(net.sandboxKey) ? net.sandboxKey : '' };
  }
  repairState(rec, dropped, row);
  const c = rec as unknown as ContainerRecord;
  if (dropped.length) log.warn('stored container record was damaged; repaired', { id: row.id, name: row.name, fields: dropped, error: row.unreadable });
  repairStoredContainer(c);
  return c;
}

function repairState(rec: Record<string, unknown>, dropped: string[], row: StoredRow): void {
  const s = isObject(rec.state) ? rec.state : undefined;
  if (!s || !STATUSES.includes(s.status as ContainerState['status'])) {
    if (!row.unreadable) dropped.push('state');
    const why = row.unreadable ? `the stored record of container ${row.id} was unreadable (${row.unreadable})` : `the stored state of container ${row.id} was unreadable`;
    rec.state = { status: 'dead', pid: 0, exitCode: 0, error: why, oomKilled: false, startedAt: ZERO_TIME, finishedAt: ZERO_TIME };
    return;
  }
  const typed: [string, (v: unknown) => boolean, unknown][] = [
    ['pid', Number.isInteger, 0], ['exitCode', Number.isInteger, 0], ['error', (v) => typeof v === 'string', ''],
    ['oomKilled', (v) => typeof v === 'boolean', false], ['startedAt', (v) => typeof v === 'string', ZERO_TIME], ['finishedAt', (v) => typeof v === 'string', ZERO_TIME],
  ];
  for (const [k, ok, zero] of typed) {
    if (ok(s[k])) continue;
    dropped.push(`state.${k}`);
    s[k] = zero;
  }
  const h = s.health;
  if (h !== undefined && !(isObject(h) && typeof h.status === 'string' && Number.isInteger(h.failingStreak) && Array.isArray(h.log))) {
    dropped.push('state.health');
    delete s.health;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Repairs the client-given parts of a loaded record in place (Config, HostConfig, EndpointsConfig). */
export function repairStoredContainer(c: ContainerRecord): void {
  const dropped: string[] = [];
  const rec = c as unknown as Record<string, unknown>;
  for (const key of ['config', 'hostConfig', 'networkingConfig'] as const) {
    if (!isObject(rec[key])) {
      if (rec[key] !== undefined) dropped.push(key);
      rec[key] = {};
    }
  }
  for (const p of repairToDefinition('ContainerConfig', c.config)) dropped.push(`Config${p}`);
  for (const p of repairToDefinition('HostConfig', c.hostConfig)) dropped.push(`HostConfig${p}`);
  for (const [name, endpoint] of Object.entries(c.networkingConfig)) {
    if (!isObject(endpoint)) {
      delete c.networkingConfig[name];
      dropped.push(`NetworkingConfig/${name}`);
      continue;
    }
    for (const p of repairToDefinition('EndpointSettings', endpoint)) dropped.push(`NetworkingConfig/${name}${p}`);
  }
  if (dropped.length) log.warn('stored container has values of the wrong type; they read as unset', { id: c.id, fields: dropped });
}
