/**
 * An endpoint's addresses on one network: the requested static ones (checked to be inside the subnet,
 * not the gateway, not taken) or the lowest free ones of the network's range. IPv6 only when the network
 * has it enabled.
 */
import { invalidArgument } from '../../lib/errors.js';
import { formatAddress, parseAddress, parseCidr, type Cidr } from '../../network/cidr.js';
import { allocateAddress, isUsable } from './ipam.js';
import { forbidden, type NetworkRecord } from './network-record.js';

export interface EndpointAddresses {
  ipv4: string;
  ipv4PrefixLen: number;
  ipv6: string; // '' without IPv6
  ipv6PrefixLen: number;
}

export function assignAddresses(
  net: NetworkRecord,
  req: { ipv4?: string; ipv6?: string },
  used4: ReadonlySet<bigint>,
  used6: ReadonlySet<bigint>,
): EndpointAddresses {
  const subnet4 = parseCidr(net.subnet)!;
  const ipv4 = pick(net, subnet4, net.gateway, net.ipRange, req.ipv4, used4);
  if (!(net.enableIPv6 && net.subnet6)) {
    if (req.ipv6) throw invalidArgument(`network ${net.name} does not have IPv6 enabled`);
    return { ipv4, ipv4PrefixLen: subnet4.prefix, ipv6: '', ipv6PrefixLen: 0 };
  }
  const subnet6 = parseCidr(net.subnet6)!;
  const ipv6 = pick(net, subnet6, net.gateway6, net.ipRange6, req.ipv6, used6);
  return { ipv4, ipv4PrefixLen: subnet4.prefix, ipv6, ipv6PrefixLen: subnet6.prefix };
}

function pick(net: NetworkRecord, subnet: Cidr, gateway: string | undefined, range: string | undefined, wanted: string | undefined, used: ReadonlySet<bigint>): string {
  const family = subnet.family;
  const gw = gateway ? parseAddress(gateway) ?? undefined : undefined;
  const subnetText = family === 4 ? net.subnet : net.subnet6;
  if (wanted) {
    const a = parseAddress(wanted);
    if (!a || a.family !== family || !isUsable(subnet, gw, a.value)) {
      throw invalidArgument(`invalid IPv${family} address ${wanted} for network ${net.name} (${subnetText})`);
    }
    if (used.has(a.value)) throw forbidden(`Address already in use: ${wanted} on network ${net.name}`);
    return formatAddress(a);
  }
  const a = allocateAddress(subnet, range ? parseCidr(range)! : undefined, gw, used);
  if (!a) throw forbidden(`no available IPv${family} addresses on network ${net.name}`);
  return formatAddress(a);
}
