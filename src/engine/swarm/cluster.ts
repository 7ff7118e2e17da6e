/**
 * The cluster of one: what `swarm init` creates (this node as its only manager), the defaults a
 * swarm spec gets, and the address the node advertises.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { invalidArgument } from '../../lib/errors.js';
import { newJoinTokens, newSwarmId, newUnlockKey } from './swarm-ids.js';
import { SECOND_NS, type ClusterRecord, type NodeSpec, type SwarmSpec } from './swarm-model.js';

export const SWARM_PORT = 2377;

export interface InitRequest {
  ListenAddr?: string;
  AdvertiseAddr?: string;
  DataPathAddr?: string;
  DataPathPort?: number;
  DefaultAddrPool?: string[];
  SubnetSize?: number;
  ForceNewCluster?: boolean;
  Spec?: SwarmSpec;
  AutoLockManagers?: boolean;
  Availability?: NodeSpec['Availability'] | '';
}

/** The spec with swarmkit's defaults for whatever it leaves out. */
export function withSwarmDefaults(spec: SwarmSpec | undefined): SwarmSpec {
  const s = structuredClone(spec ?? {});
  return {
    ...s,
    Name: s.Name || 'default',
    Labels: s.Labels ?? {},
    Orchestration: { TaskHistoryRetentionLimit: 5, ...(s.Orchestration ?? {}) },
    Raft: { SnapshotInterval: 10000, KeepOldSnapshots: 0, LogEntriesForSlowFollowers: 500, ElectionTick: 10, HeartbeatTick: 1, ...nonZero(s.Raft) },
    Dispatcher: { HeartbeatPeriod: 5 * SECOND_NS, ...nonZero(s.Dispatcher) },
    CAConfig: { NodeCertExpiry: 90 * 24 * 3600 * SECOND_NS, ...nonZero(s.CAConfig) },
    TaskDefaults: s.TaskDefaults ?? {},
    EncryptionConfig: { AutoLockManagers: false, ...(s.EncryptionConfig ?? {}) },
  };
}

/** Zero means "the default" in these sections (the CLI sends zeros for what it leaves alone). */
function nonZero(o: Record<string, unknown> | undefined): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== 0 && v !== null && v !== undefined));
}

/** Where the swarm port listens: ListenAddr's host and port (2377 unless given). */
export function listenOf(req: { ListenAddr?: string }): { host: string; port: number } {
  return splitHostPort(req.ListenAddr || `0.0.0.0:${SWARM_PORT}`, 'listen');
}

/** The address this node advertises: AdvertiseAddr's, else ListenAddr's host unless unspecified, else detected. */
export function advertiseOf(req: { ListenAddr?: string; AdvertiseAddr?: string }): { addr: string; port: number } {
  const listen = splitHostPort(req.ListenAddr || `0.0.0.0:${SWARM_PORT}`, 'listen');
  const advertise = req.AdvertiseAddr ? splitHostPort(req.AdvertiseAddr, 'advertise') : undefined;
  const addr = advertise?.host ?? (listen.host !== '0.0.0.0' && listen.host !== '::' ? listen.host : detectAddress());
  return { addr, port: advertise?.port ?? listen.port };
}

export function newCluster(req: InitRequest): ClusterRecord {
  const availability = req.Availability || 'active';
  if (!['active', 'pause', 'drain'].includes(availability)) throw invalidArgument(`invalid availability: ${availability}`);
  const dataPathPort = req.DataPathPort || 4789;
  if (dataPathPort < 1024 || dataPathPort > 49151) throw invalidArgument(`data path port ${dataPathPort} is out of range: it must be within 1024-49151`);
  const subnetSize = req.SubnetSize || 24;
  if (subnetSize < 1 || subnetSize > 29) throw invalidArgument(`invalid subnet size ${subnetSize}`);
  const { addr, port } = advertiseOf(req);
  const spec = withSwarmDefaults(req.Spec);
  if (req.AutoLockManagers) spec.EncryptionConfig = { ...spec.EncryptionConfig, AutoLockManagers: true };
  const now = new Date().toISOString();
  return {
    id: newSwarmId(),
    version: 0,
    createdAt: now,
    updatedAt: now,
    spec,
    joinTokens: newJoinTokens(),
    unlockKey: spec.EncryptionConfig?.AutoLockManagers ? newUnlockKey() : '',
    defaultAddrPool: req.DefaultAddrPool?.length ? req.DefaultAddrPool : ['10.0.0.0/8'],
    subnetSize,
    dataPathPort,
    node: {
      id: newSwarmId(),
      version: 0,
      createdAt: now,
      updatedAt: now,
      spec: { Labels: {}, Role: 'manager', Availability: availability as NodeSpec['Availability'] },
      addr,
      managerAddr: addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`,
    },
  };
}

/** `ip`, `ip:port`, `[v6]:port`, `iface` or `iface:port` → an address and a port. */
function splitHostPort(value: string, what: string): { host: string; port: number } {
  let host = value.trim();
  let port = SWARM_PORT;
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(host);
  if (v6) {
    host = v6[1]!;
    if (v6[2]) port = Number(v6[2]);
  } else if (isIP(host) !== 6) {
    const m = /^(.*?)(?::(\d+))?$/.exec(host)!;
    host = m[1]!;
    if (m[2]) port = Number(m[2]);
  }
  if (port < (what === 'listen' ? 0 : 1) || port > 65535) throw invalidArgument(`invalid ${what} address ${value}: bad port`);
  if (host === '') host = '0.0.0.0';
  if (isIP(host)) return { host, port };
  const ifaceAddr = networkInterfaces()[host]?.find((a) => a.family === 'IPv4')?.address;
  if (!ifaceAddr) throw invalidArgument(`${what} address must be a non-zero IP address or network interface (with optional port number)`);
  return { host: ifaceAddr, port };
}

/** The IPv4 address of the interface that holds the default route, else the first one that is not loopback. */
function detectAddress(): string {
  const ifaces = networkInterfaces();
  try {
    const route = readFileSync('/proc/net/route', 'utf8').split('\n').slice(1).map((l) => l.trim().split(/\s+/));
    const dflt = route.find((cols) => cols[1] === '00000000' && cols[7] === '00000000');
    const addr = dflt && ifaces[dflt[0]!]?.find((a) => a.family === 'IPv4')?.address;
    if (addr) return addr;
  } catch {
    /* no procfs route table: fall back */
  }
  for (const list of Object.values(ifaces)) {
    const a = list?.find((x) => x.family === 'IPv4' && !x.internal);
    if (a) return a.address;
  }
  return '127.0.0.1';
}
