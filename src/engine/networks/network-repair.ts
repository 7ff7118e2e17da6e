/**
 * Stored network rows checked at load, as containers' are (container-record-repair.ts): a row written
 * by an older berthd, by hand or half-written must not break `docker network ls` or the daemon's
 * start. A field of the wrong type reads as if it had never been set; a row without what its bridge
 * needs (subnet, gateway, device name) or whose JSON does not parse cannot be used and is skipped.
 */
import { log } from '../../lib/log.js';
import { cidrContains, parseAddress, parseCidr } from '../../network/cidr.js';
import type { StoredEndpoint, StoredNetwork } from '../../state/network-records.js';
import { validateBridgeName } from '../../network/bridge-driver.js';
import { PREDEFINED_NAMES, validateOptions, type NetworkDriverName, type NetworkRecord } from './network-record.js';
import type { Endpoint, EndpointData } from './network-types.js';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const DRIVERS: readonly string[] = ['bridge', 'host', 'null'] satisfies NetworkDriverName[];

/** The record of a stored row, repaired; undefined when it cannot be used. */
export function repairStoredNetwork(row: StoredNetwork): NetworkRecord | undefined {
  const d = row.data;
  const unusable = (why: string) => {
    log.warn('stored network cannot be read; it is skipped', { id: row.id, name: row.name, why });
    return undefined;
  };
  if (!isObject(d)) return unusable('its record is not a JSON object');
  if (typeof d.driver !== 'string' || !DRIVERS.includes(d.driver)) return unusable(`unknown driver ${JSON.stringify(d.driver)}`);
  const driver = d.driver as NetworkDriverName;
  const dropped: string[] = [];
  const pick = <T>(key: string, ok: (v: unknown) => v is T, dflt: T): T => {
    if (ok(d[key])) return d[key] as T;
    if (d[key] !== undefined) dropped.push(key);
    return dflt;
  };
  const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
  const isString = (v: unknown): v is string => typeof v === 'string';
  const strings = (key: string): Record<string, string> => {
    const v = d[key];
    if (v === undefined) return {};
    if (!isObject(v)) return dropped.push(key), {};
    const out: Record<string, string> = {};
    for (const [k, x] of Object.entries(v)) {
      if (typeof x === 'string') out[k] = x;
      else dropped.push(`${key}.${k}`);
    }
    return out;
  };

  const name = row.name;
  const predefined = pick('predefined', isBool, (PREDEFINED_NAMES as readonly string[]).includes(name));
  const options = strings('options');
  for (const [k, v] of Object.entries(options)) {
    try {
      validateOptions({ [k]: v });
    } catch {
      delete options[k];
      dropped.push(`options.${k}`);
    }
  }
  const rec: NetworkRecord = {
    id: row.id,
    name,
    driver,
    scope: 'local',
    subnet: '',
    gateway: '',
    internal: pick('internal', isBool, false),
    attachable: pick('attachable', isBool, false),
    enableIPv6: false,
    labels: strings('labels'),
    options,
    ipamOptions: strings('ipamOptions'),
    bridgeName: '',
    created: pick('created', (v): v is string => isString(v) && !Number.isNaN(Date.parse(v)), new Date(row.createdAt || 0).toISOString()),
    dnsEnabled: pick('dnsEnabled', isBool, driver === 'bridge' && !predefined),
    predefined,
    ...(d.overlay === true ? { overlay: true } : {}),
    ...(d.overlay === true && d.ingress === true ? { ingress: true } : {}),
  };
  if (driver === 'bridge') {
    const subnet = isString(d.subnet) ? parseCidr(d.subnet) : null;
    const gateway = isString(d.gateway) ? parseAddress(d.gateway) : null;
    if (!subnet || subnet.family !== 4 || !gateway || !cidrContains(subnet, gateway)) return unusable('no valid IPv4 subnet and gateway');
    try {
      validateBridgeName(d.bridgeName as string);
    } catch {
      return unusable('no valid bridge device name');
    }
    Object.assign(rec, { subnet: d.subnet, gateway: d.gateway, bridgeName: d.bridgeName });
    const range = isString(d.ipRange) ? parseCidr(d.ipRange, false) : null;
    if (range) rec.ipRange = d.ipRange as string;
    else if (d.ipRange !== undefined) dropped.push('ipRange');
    const subnet6 = isString(d.subnet6) ? parseCidr(d.subnet6) : null;
    const gateway6 = isString(d.gateway6) ? parseAddress(d.gateway6) : null;
    if (subnet6?.family === 6 && gateway6 && cidrContains(subnet6, gateway6)) {
      Object.assign(rec, { subnet6: d.subnet6, gateway6: d.gateway6, enableIPv6: d.enableIPv6 === true });
      if (isString(d.ipRange6) && parseCidr(d.ipRange6, false)) rec.ipRange6 = d.ipRange6;
    } else if (d.subnet6 !== undefined || d.enableIPv6 === true) {
      dropped.push('subnet6');
    }
    const aux = strings('auxAddresses');
    for (const [k, v] of Object.entries(aux)) if (!parseAddress(v)) (delete aux[k], dropped.push(`auxAddresses.${k}`));
    if (Object.keys(aux).length) rec.auxAddresses = aux;
  }
  if (dropped.length) log.warn('stored network has values of the wrong type; they read as unset', { id: row.id, name, fields: dropped });
  return rec;
}

/** The endpoint of a stored row; undefined when its data cannot be used (the row is then released). */
export function repairStoredEndpoint(s: StoredEndpoint): Endpoint | undefined {
  const d = s.data;
  if (!isObject(d)) return undefined;
  const str = (k: keyof EndpointData) => typeof d[k] === 'string';
  if (!str('hostVeth') || !str('ifName') || !str('mac') || !str('netnsPath') || !str('endpointId')) return undefined;
  return {
    endpointId: d.endpointId as string,
    hostVeth: d.hostVeth as string,
    ifName: d.ifName as string,
    mac: d.mac as string,
    netnsPath: d.netnsPath as string,
    containerName: typeof d.containerName === 'string' ? d.containerName : '',
    order: typeof d.order === 'number' ? d.order : 0,
    ipv4PrefixLen: typeof d.ipv4PrefixLen === 'number' ? d.ipv4PrefixLen : 0,
    ipv6PrefixLen: typeof d.ipv6PrefixLen === 'number' ? d.ipv6PrefixLen : 0,
    aliases: Array.isArray(d.aliases) ? d.aliases.filter((a): a is string => typeof a === 'string') : [],
    ...(Array.isArray(d.dnsServers) ? { dnsServers: d.dnsServers.filter((a): a is string => typeof a === 'string') } : {}),
    containerId: s.containerId,
    networkId: s.networkId,
    ipv4: s.ipv4,
    ipv6: s.ipv6,
    createdAt: s.createdAt,
  };
}
