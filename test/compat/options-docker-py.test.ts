/** docker-py using the HostConfig options of issue 21: namespace modes, links, group_add, log drivers. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
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
});
