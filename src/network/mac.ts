/** MAC addresses for bridges and container interfaces. */
import { randomBytes } from 'node:crypto';
import type { Address } from './cidr.js';

/**
 * A locally administered MAC derived from an IPv4 address (02:42 followed by the four address bytes),
 * so a reused address keeps its MAC and neighbours' ARP caches stay right.
 */
export function macForIPv4(ip: Address): string {
  const v = Number(ip.value);
  const bytes = [0x02, 0x42, (v >>> 24) & 255, (v >>> 16) & 255, (v >>> 8) & 255, v & 255];
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}

export function randomMac(): string {
  const b = randomBytes(6);
  b[0] = (b[0]! & 0xfe) | 0x02; // unicast, locally administered
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
}
