/**
 * Address management: picking a free subnet for a new network and a free address for a new endpoint.
 * Pure functions; the callers supply what is taken (host routes, other networks, live endpoints).
 */
import { randomBytes } from 'node:crypto';
import { cidrContains, cidrOverlaps, cidrSize, lastAddress, type Address, type Cidr } from '../../network/cidr.js';

/**
 * dockerd's default address pools, in order: 172.17.0.0/16 ... 172.31.0.0/16, then 192.168.0.0/16 cut into /20s.
 * The default bridge takes the first free one (normally 172.17.0.0/16), user networks the next ones.
 */
export function* defaultIPv4Pools(): Generator<Cidr> {
  for (let b = 17; b <= 31; b++) yield { family: 4, base: BigInt(((172 << 24) >>> 0) + (b << 16)), prefix: 16 };
  for (let c = 0; c < 256; c += 16) yield { family: 4, base: BigInt(((192 << 24) >>> 0) + (168 << 16) + (c << 8)), prefix: 20 };
}

/** A random unique-local /64 (fdXX:XXXX:XXXX:YYYY::/64), as dockerd does when IPv6 is enabled without a subnet. */
export function* randomIPv6Pools(count = 16): Generator<Cidr> {
  for (let i = 0; i < count; i++) {
    const r = randomBytes(7);
    let v = 0xfdn;
    for (const byte of r) v = (v << 8n) | BigInt(byte);
    yield { family: 6, base: v << 64n, prefix: 64 };
  }
}

/** The first pool that overlaps nothing in `taken`, or null when all are used. */
export function chooseSubnet(pools: Iterable<Cidr>, taken: readonly Cidr[]): Cidr | null {
  for (const pool of pools) {
    if (!taken.some((t) => cidrOverlaps(pool, t))) return pool;
  }
  return null;
}

/** The default gateway of a subnet: its first host address. */
export function defaultGateway(subnet: Cidr): Address {
  return { family: subnet.family, value: subnet.base + (cidrSize(subnet) > 2n ? 1n : 0n) };
}

/**
 * The lowest free address of `range` (or the whole subnet) that is neither the subnet's network address,
 * its IPv4 broadcast address, the gateway, nor in `used`. Returns null when the range is full.
 */
export function allocateAddress(subnet: Cidr, range: Cidr | undefined, gateway: Address | undefined, used: ReadonlySet<bigint>): Address | null {
  const from = range ?? subnet;
  const first = from.base;
  const last = lastAddress(from);
  for (let v = first; v <= last; v++) {
    if (!isUsable(subnet, gateway, v)) continue;
    if (!used.has(v)) return { family: subnet.family, value: v };
  }
  return null;
}

/** Whether an address may be given to an endpoint (static addresses go through this too). */
export function isUsable(subnet: Cidr, gateway: Address | undefined, v: bigint): boolean {
  if (!cidrContains(subnet, { family: subnet.family, value: v })) return false;
  if (gateway && gateway.value === v) return false;
  const size = cidrSize(subnet);
  if (size <= 2n) return true; // /31 and /32 (and IPv6 /127, /128) have no network or broadcast address
  if (v === subnet.base) return false;
  if (subnet.family === 4 && v === lastAddress(subnet)) return false;
  return true;
}
