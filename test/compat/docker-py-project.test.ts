/**
 * docker-py's high-level API (the official Python client) running a small project on berthd: a
 * network, a database-like service with a healthcheck and an alias, a worker connected before its
 * start (as compose 1.29 does through the same library), exec, logs, events, top, stats, pause,
 * restart; swarm services; and, skipped until their branches merge, volumes, build, push, save/load.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { runDockerPy } from '../harness/python.js';

describe('docker-py: high-level API', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  async function py(script: string): Promise<any> {
    const r = await runDockerPy(daemon().socket, `import docker, json, time\nc = docker.from_env()\n${script}`, { timeoutMs: 180_000 });
    assert.equal(r.code, 0, `${r.stderr}\n${r.stdout}`);
    return JSON.parse(r.stdout.trim().split('\n').pop()!);
  }

  it('a project: network, db with healthcheck and alias, worker connected before start, exec, logs, events, top, stats, pause, restart', async () => {
    const image = reg().seeded.refs.busybox;
    const got = await py(`
image = ${JSON.stringify(image)}
c.images.pull(image)
net = c.networks.create('py-app', labels={'app': 'py'})
store = "printf '#!/bin/sh\\\\nread l\\\\necho \\"$l\\" >> /data/rows\\\\n' > /store && chmod +x /store"
db = c.containers.run(image, ['sh', '-c', 'mkdir -p /data && touch /data/rows && ' + store + ' && httpd -p 5433 -h /data && exec nc -ll -p 6379 -e /store'],
    name='py-db', detach=True, network='py-app', labels={'app': 'py'},
    networking_config={'py-app': c.api.create_endpoint_config(aliases=['database'])},
    healthcheck={'test': ['CMD', 'wget', '-q', '-O', '/dev/null', 'http://127.0.0.1:5433/rows'], 'interval': 500000000, 'retries': 30})
for _ in range(100):
    db.reload()
    if db.health == 'healthy': break
    time.sleep(0.2)
since = int(time.time()) - 1
# Each row sent until stored: a lookup while aardvark-dns reloads can fail (docs/compat.md).
worker = c.containers.create(image, ['sh', '-c', 'i=0; while true; do i=$((i+1)); until echo row-$i | nc -w 3 database 6379; do sleep 0.2; done; echo stored row-$i; sleep 0.3; done'],
    name='py-worker', labels={'app': 'py'}, network='py-app')
# compose 1.29's sequence through the same library: disconnect, connect with aliases, then start.
net.disconnect(worker)
net.connect(worker, aliases=['worker', worker.id[:12]])
before_start = c.api.inspect_container(worker.id)['NetworkSettings']['Networks']
worker.start()
rows = ''
for _ in range(100):
    rows = db.exec_run(['cat', '/data/rows']).output.decode()
    if rows.count('\\n') >= 3: break
    time.sleep(0.2)
worker.reload()
ex = db.exec_run(['sh', '-c', 'echo out; echo err >&2; exit 4'], demux=True)
tail = worker.logs(tail=1).decode()
top = db.top()
stats = db.stats(stream=False)
worker.pause(); worker.reload(); paused = worker.status
worker.unpause()
worker.restart(timeout=1); worker.reload()
events = [e['Action'] for e in c.events(since=since, until=int(time.time()) + 1, decode=True, filters={'container': 'py-worker'})]
listed = sorted(x.name for x in c.containers.list(filters={'label': 'app=py'}))
for x in (worker, db): x.remove(force=True)
net.remove()
pruned = c.networks.prune()
print(json.dumps({'health': db.health, 'before_start': before_start, 'nets': worker.attrs['NetworkSettings']['Networks'], 'rows': rows,
  'exec': [ex.exit_code, ex.output[0].decode(), ex.output[1].decode()], 'tail': tail, 'top': top['Processes'], 'mem': stats['memory_stats'].get('usage', 0),
  'paused': paused, 'status': worker.status, 'events': events, 'listed': listed,
  'left': [x.name for x in c.containers.list(all=True, filters={'label': 'app=py'})], 'nets_left': [n.name for n in c.networks.list(names=['py-app'])]}))
`);
    assert.equal(got.health, 'healthy');
    assert.deepEqual(Object.keys(got.before_start), ['py-app']);
    assert.deepEqual(Object.keys(got.nets), ['py-app']);
    assert.ok(got.nets['py-app'].Aliases.includes('worker'));
    assert.match(got.rows, /^row-1\nrow-2\nrow-3\n/);
    assert.deepEqual(got.exec, [4, 'out\n', 'err\n']);
    assert.match(got.tail, /^stored row-\d+\n$/);
    assert.ok(got.top.some((p: string[]) => p.join(' ').includes('nc -ll')), JSON.stringify(got.top));
    assert.ok(got.mem > 0);
    assert.equal(got.paused, 'paused');
    assert.equal(got.status, 'running');
    for (const a of ['start', 'pause', 'unpause', 'die', 'restart']) assert.ok(got.events.includes(a), `${a} in ${got.events}`);
    assert.deepEqual(got.listed, ['py-db', 'py-worker']);
    assert.deepEqual(got.left, []);
    assert.deepEqual(got.nets_left, []);
  });

  it('swarm services: create, a task running, its container, remove', async () => {
    const image = reg().seeded.refs.busybox;
    const got = await py(`
c.swarm.init(advertise_addr='127.0.0.1', listen_addr='127.0.0.1:0')
svc = c.services.create(${JSON.stringify(image)}, ['sleep', '300'], name='py-svc', labels={'app': 'py'}, env=['A=b'])
def running():
    return [t for t in svc.tasks() if t['Status']['State'] == 'running']
for _ in range(150):
    if len(running()) == 1: break
    time.sleep(0.2)
one = len(running())
ctrs = c.containers.list(filters={'label': 'com.docker.swarm.service.name=py-svc'}, ignore_removed=True)
env = ctrs[0].exec_run(['sh', '-c', 'echo $A']).output.decode() if ctrs else ''
names = [s.name for s in c.services.list()]
svc.reload()
labels = svc.attrs['Spec']['Labels']
svc.remove()
for _ in range(150):
    if not c.api.containers(all=True, filters={'label': 'com.docker.swarm.service.name=py-svc'}): break
    time.sleep(0.2)
left = len(c.api.containers(all=True, filters={'label': 'com.docker.swarm.service.name=py-svc'}))
c.swarm.leave(force=True)
print(json.dumps({'one': one, 'ctrs': len(ctrs), 'env': env, 'names': names, 'labels': labels, 'left': left}))
`);
    assert.deepEqual(got, { one: 1, ctrs: 1, env: 'b\n', names: ['py-svc'], labels: { app: 'py' }, left: 0 });
  });

  // docker-py's ServiceMode sends {"replicated": {"Replicas": 2}}: dockerd's JSON decoding matches
  // field names case-insensitively; Berth keeps one replica.
  it('swarm services: scale through ServiceMode', async () => {
    const got = await py(`
c.swarm.init(advertise_addr='127.0.0.1', listen_addr='127.0.0.1:0')
svc = c.services.create(${JSON.stringify(reg().seeded.refs.busybox)}, ['sleep', '300'], name='py-scaled')
svc.scale(2)
n = 0
for _ in range(150):
    n = len([t for t in svc.tasks() if t['Status']['State'] == 'running'])
    if n == 2: break
    time.sleep(0.2)
svc.remove()
c.swarm.leave(force=True)
print(json.dumps({'running': n}))
`);
    assert.deepEqual(got, { running: 2 });
  });

  it('volumes: create, mount, list, remove', async () => {
    const got = await py(`
v = c.volumes.create('py-vol')
out = c.containers.run(${JSON.stringify(reg().seeded.refs.busybox)}, ['sh', '-c', 'echo kept > /v/f; cat /v/f'], volumes={'py-vol': {'bind': '/v', 'mode': 'rw'}}, remove=True)
names = [x.name for x in c.volumes.list()]
v.remove()
print(json.dumps({'out': out.decode(), 'listed': 'py-vol' in names}))
`);
    assert.deepEqual(got, { out: 'kept\n', listed: true });
  });

  it('images: build, push, save and load', async () => {
    const got = await py(`
import io
img, _ = c.images.build(fileobj=io.BytesIO(b'FROM ${reg().seeded.refs.busybox}\\nRUN echo built > /built\\n'), tag='${reg().registry.host}/py-built:latest')
c.images.push('${reg().registry.host}/py-built', tag='latest')
data = b''.join(img.save())
c.images.remove(img.id, force=True)
loaded = c.images.load(data)
print(json.dumps({'loaded': [i.id for i in loaded], 'id': img.id}))
`);
    assert.deepEqual(got.loaded, [got.id]);
  });
});
