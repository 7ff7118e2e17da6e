/**
 * IPv4/IPv6 addresses and prefixes as bigints: parsing, formatting, containment and overlap.
 * Enough for IPAM; no external library needed.
 */
import { isIPv4, isIPv6 } from 'node:net';

export type Family = 4 | 6;

export interface Address {
  family: Family;
  value: bigint;
}

export interface Cidr {
  family: Family;
  /** The network address (host bits zero). */
  base: bigint;
  prefix: number;
}

const BITS: Record<Family, number> = { 4: 32, 6: 128 };

export function parseAddress(text: string): Address | null {
  if (isIPv4(text)) {
    const parts = text.split('.').map(Number);
    return { family: 4, value: BigInt(((parts[0]! << 24) >>> 0) + (parts[1]! << 16) + (parts[2]! << 8) + parts[3]!) };
  }
  if (isIPv6(text)) return { family: 6, value: parseIPv6(text) };
  return null;
}

function parseIPv6(text: string): bigint {
  let s = text.split('%')[0]!;
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hex groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const n = parseAddress(v4[1]!)!.value;
    s = s.slice(0, -v4[1]!.length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, tail] = s.includes('::') ? s.split('::') : [s, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  let value = 0n;
  for (const g of groups) value = (value << 16n) | BigInt(parseInt(g, 16));
  return value;
}

export function formatAddress(a: Address): string {
  if (a.family === 4) {
    const v = Number(a.value);
    return `${(v >>> 24) & 255}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
  }
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((a.value >> BigInt(i * 16)) & 0xffffn));
  // RFC 5952: compress the longest run (length >= 2) of zero groups, the first one on ties.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) { best = i; bestLen = j - i; }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

function mask(family: Family, prefix: number): bigint {
  const bits = BigInt(BITS[family]);
  return ((1n << bits) - 1n) ^ ((1n << (bits - BigInt(prefix))) - 1n);
}

/**
 * Parses `addr/prefix`. With `strict`, host bits must be zero (dockerd refuses "10.1.2.3/24" as a subnet);
 * otherwise they are cleared.
 */
export function parseCidr(text: string, strict = true): Cidr | null {
  const slash = text.indexOf('/');
  if (slash < 0) return null;
  const addr = parseAddress(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (!addr || !/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = Number(prefixText);
  if (prefix > BITS[addr.family]) return null;
  const base = addr.value & mask(addr.family, prefix);
  if (strict && base !== addr.value) return null;
  return { family: addr.family, base, prefix };
}

export function formatCidr(c: Cidr): string {
  return `${formatAddress({ family: c.family, value: c.base })}/${c.prefix}`;
}

/** Number of addresses in the prefix. */
export function cidrSize(c: Cidr): bigint {
  return 1n << BigInt(BITS[c.family] - c.prefix);
}

export function lastAddress(c: Cidr): bigint {
  return c.base + cidrSize(c) - 1n;
}

export function cidrContains(c: Cidr, a: Address): boolean {
  return c.family === a.family && a.value >= c.base && a.value <= lastAddress(c);
}

/** True when `inner` lies completely inside `outer`. */
export function cidrWithin(inner: Cidr, outer: Cidr): boolean {
  return inner.family === outer.family && inner.prefix >= outer.prefix && inner.base >= outer.base && lastAddress(inner) <= lastAddress(outer);
}

export function cidrOverlaps(a: Cidr, b: Cidr): boolean {
  return a.family === b.family && a.base <= lastAddress(b) && b.base <= lastAddress(a);
}
