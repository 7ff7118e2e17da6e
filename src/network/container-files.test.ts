import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hostsText, resolvConfText } from './container-files.js';
import { parseResolvConf } from './host-routes.js';

const host = parseResolvConf('# comment\nnameserver 127.0.0.53\nnameserver 10.0.0.2\nsearch example.com corp\noptions edns0 trust-ad\n');

test('resolv.conf on a user-defined network points at the embedded DNS', () => {
  assert.equal(resolvConfText({ host, embeddedDns: true }), 'nameserver 127.0.0.11\nsearch example.com corp\noptions edns0 trust-ad ndots:0\n');
});

test('resolv.conf on the default bridge drops loopback servers, falls back to public ones', () => {
  assert.equal(resolvConfText({ host, embeddedDns: false }), 'nameserver 10.0.0.2\nsearch example.com corp\noptions edns0 trust-ad\n');
  const onlyLocal = parseResolvConf('nameserver 127.0.0.53\n');
  assert.equal(resolvConfText({ host: onlyLocal, embeddedDns: false }), 'nameserver 8.8.8.8\nnameserver 8.8.4.4\n');
  assert.equal(resolvConfText({ host: onlyLocal, embeddedDns: false, hostNetwork: true }), 'nameserver 127.0.0.53\n');
  assert.equal(resolvConfText({ host, embeddedDns: false, dns: ['1.1.1.1'], dnsSearch: ['x.test'], dnsOptions: ['ndots:2'] }), 'nameserver 1.1.1.1\nsearch x.test\noptions ndots:2\n');
});

test('hosts file: localhost, IPv6 lines only with IPv6, extra hosts, own address', () => {
  assert.equal(
    hostsText({ hostname: 'abc123', addresses: ['172.18.0.2'], extraHosts: ['db:10.0.0.5'], ipv6: false }),
    '127.0.0.1\tlocalhost\n10.0.0.5\tdb\n172.18.0.2\tabc123\n',
  );
  const v6 = hostsText({ hostname: 'h', domainname: 'example.com', addresses: ['10.1.0.2'], ipv6: true });
  assert.match(v6, /^::1\tlocalhost ip6-localhost ip6-loopback$/m);
  assert.match(v6, /^ff02::2\tip6-allrouters$/m);
  assert.match(v6, /^10\.1\.0\.2\th\.example\.com h$/m);
});
