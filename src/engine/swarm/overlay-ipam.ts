/**
 * The swarm's own address decisions for overlay networks, made once by the manager for the whole
 * cluster (pure functions; the caller says what is taken): a network's subnet cut from the swarm's
 * DefaultAddrPool in SubnetSize pieces, its VXLAN id, and the addresses of service VIPs and tasks.
 *
 * Swarm addresses are taken from the top of the subnet down, while a node's driver gives plain
 * (attachable) containers the lowest free address: the two meet only when the subnet is nearly full.
 */
import { invalidArgument } from '../../lib/errors.js';
import { cidrSize, lastAddress, parseCidr, type Address, type Cidr } from '../../network/cidr.js';
import { chooseSubnet, isUsable } from '../networks/ipam.js';

/** The option dockerd shows an overlay network's VXLAN id under (in Options). */
export const VNI_OPTION = 'com.docker.network.driver.overlay.vxlanid_list';
/** dockerd's overlay VNIs start above 4096 (the ones below are left to VLAN-style use). */
const FIRST_VNI = 4097;
/** The VNI of the ingress network swarm init makes (dockerd's too). */
export const INGRESS_VNI = 4096;
const MAX_VNI = 0xffffff;

/** Every `size`-prefix subnet of each pool, in order. */
export function* poolSubnets(pools: readonly string[], size: number): Generator<Cidr> {
  for (const p of pools) {
    const pool = parseCidr(p, false);
    if (!pool || pool.family !== 4) throw invalidArgument(`invalid default address pool ${p}`);
    if (size < pool.prefix) throw invalidArgument(`subnet size ${size} is larger than the pool ${p}`);
    const step = 1n << BigInt(32 - size);
    for (let base = pool.base; base < pool.base + cidrSize(pool); base += step) yield { family: 4, base, prefix: size };
  }
}

/** The first subnet of the pools that overlaps nothing taken. */
export function pickOverlaySubnet(pools: readonly string[], size: number, taken: readonly Cidr[]): Cidr | null {
  return chooseSubnet(poolSubnets(pools, size), taken);
}

/** The lowest VXLAN id from 4097 up that no network uses. */
export function nextVni(used: ReadonlySet<number>): number {
  for (let v = FIRST_VNI; v <= MAX_VNI; v++) if (!used.has(v)) return v;
  throw invalidArgument('no free VXLAN id');
}

/**
 * The highest usable address of the subnet that is not the gateway and not used (tasks, VIPs), or
 * with `from: 'bottom'` the lowest (the nodes' own addresses on ingress, as a node's plain containers').
 */
export function allocateFromTop(subnet: Cidr, gateway: Address | undefined, used: ReadonlySet<bigint>, from: 'top' | 'bottom' = 'top'): Address | null {
  const [first, last, step] = from === 'top' ? [lastAddress(subnet), subnet.base, -1n] : [subnet.base, lastAddress(subnet), 1n];
  for (let v = first; from === 'top' ? v >= last : v <= last; v += step) {
    if (isUsable(subnet, gateway, v) && !used.has(v)) return { family: 4, value: v };
  }
  return null;
}
