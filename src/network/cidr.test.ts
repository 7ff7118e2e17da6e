import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cidrContains, cidrOverlaps, cidrWithin, formatAddress, formatCidr, parseAddress, parseCidr } from './cidr.js';

test('IPv4 addresses round-trip', () => {
  for (const s of ['0.0.0.0', '172.17.0.1', '255.255.255.255', '10.0.0.254']) {
    assert.equal(formatAddress(parseAddress(s)!), s);
  }
  assert.equal(parseAddress('172.17.0.1')!.value, 0xac110001n);
  assert.equal(parseAddress('256.1.1.1'), null);
  assert.equal(parseAddress('bridge'), null);
});

test('IPv6 addresses round-trip in RFC 5952 form', () => {
  const cases: [string, string][] = [
    ['fd00::1', 'fd00::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['::', '::'],
    ['::1', '::1'],
    ['fe80::a:b', 'fe80::a:b'],
    ['::ffff:10.1.2.3', '::ffff:a01:203'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
  ];
  for (const [input, out] of cases) assert.equal(formatAddress(parseAddress(input)!), out, input);
});

test('subnets: strict parsing, containment and overlap', () => {
  assert.equal(parseCidr('10.1.2.3/24'), null, 'host bits set');
  assert.equal(formatCidr(parseCidr('10.1.2.3/24', false)!), '10.1.2.0/24');
  assert.equal(parseCidr('10.1.2.0/33'), null);
  assert.equal(parseCidr('10.1.2.0'), null);
  const a = parseCidr('172.18.0.0/16')!;
  const b = parseCidr('172.18.5.0/24')!;
  const c = parseCidr('172.19.0.0/16')!;
  assert.ok(cidrOverlaps(a, b) && cidrOverlaps(b, a));
  assert.ok(!cidrOverlaps(a, c));
  assert.ok(cidrWithin(b, a) && !cidrWithin(a, b));
  assert.ok(cidrContains(a, parseAddress('172.18.255.255')!));
  assert.ok(!cidrContains(a, parseAddress('172.19.0.0')!));
  assert.ok(!cidrContains(a, parseAddress('fd00::1')!), 'families never mix');
  const v6 = parseCidr('fd12:3456:789a:1::/64')!;
  assert.ok(cidrContains(v6, parseAddress('fd12:3456:789a:1::ffff')!));
  assert.ok(!cidrOverlaps(v6, parseCidr('fd12:3456:789a:2::/64')!));
});
