/** docker-py using the HostConfig options of issue 21: namespace modes, links, group_add, log drivers. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { existsSync, readdirSync, readFileSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { runDockerPy } from '../harness/python.js';

describe('docker-py: namespace modes, links, group_add, log drivers', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  it('joins namespaces, resolves links, adds groups and refuses reading a none log', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    const img = JSON.stringify(image);
    const script = `
import docker, json
c = docker.from_env()
c.images.pull(${JSON.stringify(image.replace(/:latest$/, ''))}, tag='latest')
srv = c.containers.run(${img}, ['sleep', '300'], detach=True, name='py-srv', ipc_mode='shareable', hostname='srvhost')
srv.reload()
out = {}
out['ps'] = c.containers.run(${img}, ['ps'], pid_mode='container:py-srv', remove=True).decode()
out['ipc'] = c.containers.run(${img}, ['readlink', '/proc/self/ns/ipc'], ipc_mode='container:py-srv', remove=True).decode().strip()
out['srv_ipc'] = srv.exec_run(['readlink', '/proc/self/ns/ipc']).output.decode().strip()
out['srv_ip'] = srv.attrs['NetworkSettings']['Networks']['bridge']['IPAddress']
out['link'] = c.containers.run(${img}, ['sh', '-c', 'grep -w db /etc/hosts'], links={'py-srv': 'db'}, remove=True).decode()
out['groups'] = c.containers.run(${img}, ['id', '-G'], group_add=['berth', '4242'], remove=True).decode().split()
out['uts'] = c.containers.run(${img}, ['hostname'], uts_mode='host', remove=True).decode().strip()
nolog = c.containers.run(${img}, ['echo', 'x'], detach=True, name='py-nolog', log_config=docker.types.LogConfig(type='none'))
nolog.wait()
try:
    nolog.logs()
    out['logerr'] = None
except docker.errors.APIError as e:
    out['logerr'] = [e.status_code, e.explanation]
try:
    srv.remove()
    out['rm'] = None
except docker.errors.APIError as e:
    out['rm'] = e.status_code
nolog.remove()
srv.remove(force=True)
print(json.dumps(out))
`;
    const r = await runDockerPy(d.socket, script);
    assert.equal(r.code, 0, r.stderr);
    const got = JSON.parse(r.stdout);
    assert.match(got.ps, /sleep 300/);
    assert.equal(got.ipc, got.srv_ipc);
    assert.match(got.link, new RegExp(`^${got.srv_ip.replace(/\./g, '\\.')}\\s+db srvhost py-srv$`, 'm'));
    assert.ok(got.groups.includes('1000') && got.groups.includes('4242'), got.groups.join(' '));
    assert.equal(got.uts, hostname());
    assert.deepEqual(got.logerr, [501, 'configured logging driver does not support reading']);
    assert.equal(got.rm, 409, 'a running container is not removed without force');
  });

  it('block I/O throttles, oom_kill_disable, cgroupns and cgroup_parent reach the cgroups; gpus and storage_opt are refused as dockerd', { skip: existsSync('/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device') ? false : 'needs cgroup v1 blkio throttles' }, async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    const img = JSON.stringify(image);
    const dev = readdirSync('/sys/block').find((n) => !/^(loop|ram|zram|dm-|nbd)/.test(n) && existsSync(`/dev/${n}`));
    assert.ok(dev, 'a block device');
    const parent = `berth-py-${process.pid}`;
    const script = `
import docker, json
c = docker.from_env()
c.images.pull(${JSON.stringify(image.replace(/:latest$/, ''))}, tag='latest')
out = {}
ctr = c.containers.run(${img}, ['sh', '-c', 'cat /sys/fs/cgroup/blkio/blkio.throttle.write_bps_device; grep oom_kill_disable /sys/fs/cgroup/memory/memory.oom_control; grep -E ":memory:" /proc/self/cgroup'],
    detach=True, device_write_bps=[{'Path': '/dev/${dev}', 'Rate': 2097152}], oom_kill_disable=True, mem_limit='64m',
    cgroupns='host', cgroup_parent=${JSON.stringify(parent)})
ctr.wait()
out['logs'] = ctr.logs().decode()
hc = c.api.inspect_container(ctr.id)['HostConfig']
out['hc'] = [hc['BlkioDeviceWriteBps'], hc['OomKillDisable'], hc['CgroupnsMode'], hc['CgroupParent']]
ctr.remove()
for name, kw in [('gpus', {'device_requests': [docker.types.DeviceRequest(count=-1, capabilities=[['gpu']])]}), ('storage', {'storage_opt': {'size': '1G'}})]:
    try:
        c.containers.run(${img}, ['true'], remove=True, **kw)
        out[name] = None
    except docker.errors.APIError as e:
        out[name] = [e.status_code, e.explanation]
print(json.dumps(out))
`;
    try {
      const r = await runDockerPy(d.socket, script);
      assert.equal(r.code, 0, r.stderr);
      const got = JSON.parse(r.stdout);
      const numbers = readFileSync(`/sys/block/${dev}/dev`, 'utf8').trim();
      const lines = got.logs.trim().split('\n');
      assert.equal(lines[0], `${numbers} 2097152`);
      assert.equal(lines[1], 'oom_kill_disable 1');
      assert.match(lines[2], new RegExp(`:memory:/${parent}/[0-9a-f]{64}$`));
      assert.deepEqual(got.hc, [[{ Path: `/dev/${dev}`, Rate: 2097152 }], true, 'host', parent]);
      assert.deepEqual(got.gpus, [400, 'could not select device driver "" with capabilities: [[gpu]]']);
      assert.deepEqual(got.storage, [500, "--storage-opt is supported only for overlay over xfs with 'pquota' mount option"]);
    } finally {
      for (const h of readdirSync('/sys/fs/cgroup')) {
        try {
          rmdirSync(join('/sys/fs/cgroup', h, parent));
        } catch {
          // Not made in this hierarchy.
        }
      }
    }
  });
});
