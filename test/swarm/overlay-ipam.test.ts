/** The swarm's address decisions for overlay networks, as pure functions. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allocateFromTop, nextVni, pickOverlaySubnet, poolSubnets } from '../../src/engine/swarm/overlay-ipam.js';
import { formatAddress, formatCidr, parseAddress, parseCidr } from '../../src/network/cidr.js';

const cidr = (s: string) => parseCidr(s)!;

test('subnets are cut from the pools in order, skipping what is taken', () => {
  const first = [...poolSubnets(['10.0.0.0/8'], 24)].slice(0, 3).map(formatCidr);
  assert.deepEqual(first, ['10.0.0.0/24', '10.0.1.0/24', '10.0.2.0/24']);
  assert.equal([...poolSubnets(['10.20.0.0/16', '192.168.0.0/23'], 24)].length, 256 + 2);
  const picked = pickOverlaySubnet(['10.0.0.0/8'], 24, [cidr('10.0.0.0/24'), cidr('10.0.1.0/25')]);
  assert.equal(formatCidr(picked!), '10.0.2.0/24');
  // A route covering the whole pool leaves nothing.
  assert.equal(pickOverlaySubnet(['10.9.0.0/23'], 24, [cidr('10.9.0.0/16')]), null);
  assert.throws(() => [...poolSubnets(['10.0.0.0/24'], 16)], /larger than the pool/);
  assert.throws(() => [...poolSubnets(['nonsense'], 24)], /invalid default address pool/);
});

test('VXLAN ids start at 4097 and skip the used ones', () => {
  assert.equal(nextVni(new Set()), 4097);
  assert.equal(nextVni(new Set([4097, 4098, 4100])), 4099);
});

test('swarm addresses come from the top, never the broadcast, the gateway or a used one', () => {
  const subnet = cidr('10.0.1.0/29'); // .1-.6 usable
  const gw = parseAddress('10.0.1.6')!;
  const used = new Set([parseAddress('10.0.1.5')!.value]);
  assert.equal(formatAddress(allocateFromTop(subnet, gw, used)!), '10.0.1.4');
  for (const a of ['10.0.1.4', '10.0.1.3', '10.0.1.2', '10.0.1.1']) used.add(parseAddress(a)!.value);
  assert.equal(allocateFromTop(subnet, gw, used), null);
});
