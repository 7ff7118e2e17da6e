/** HostConfig options that reach the runtime: mounts, tmpfs, /etc files, init, sysctls, shm, ulimits, devices. */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';

describe('create options', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  before(async () => {
    image = reg().seeded.refs.busybox;
    assert.equal((await daemon().docker(['pull', '-q', image])).code, 0);
  });

  /** Runs sh -c script with the given create body extras; returns stdout, asserting exit 0. */
  async function sh(d: TestDaemon, script: string, extra: Record<string, unknown>): Promise<string> {
    const c = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['sh', '-c', script], ...extra } });
    assert.equal(c.status, 201, c.text());
    const id = c.json().Id;
    const s = await d.request('POST', `/containers/${id}/start`);
    assert.equal(s.status, 204, s.text());
    const w = (await d.request('POST', `/containers/${id}/wait`)).json();
    const logs = await d.docker(['logs', id]);
    assert.equal(w.StatusCode, 0, logs.stdout + logs.stderr);
    return logs.stdout;
  }

  it('bind mounts (rw and ro), Mounts of type bind and tmpfs, and Tmpfs', async () => {
    const d = daemon();
    const host = mkdtempSync(join(tmpdir(), 'berth-bind-'));
    try {
      writeFileSync(join(host, 'in.txt'), 'from-host\n');
      const out = await sh(d, 'cat /data/in.txt; echo written > /data/out.txt; touch /ro/x 2>/dev/null && echo ro-writable || echo ro-refused; mount | grep -c " /scratch type tmpfs"; mount | grep -c " /t2 type tmpfs"; ls /m/in.txt', {
        HostConfig: {
          Binds: [`${host}:/data`, `${host}:/ro:ro`],
          Mounts: [{ Type: 'bind', Source: host, Target: '/m', ReadOnly: true }, { Type: 'tmpfs', Target: '/t2', TmpfsOptions: { SizeBytes: 1 << 20 } }],
          Tmpfs: { '/scratch': 'size=1m' },
        },
      });
      assert.equal(out, 'from-host\nro-refused\n1\n1\n/m/in.txt\n');
      assert.equal(readFileSync(join(host, 'out.txt'), 'utf8'), 'written\n');
      const vol = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'], HostConfig: { Binds: ['named:/x'] } } });
      assert.equal(vol.status, 201, 'accepted at create');
      const st = await d.request('POST', `/containers/${vol.json().Id}/start`);
      assert.equal(st.status, 204, 'a named volume is created and mounted');
    } finally {
      rmSync(host, { recursive: true, force: true });
    }
  });

  it('hostname, domainname, ExtraHosts, Dns, DnsSearch, DnsOptions in the /etc files', async () => {
    const d = daemon();
    const out = await sh(d, 'hostname; cat /etc/hosts; cat /etc/resolv.conf', {
      Hostname: 'box', Domainname: 'example.test',
      HostConfig: { ExtraHosts: ['db.local:10.1.2.3'], Dns: ['192.0.2.53'], DnsSearch: ['corp.test'], DnsOptions: ['ndots:2'] },
    });
    assert.match(out, /^box\n/);
    assert.match(out, /127\.0\.0\.1\tlocalhost/);
    assert.match(out, /10\.1\.2\.3\tdb\.local/);
    assert.match(out, /nameserver 192\.0\.2\.53/);
    assert.match(out, /search corp\.test/);
    assert.match(out, /options ndots:2/);
  });

  it('Init runs catatonit as pid 1; ShmSize, Sysctls and Ulimits apply; Devices appear', async () => {
    const d = daemon();
    const out = await sh(d, "cat /proc/1/cmdline | tr '\\0' ' '; echo; df -k /dev/shm | tail -1 | awk '{print $2}'; cat /proc/sys/net/ipv4/ip_unprivileged_port_start; ulimit -n; ls -l /dev/berth-null | cut -c1", {
      HostConfig: {
        Init: true,
        ShmSize: 8 * 1024 * 1024,
        Sysctls: { 'net.ipv4.ip_unprivileged_port_start': '1024' },
        Ulimits: [{ Name: 'nofile', Soft: 1000, Hard: 2000 }],
        Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/berth-null', CgroupPermissions: 'rwm' }],
      },
    });
    const lines = out.trim().split('\n');
    assert.match(lines[0]!, /^\/dev\/init -- sh -c/);
    assert.equal(lines[1], '8192');
    assert.equal(lines[2], '1024');
    assert.equal(lines[3], '1000');
    assert.equal(lines[4], 'c');
  });

  it('NetworkMode host shares the host network; none has only loopback', async () => {
    const d = daemon();
    const hostIfs = (await sh(d, 'ls /sys/class/net | sort', { HostConfig: { NetworkMode: 'host' } })).trim().split('\n');
    assert.ok(hostIfs.length > 1 && hostIfs.includes('lo'), hostIfs.join(','));
    const none = await sh(d, 'ls /sys/class/net', { HostConfig: { NetworkMode: 'none' } });
    assert.equal(none.trim(), 'lo');
  });
});
