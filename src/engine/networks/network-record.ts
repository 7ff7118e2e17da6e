/**
 * The network record (what is stored and what inspect shows) and the checks on a create request,
 * with dockerd's option names and error wording.
 */
import { BerthError, invalidArgument, notFound } from '../../lib/errors.js';
import { cidrContains, cidrWithin, formatCidr, parseAddress, parseCidr, type Cidr } from '../../network/cidr.js';
import { validateBridgeName } from '../../network/bridge-driver.js';


export type NetworkDriverName = 'bridge' | 'host' | 'null';

export interface NetworkRecord {
  id: string; // 64 hex
  name: string;
  driver: NetworkDriverName;
  scope: 'local';
  /** IPv4 subnet, gateway and allocation range ('' for host and none). */
  subnet: string;
  gateway: string;
  ipRange?: string;
  /** IPv6, only when enableIPv6. */
  subnet6?: string;
  gateway6?: string;
  ipRange6?: string;
  auxAddresses?: Record<string, string>;
  internal: boolean;
  attachable: boolean;
  enableIPv6: boolean;
  labels: Record<string, string>;
  options: Record<string, string>;
  ipamOptions: Record<string, string>;
  /** The bridge device ('' for host and none). */
  bridgeName: string;
  created: string; // RFC 3339
  /** Containers resolve each other's names (user-defined bridge networks). */
  dnsEnabled: boolean;
  /** One of the predefined networks bridge, host, none: cannot be removed. */
  predefined: boolean;
  /** Created with driver `overlay` (in a swarm): on one node a bridge, shown as overlay, scope swarm. */
  overlay?: boolean;
  /** The swarm's routing-mesh network (`ingress`, or one a user created with --ingress): one at most. */
  ingress?: boolean;
}

/** The driver and scope the API shows. */
export const shownDriver = (n: NetworkRecord): string => (n.overlay ? 'overlay' : n.driver);
export const shownScope = (n: NetworkRecord): string => (n.overlay ? 'swarm' : n.scope);

/** dockerd's refusal of a container on a swarm network created without --attachable. */
export function assertAttachable(n: NetworkRecord): void {
  if (n.overlay && !n.attachable) throw new BerthError('forbidden', `Could not attach to network ${n.name}: rpc error: code = PermissionDenied desc = network ${n.name} not manually attachable`);
}

export interface IpamConfigSpec {
  subnet?: string;
  gateway?: string;
  ipRange?: string;
  auxAddresses?: Record<string, string>;
}

export interface NetworkCreateSpec {
  /** A given id (64 hex digits), for a network that exists under one id on several nodes; random otherwise. */
  id?: string;
  name: string;
  driver?: string;
  internal?: boolean;
  attachable?: boolean;
  enableIPv6?: boolean;
  ipam?: { driver?: string; config?: IpamConfigSpec[]; options?: Record<string, string> };
  labels?: Record<string, string>;
  options?: Record<string, string>;
  /** Accepted for compatibility: names are always unique (as with API >= 1.44). */
  checkDuplicate?: boolean;
  /** The routing-mesh network of a swarm (overlay only); config-only networks are not supported. */
  ingress?: boolean;
  configOnly?: boolean;
  configFrom?: string;
  scope?: string;
}

export const PREDEFINED_NAMES = ['bridge', 'host', 'none'] as const;

export const Option = {
  bridgeName: 'com.docker.network.bridge.name',
  masquerade: 'com.docker.network.bridge.enable_ip_masquerade',
  icc: 'com.docker.network.bridge.enable_icc',
  hostBinding: 'com.docker.network.bridge.host_binding_ipv4',
  mtu: 'com.docker.network.driver.mtu',
  defaultBridge: 'com.docker.network.bridge.default_bridge',
} as const;

export const forbidden = (msg: string) => new BerthError('forbidden', msg);

const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

export function validateName(name: string): void {
  if (!name) throw invalidArgument('network name is required');
  if (!NAME_RE.test(name)) throw invalidArgument(`invalid network name "${name}": only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed`);
}

export function validateDriver(driver: string | undefined): void {
  const d = driver || 'bridge';
  if (d === 'bridge' || d === 'overlay') return;
  if (d === 'host' || d === 'null') throw forbidden(`only one instance of "${d}" network is allowed`);
  throw notFound(`plugin "${d}" not found`);
}

function boolOption(opts: Record<string, string>, key: string, dflt: boolean): boolean {
  const v = opts[key];
  if (v === undefined || v === '') return dflt;
  if (/^(1|t|true)$/i.test(v)) return true;
  if (/^(0|f|false)$/i.test(v)) return false;
  throw invalidArgument(`invalid value for ${key}: ${v}`);
}

export interface BridgeSettings {
  mtu: number;
  masquerade: boolean;
  icc: boolean;
  hostBindingIpv4: string;
}

export function bridgeSettings(n: NetworkRecord): BridgeSettings {
  const o = n.options;
  const mtu = o[Option.mtu] ? Number(o[Option.mtu]) : 1500;
  return {
    mtu: Number.isInteger(mtu) && mtu >= 68 && mtu <= 65535 ? mtu : 1500,
    masquerade: boolOption(o, Option.masquerade, true),
    icc: boolOption(o, Option.icc, true),
    hostBindingIpv4: o[Option.hostBinding] || '0.0.0.0',
  };
}

/** Checks options whose values matter, so a bad one fails at create rather than at the first start. */
export function validateOptions(opts: Record<string, string>): void {
  boolOption(opts, Option.masquerade, true);
  boolOption(opts, Option.icc, true);
  if (opts[Option.mtu] !== undefined && opts[Option.mtu] !== '') {
    const mtu = Number(opts[Option.mtu]);
    if (!Number.isInteger(mtu) || mtu < 68 || mtu > 65535) throw invalidArgument(`invalid MTU ${opts[Option.mtu]}`);
  }
  const hb = opts[Option.hostBinding];
  if (hb && parseAddress(hb)?.family !== 4) throw invalidArgument(`invalid host binding address ${hb}`);
  if (opts[Option.bridgeName] !== undefined) validateBridgeName(opts[Option.bridgeName]!);
}

export interface ParsedPool {
  subnet?: Cidr;
  gateway?: string;
  ipRange?: Cidr;
  auxAddresses?: Record<string, string>;
}

/** Splits IPAM config into at most one IPv4 and one IPv6 pool, each checked for consistency. */
export function parseIpamConfig(config: IpamConfigSpec[] | undefined): { v4: ParsedPool; v6: ParsedPool } {
  const out: { v4: ParsedPool; v6: ParsedPool } = { v4: {}, v6: {} };
  const seen = new Set<number>();
  for (const c of config ?? []) {
    if (!c.subnet) {
      if (c.gateway || c.ipRange) throw invalidArgument('a gateway or IP range needs a subnet');
      continue;
    }
    const subnet = parseCidr(c.subnet, false);
    if (!subnet) throw invalidArgument(`invalid subnet ${c.subnet}: invalid CIDR address`);
    if (!parseCidr(c.subnet, true)) throw invalidArgument(`invalid subnet ${c.subnet}: it should be ${formatCidr(subnet)}`);
    if (seen.has(subnet.family)) throw invalidArgument(`only one IPv${subnet.family} subnet per network is supported`);
    seen.add(subnet.family);
    const pool: ParsedPool = { subnet };
    if (c.gateway) {
      const gw = parseAddress(c.gateway);
      if (!gw || !cidrContains(subnet, gw)) throw invalidArgument(`no matching subnet for gateway ${c.gateway}`);
      pool.gateway = c.gateway;
    }
    if (c.ipRange) {
      const range = parseCidr(c.ipRange, false);
      if (!range || !cidrWithin(range, subnet)) throw invalidArgument(`no matching subnet for range ${c.ipRange}`);
      pool.ipRange = range;
    }
    if (c.auxAddresses && Object.keys(c.auxAddresses).length) {
      for (const [k, v] of Object.entries(c.auxAddresses)) {
        const a = parseAddress(v);
        if (!a || !cidrContains(subnet, a)) throw invalidArgument(`no matching subnet for aux-address ${k}=${v}`);
      }
      pool.auxAddresses = c.auxAddresses;
    }
    if (subnet.family === 4) out.v4 = pool;
    else out.v6 = pool;
  }
  return out;
}
