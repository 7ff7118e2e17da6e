/**
 * /secrets and /configs with swarmkit's rules, through the API and the docker CLI, and their files in
 * task containers (`docker service create --secret/--config`).
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { eventually, runningTasks } from '../swarm/support.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('swarm secrets and configs', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';

  before(async () => {
    image = reg().seeded.refs.busybox;
  });
  after(async () => {
    await daemon().request('POST', '/swarm/leave?force=1').catch(() => undefined);
  });

  it('needs a swarm', async () => {
    const r = await daemon().request('GET', '/secrets');
    assert.equal(r.status, 503);
    assert.match(r.json().message, /not a swarm manager/);
    assert.equal((await daemon().request('POST', '/configs/create', { body: { Name: 'c', Data: b64('x') } })).status, 503);
  });

  it('creates, lists, inspects, updates labels of and removes secrets and configs through the API', async () => {
    const d = daemon();
    assert.equal((await d.request('POST', '/swarm/init', { body: { ListenAddr: '127.0.0.1:0', AdvertiseAddr: '127.0.0.1' } })).status, 200);
    for (const kind of ['secret', 'config'] as const) {
      const base = `/${kind}s`;
      const create = await d.request('POST', `${base}/create`, { body: { Name: `api_${kind}.1`, Labels: { a: 'b' }, Data: b64('hush'), Unknown: 1 } });
      assert.equal(create.status, 201, create.text());
      const id = create.json().ID as string;
      const dup = await d.request('POST', `${base}/create`, { body: { Name: `api_${kind}.1`, Data: b64('x') } });
      assert.equal(dup.status, 409);
      assert.match(dup.json().message, new RegExp(`${kind} api_${kind}.1 already exists`));
      for (const [body, msg] of [
        [{ Data: b64('x') }, /name must be provided/],
        [{ Name: '-bad', Data: b64('x') }, /invalid name, only 64/],
        [{ Name: 'empty' }, /data must be larger than 0/],
        [{ Name: 'big', Data: Buffer.alloc(kind === 'secret' ? 500 * 1024 : 1000 * 1024).toString('base64') }, /data must be larger than 0 and less than/],
      ] as const) {
        const r = await d.request('POST', `${base}/create`, { body });
        assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
        assert.match(r.json().message, msg);
      }

      const inspect = (await d.request('GET', `${base}/${id}`)).json();
      assert.equal(inspect.ID, id);
      assert.equal(inspect.Spec.Name, `api_${kind}.1`);
      assert.deepEqual(inspect.Spec.Labels, { a: 'b' });
      if (kind === 'secret') assert.equal(inspect.Spec.Data, undefined, 'secret data is never shown');
      else assert.equal(inspect.Spec.Data, b64('hush'));
      assert.equal((await d.request('GET', `${base}/api_${kind}.1`)).json().ID, id, 'by name');
      assert.equal((await d.request('GET', `${base}/nope`)).status, 404);

      const list = await d.request('GET', `${base}?filters=${encodeURIComponent(JSON.stringify({ label: ['a=b'], names: [`api_${kind}.1`] }))}`);
      assert.deepEqual(list.json().map((s: { ID: string }) => s.ID), [id]);
      assert.equal((await d.request('GET', `${base}?filters=${encodeURIComponent(JSON.stringify({ name: ['zzz'] }))}`)).json().length, 0);

      const version = inspect.Version.Index;
      const changeData = await d.request('POST', `${base}/${id}/update?version=${version}`, { body: { Name: `api_${kind}.1`, Data: b64('other') } });
      assert.equal(changeData.status, 400);
      assert.match(changeData.json().message, /only updates to Labels are allowed/);
      const relabel = await d.request('POST', `${base}/${id}/update?version=${version}`, { body: { Name: `api_${kind}.1`, Labels: { c: 'd' } } });
      assert.equal(relabel.status, 200, relabel.text());
      const after = (await d.request('GET', `${base}/${id}`)).json();
      assert.deepEqual(after.Spec.Labels, { c: 'd' });
      assert.ok(after.Version.Index > version);
      const stale = await d.request('POST', `${base}/${id}/update?version=${version}`, { body: { Name: `api_${kind}.1` } });
      assert.equal(stale.status, 500, 'stale version (dockerd: swarmkit\'s error, gRPC code Unknown)');
      assert.equal(stale.json().message, 'rpc error: code = Unknown desc = update out of sequence');

      assert.equal((await d.request('DELETE', `${base}/${id}`)).status, 204);
      assert.equal((await d.request('DELETE', `${base}/${id}`)).status, 404);
    }
  });

  it('puts secrets and configs into task containers with their uid, gid and mode (docker CLI)', async () => {
    const d = daemon();
    const secret = await d.docker(['secret', 'create', '--label', 'k=v', 'db_pass', '-'], { input: 's3cret!' });
    assert.equal(secret.code, 0, secret.stderr);
    const config = await d.docker(['config', 'create', 'app.conf', '-'], { input: 'listen=8080\n' });
    assert.equal(config.code, 0, config.stderr);
    const ls = await d.docker(['secret', 'ls', '--format', '{{.Name}}']);
    assert.equal(ls.stdout.trim(), 'db_pass');
    assert.equal((await d.docker(['config', 'inspect', '--format', '{{printf "%s" .Spec.Data}}', 'app.conf'])).stdout, 'listen=8080\n\n');

    const bad = await d.docker(['service', 'create', '--name', 'nosuch', '--secret', 'missing', image, 'sleep', '100']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /missing/);

    const create = await d.docker([
      'service', 'create', '--detach', '--name', 'uses_secrets',
      '--secret', 'db_pass',
      '--secret', 'source=db_pass,target=/etc/pw,uid=1000,gid=1000,mode=0400',
      '--config', 'source=app.conf,target=/etc/app.conf,mode=0440',
      '--config', 'app.conf',
      image, 'sleep', '1000',
    ]);
    assert.equal(create.code, 0, create.stderr);
    const [task] = await runningTasks(d, 'uses_secrets', 1, 30_000);
    const cid = task!.Status.ContainerStatus!.ContainerID;
    const sh = async (cmd: string) => {
      const r = await d.docker(['exec', cid, 'sh', '-c', cmd]);
      assert.equal(r.code, 0, r.stderr);
      return r.stdout;
    };
    assert.equal(await sh('cat /run/secrets/db_pass'), 's3cret!');
    assert.equal(await sh('stat -c "%u %g %a" /run/secrets/db_pass /etc/pw /etc/app.conf /app.conf'), '0 0 444\n1000 1000 400\n0 0 440\n0 0 444\n');
    assert.equal(await sh('cat /etc/pw; cat /etc/app.conf'), 's3cret!listen=8080\n');
    // Secrets never reach a disk: their host files are on a tmpfs.
    const fsType = execFileSync('findmnt', ['-n', '-o', 'FSTYPE', '--target', join(d.dataRoot, 'swarm', 'task-files')], { encoding: 'utf8' }).trim();
    assert.equal(fsType, 'tmpfs');
    const write = await d.docker(['exec', cid, 'sh', '-c', 'echo x > /run/secrets/db_pass']);
    assert.notEqual(write.code, 0, 'secret files are read-only');

    // An update adds a secret: the replacement task has it.
    const upd = await d.docker(['service', 'update', '--detach', '--secret-add', 'source=db_pass,target=extra', 'uses_secrets']);
    assert.equal(upd.code, 0, upd.stderr);
    const next = await eventually('the updated task', async () => {
      const [t] = await runningTasks(d, 'uses_secrets', 1, 30_000);
      return t!.Status.ContainerStatus!.ContainerID !== cid ? t : undefined;
    }, 60_000);
    const extra = await d.docker(['exec', next!.Status.ContainerStatus!.ContainerID, 'cat', '/run/secrets/extra']);
    assert.equal(extra.stdout, 's3cret!', extra.stderr);

    // In use: neither can go.
    const rm = await d.docker(['secret', 'rm', 'db_pass']);
    assert.notEqual(rm.code, 0);
    assert.match(rm.stderr, /secret 'db_pass' is in use by the following service: uses_secrets/);
    const rmc = await d.request('DELETE', '/configs/app.conf');
    assert.equal(rmc.status, 400);
    assert.match(rmc.json().message, /config 'app.conf' is in use by the following service: uses_secrets/);

    assert.equal((await d.docker(['service', 'rm', 'uses_secrets'])).code, 0);
    const lastCid = next!.Status.ContainerStatus!.ContainerID;
    await eventually('the task containers to go', async () => (await d.request('GET', `/containers/${lastCid}/json`)).status === 404);
    assert.equal((await d.docker(['secret', 'rm', 'db_pass'])).code, 0);
    assert.equal((await d.docker(['config', 'rm', 'app.conf'])).code, 0);
    // Survives a restart: the objects are stored with the swarm.
    assert.equal((await d.docker(['secret', 'create', 'kept', '-'], { input: 'k' })).code, 0);
    await d.kill9();
    await d.restart();
    assert.equal((await d.docker(['secret', 'inspect', '--format', '{{.Spec.Name}}', 'kept'])).stdout.trim(), 'kept');
  });
});
