import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatAddress, formatCidr, parseAddress, parseCidr } from '../../network/cidr.js';
import { allocateAddress, chooseSubnet, defaultGateway, defaultIPv4Pools, isUsable, randomIPv6Pools } from './ipam.js';
import { macForIPv4 } from '../../network/mac.js';
import { parseIpamConfig } from './network-record.js';

test('default pools follow dockerd: 172.17-31/16, then 192.168.x.0/20', () => {
  const pools = [...defaultIPv4Pools()].map(formatCidr);
  assert.equal(pools[0], '172.17.0.0/16');
  assert.equal(pools[14], '172.31.0.0/16');
  assert.equal(pools[15], '192.168.0.0/20');
  assert.equal(pools.at(-1), '192.168.240.0/20');
});

test('chooseSubnet skips anything that overlaps what is taken', () => {
  const taken = ['172.17.0.0/16', '172.18.3.0/24', '10.0.0.0/8'].map((s) => parseCidr(s)!);
  assert.equal(formatCidr(chooseSubnet(defaultIPv4Pools(), taken)!), '172.19.0.0/16');
  const host = [parseCidr('172.16.0.0/12')!];
  assert.equal(formatCidr(chooseSubnet(defaultIPv4Pools(), host)!), '192.168.0.0/20');
  assert.equal(chooseSubnet(defaultIPv4Pools(), [parseCidr('0.0.0.0/0')!]), null);
});

test('random IPv6 pools are unique-local /64s', () => {
  for (const p of randomIPv6Pools(4)) {
    assert.equal(p.prefix, 64);
    assert.match(formatCidr(p), /^fd[0-9a-f]{2}:/);
  }
});

test('addresses: gateway first, then the lowest free one, never network or broadcast', () => {
  const subnet = parseCidr('10.9.0.0/29')!; // .0 network, .7 broadcast
  const gw = defaultGateway(subnet);
  assert.equal(formatAddress(gw), '10.9.0.1');
  const used = new Set<bigint>();
  const got: string[] = [];
  for (;;) {
    const a = allocateAddress(subnet, undefined, gw, used);
    if (!a) break;
    used.add(a.value);
    got.push(formatAddress(a));
  }
  assert.deepEqual(got, ['10.9.0.2', '10.9.0.3', '10.9.0.4', '10.9.0.5', '10.9.0.6']);
  used.delete(parseAddress('10.9.0.4')!.value);
  assert.equal(formatAddress(allocateAddress(subnet, undefined, gw, used)!), '10.9.0.4', 'a released address is reused');
  const range = parseCidr('10.9.0.4/30')!;
  assert.equal(formatAddress(allocateAddress(subnet, range, gw, new Set())!), '10.9.0.4', 'ip-range limits allocation');
  assert.ok(!isUsable(subnet, gw, parseAddress('10.9.0.7')!.value));
  assert.ok(!isUsable(subnet, gw, parseAddress('10.9.0.1')!.value));
  assert.ok(!isUsable(subnet, gw, parseAddress('10.9.1.2')!.value));
});

test('MACs derive from IPv4 addresses as 02:42:<ip>', () => {
  assert.equal(macForIPv4(parseAddress('172.17.0.2')!), '02:42:ac:11:00:02');
});

test('IPAM config is checked like dockerd', () => {
  const ok = parseIpamConfig([{ subnet: '10.5.0.0/16', gateway: '10.5.0.254', ipRange: '10.5.1.0/24' }, { subnet: 'fd00:5::/64' }]);
  assert.equal(formatCidr(ok.v4.subnet!), '10.5.0.0/16');
  assert.equal(ok.v4.gateway, '10.5.0.254');
  assert.equal(formatCidr(ok.v6.subnet!), 'fd00:5::/64');
  const bad: [unknown, RegExp][] = [
    [[{ subnet: '10.5.0.1/16' }], /it should be 10\.5\.0\.0\/16/],
    [[{ subnet: 'nonsense' }], /invalid CIDR/],
    [[{ subnet: '10.5.0.0/16', gateway: '10.6.0.1' }], /no matching subnet for gateway/],
    [[{ subnet: '10.5.0.0/16', ipRange: '10.6.0.0/24' }], /no matching subnet for range/],
    [[{ gateway: '10.5.0.1' }], /needs a subnet/],
    [[{ subnet: '10.5.0.0/16' }, { subnet: '10.6.0.0/16' }], /only one IPv4 subnet/],
  ];
  for (const [config, re] of bad) {
    assert.throws(() => parseIpamConfig(config as never), (err: Error & { kind?: string }) => err.kind === 'invalid-argument' && re.test(err.message));
  }
});
