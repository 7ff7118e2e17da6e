/**
 * Records stored before requests were checked against the API schema (or by a berthd with a bug)
 * may hold values of the wrong type, e.g. `HostConfig.NetworkMode: 5`. Each is read as if the bad
 * field had never been sent, so one such container cannot break listing or inspect for everyone.
 */
import { repairToDefinition } from '../../lib/engine-api-schema.js';
import { log } from '../../lib/log.js';
import type { ContainerRecord } from './container-model.js';

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
