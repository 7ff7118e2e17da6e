/** docker-py (the official Python client, from PyPI) running containers on berthd. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { runDockerPy } from '../harness/python.js';

describe('docker-py: containers', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  it('runs in the foreground and background, lists, stops, reads logs', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    const script = `
import docker, json
c = docker.from_env()
img = c.images.pull(${JSON.stringify(image.replace(/:latest$/, ''))}, tag='latest')
out = c.containers.run(${JSON.stringify(image)}, ['sh', '-c', 'echo hi; echo there'], remove=True)
bg = c.containers.run(${JSON.stringify(image)}, ['sh', '-c', 'echo bg; sleep 60'], detach=True, name='py-bg', labels={'k': 'v'})
listed = [x.name for x in c.containers.list(filters={'label': 'k=v'})]
bg.reload()
status = bg.status
bg.stop(timeout=1)
bg.reload()
err = None
try:
    c.containers.run(${JSON.stringify(image)}, ['sh', '-c', 'echo oops >&2; exit 3'])
except docker.errors.ContainerError as e:
    err = [e.exit_status, e.stderr.decode()]
print(json.dumps({'out': out.decode(), 'listed': listed, 'status': status, 'after': bg.status, 'exit': bg.attrs['State']['ExitCode'], 'logs': bg.logs().decode(), 'err': err, 'img': img.id}))
`;
    const r = await runDockerPy(d.socket, script);
    assert.equal(r.code, 0, r.stderr);
    const got = JSON.parse(r.stdout);
    assert.equal(got.out, 'hi\nthere\n');
    assert.deepEqual(got.listed, ['py-bg']);
    assert.equal(got.status, 'running');
    assert.equal(got.after, 'exited');
    assert.equal(got.exit, 137);
    assert.equal(got.logs, 'bg\n');
    assert.deepEqual(got.err, [3, 'oops\n']);
    assert.match(got.img, /^sha256:[a-f0-9]{64}$/);
  });
});
