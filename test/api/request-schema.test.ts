/**
 * Requests are checked against the Engine API schema before anything is stored: wrong JSON types,
 * integers out of their Go type's range and unknown enum values are a 400 naming the field; unknown
 * fields and nulls are taken as dockerd takes them. A record stored with bad values (by an older
 * berthd) is read defensively. Through raw HTTP, the docker CLI and docker-py.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';
import { haveDockerPy, runDockerPy } from '../harness/python.js';

const tag = randomBytes(3).toString('hex');
let image = '';

async function create(d: TestDaemon, body: Record<string, unknown>, name?: string) {
  return d.request('POST', `/containers/create${name ? `?name=${name}` : ''}`, { body });
}

async function assertListAndInspectWork(d: TestDaemon): Promise<string[]> {
  const ps = await d.docker(['ps', '-a', '--no-trunc', '--format', '{{.ID}}']);
  assert.equal(ps.code, 0, ps.stderr);
  const ids = ps.stdout.split('\n').filter(Boolean);
  if (ids.length) {
    const insp = await d.docker(['inspect', ...ids]);
    assert.equal(insp.code, 0, insp.stderr);
    assert.equal((JSON.parse(insp.stdout) as unknown[]).length, ids.length);
  }
  return ids;
}

describe('request schema', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  before(async () => {
    image = reg().seeded.refs.busybox;
    const pull = await daemon().docker(['pull', image]);
    assert.equal(pull.code, 0, pull.stderr);
  });

  it('POST /containers/create: NetworkMode 5 is a 400 naming the field, and nothing is stored', async () => {
    const d = daemon();
    const before = await assertListAndInspectWork(d);
    const r = await create(d, { Image: image, Cmd: ['true'], HostConfig: { NetworkMode: 5 } }, `nm5-${tag}`);
    assert.equal(r.status, 400, r.text());
    assert.equal(r.json().message, 'json: cannot unmarshal number into Go struct field HostConfig.NetworkMode of type string');
    assert.deepEqual(await assertListAndInspectWork(d), before);
    assert.equal((await d.request('GET', `/containers/nm5-${tag}/json`)).status, 404);
  });

  const refused: [string, Record<string, unknown>, RegExp][] = [
    ['SecurityOpt not a list', { HostConfig: { SecurityOpt: 'seccomp=unconfined' } }, /HostConfig\.SecurityOpt of type \[\]string/],
    ['Binds a string', { HostConfig: { Binds: '/tmp:/x' } }, /HostConfig\.Binds of type \[\]string/],
    ['a Binds element a number', { HostConfig: { Binds: ['/tmp:/x', 7] } }, /HostConfig\.Binds\[1\] of type string/],
    ['Mounts an object', { HostConfig: { Mounts: { Type: 'bind' } } }, /HostConfig\.Mounts of type \[\]Mount/],
    ['CapAdd a number', { HostConfig: { CapAdd: 5 } }, /HostConfig\.CapAdd/],
    ['Ulimits Soft a string', { HostConfig: { Ulimits: [{ Name: 'nofile', Soft: 'many', Hard: 10 }] } }, /HostConfig\.Ulimits\[0\]\.Soft of type int64/],
    ['ExtraHosts an object', { HostConfig: { ExtraHosts: { a: '1.2.3.4' } } }, /HostConfig\.ExtraHosts/],
    ['Devices a string', { HostConfig: { Devices: '/dev/null' } }, /HostConfig\.Devices/],
    ['Sysctls a list', { HostConfig: { Sysctls: ['net.ipv4.ip_forward=1'] } }, /HostConfig\.Sysctls/],
    ['Memory too large for int64', { HostConfig: { Memory: 1e30 } }, /number 1e\+30 into Go struct field HostConfig\.Memory of type int64/],
    ['Memory a fraction', { HostConfig: { Memory: 1.5 } }, /HostConfig\.Memory of type int64/],
    ['an unknown restart policy', { HostConfig: { RestartPolicy: { Name: 'sometimes' } } }, /"sometimes" for HostConfig\.RestartPolicy\.Name/],
    ['an unknown mount type', { HostConfig: { Mounts: [{ Type: 'nfs', Target: '/x' }] } }, /HostConfig\.Mounts\[0\]\.Type/],
    ['WorkingDir a number', { WorkingDir: 5 }, /WorkingDir of type string/],
    ['Env a string', { Env: 'A=1' }, /Env of type \[\]string/],
    ['Labels with a number value', { Labels: { a: 1 } }, /Labels\.a of type string/],
    ['Tty a string', { Tty: 'yes' }, /Tty of type bool/],
    ['Healthcheck interval a string', { Healthcheck: { Test: ['CMD', 'true'], Interval: '5s' } }, /Healthcheck\.Interval of type int64/],
    ['an endpoint Aliases string', { NetworkingConfig: { EndpointsConfig: { bridge: { Aliases: 'x' } } } }, /NetworkingConfig\.EndpointsConfig\.bridge\.Aliases/],
    ['HostConfig a list', { HostConfig: [] }, /HostConfig/],
  ];
  for (const [what, extra, message] of refused) {
    it(`POST /containers/create: ${what} → 400`, async () => {
      const r = await create(daemon(), { Image: image, Cmd: ['true'], ...extra });
      assert.equal(r.status, 400, r.text());
      assert.match(r.json().message, message);
    });
  }

  it('POST /containers/create: unknown fields are ignored, null is taken where Go takes it, Cmd may be a string', async () => {
    const d = daemon();
    const r = await create(d, {
      Image: image,
      Cmd: 'true',
      Entrypoint: null,
      Env: null,
      Labels: { keep: 'yes', empty: null },
      NoSuchField: { x: 1 },
      WorkingDir: null,
      HostConfig: { NetworkMode: null, Binds: null, SecurityOpt: null, MemorySwappiness: -1, RestartPolicy: null, Dns: ['1.1.1.1', null], Unknown: 5 },
      NetworkingConfig: null,
    }, `nulls-${tag}`);
    assert.equal(r.status, 201, r.text());
    const insp = await d.request('GET', `/containers/nulls-${tag}/json`);
    assert.equal(insp.status, 200, insp.text());
    const c = insp.json();
    assert.deepEqual(c.Config.Cmd, ['true']);
    assert.deepEqual(c.Config.Labels, { keep: 'yes', empty: '' });
    assert.equal(c.HostConfig.NetworkMode, 'bridge');
    const start = await d.request('POST', `/containers/nulls-${tag}/start`);
    assert.equal(start.status, 204, start.text());
    const wait = await d.request('POST', `/containers/nulls-${tag}/wait`);
    assert.equal(wait.json().StatusCode, 0);
    await assertListAndInspectWork(d);
  });

  it('POST /containers/create: field names in any case, as dockerd reads them', async () => {
    const d = daemon();
    const r = await create(d, { image: image, cmd: ['true'], hostconfig: { networkmode: 'none' }, LABELS: { Case: 'kept' } }, `case-${tag}`);
    assert.equal(r.status, 201, r.text());
    const c = (await d.request('GET', `/containers/case-${tag}/json`)).json();
    assert.equal(c.HostConfig.NetworkMode, 'none');
    assert.deepEqual(c.Config.Cmd, ['true']);
    assert.deepEqual(c.Config.Labels, { Case: 'kept' });
    assert.equal((await d.request('DELETE', `/containers/case-${tag}`)).status, 204);
  });

  it('POST /networks/create and connect: IPAM Config [null] is an empty config, wrong types are a 400', async () => {
    const d = daemon();
    const ok = await d.request('POST', '/networks/create', { body: { Name: `ipamnull-${tag}`, IPAM: { Config: [null] } } });
    assert.equal(ok.status, 201, ok.text());
    const bad = await d.request('POST', '/networks/create', { body: { Name: `bad-${tag}`, IPAM: { Config: 'x' } } });
    assert.equal(bad.status, 400, bad.text());
    assert.match(bad.json().message, /IPAM\.Config/);
    const name5 = await d.request('POST', '/networks/create', { body: { Name: 5 } });
    assert.equal(name5.status, 400, name5.text());
    const c = await create(d, { Image: image, Cmd: ['true'] });
    assert.equal(c.status, 201, c.text());
    const conn = await d.request('POST', `/networks/ipamnull-${tag}/connect`, { body: { Container: c.json().Id, EndpointConfig: { Aliases: 'x' } } });
    assert.equal(conn.status, 400, conn.text());
    assert.match(conn.json().message, /EndpointConfig\.Aliases/);
    assert.equal((await d.request('DELETE', `/containers/${c.json().Id}`)).status, 204);
    assert.equal((await d.request('DELETE', `/networks/ipamnull-${tag}`)).status, 204);
  });

  it('exec create and start bodies are checked', async () => {
    const d = daemon();
    const c = await create(d, { Image: image, Cmd: ['sleep', '60'] });
    assert.equal(c.status, 201, c.text());
    const id = c.json().Id as string;
    assert.equal((await d.request('POST', `/containers/${id}/start`)).status, 204);
    const bad = await d.request('POST', `/containers/${id}/exec`, { body: { Cmd: 5 } });
    assert.equal(bad.status, 400, bad.text());
    assert.match(bad.json().message, /Cmd of type \[\]string/);
    const ex = await d.request('POST', `/containers/${id}/exec`, { body: { Cmd: ['true'], Env: null } });
    assert.equal(ex.status, 201, ex.text());
    const start = await d.request('POST', `/exec/${ex.json().Id}/start`, { body: { Detach: 'yes' } });
    assert.equal(start.status, 400, start.text());
    assert.match(start.json().message, /Detach of type bool/);
    // The same body on a hijacking start (Upgrade: tcp, as the docker CLI sends it).
    const up = await d.upgrade('POST', `/exec/${ex.json().Id}/start`, { body: { Detach: false, Tty: 'no' } });
    assert.equal(up.upgraded, false);
    assert.equal(up.response.statusCode, 400);
    const chunks: Buffer[] = [];
    for await (const c of up.response) chunks.push(c as Buffer);
    assert.match(Buffer.concat(chunks).toString(), /Tty of type bool/);
    assert.equal((await d.request('DELETE', `/containers/${id}?force=1`)).status, 204);
  });

  it('typed query parameters: integers and enums; name filters that are no valid expression match nothing', async () => {
    const d = daemon();
    const limit = await d.request('GET', '/containers/json?limit=abc');
    assert.equal(limit.status, 400, limit.text());
    assert.match(limit.json().message, /limit/);
    const cond = await d.request('POST', '/containers/nothing/wait?condition=never');
    assert.equal(cond.status, 400, cond.text());
    const t = await d.request('POST', '/containers/nothing/stop?t=1e999');
    assert.equal(t.status, 400, t.text());
    const bad = await d.request('GET', `/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify({ name: ['[[['] }))}`);
    assert.equal(bad.status, 200, bad.text());
    assert.deepEqual(bad.json(), []);
    const c = await create(d, { Image: image, Cmd: ['true'] }, `rx-${tag}`);
    assert.equal(c.status, 201, c.text());
    const re = await d.request('GET', `/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify({ name: ['[[[', `^/?rx-${tag}$`] }))}`);
    assert.equal(re.status, 200, re.text());
    assert.deepEqual(re.json().map((e: { Id: string }) => e.Id), [c.json().Id]);
    const ps = await d.docker(['ps', '-a', '--filter', 'name=[[[']);
    assert.equal(ps.code, 0, ps.stderr);
  });

  it('docker-py: NetworkMode 5 is an APIError 400 and the list still works', { skip: !haveDockerPy() && 'no .venv with docker-py' }, async () => {
    const d = daemon();
    const r = await runDockerPy(
      d.socket,
      `
import docker, json
c = docker.from_env()
out = {}
try:
    c.api.create_container(${JSON.stringify(image)}, ['true'], host_config={'NetworkMode': 5})
    out['created'] = True
except docker.errors.APIError as e:
    out['status'] = e.status_code
    out['explanation'] = e.explanation
out['listed'] = len(c.containers.list(all=True))
print(json.dumps(out))
`,
    );
    assert.equal(r.code, 0, r.stderr);
    const got = JSON.parse(r.stdout);
    assert.equal(got.status, 400);
    assert.match(got.explanation, /HostConfig\.NetworkMode/);
    assert.ok(got.listed >= 0);
    await assertListAndInspectWork(d);
  });

  it('a record stored with values of the wrong type is read defensively after a restart', async () => {
    const d = daemon();
    const c = await create(d, { Image: image, Cmd: ['true'], Labels: { poisoned: '1' } }, `poisoned-${tag}`);
    assert.equal(c.status, 201, c.text());
    const id = c.json().Id as string;
    const c2 = await create(d, { Image: image, Cmd: ['true'] }, `unreadable-${tag}`);
    assert.equal(c2.status, 201, c2.text());
    const id2 = c2.json().Id as string;
    await d.stop();
    const db = new Database(join(d.dataRoot, 'berth.db'));
    try {
      // Berth's own part of a record, which no schema describes, unreadable.
      const row2 = db.prepare('SELECT data FROM containers WHERE id = ?').get(id2) as { data: string };
      db.prepare('UPDATE containers SET data = ? WHERE id = ?').run(JSON.stringify({ ...JSON.parse(row2.data), network: null }), id2);
      const row = db.prepare('SELECT data FROM containers WHERE id = ?').get(id) as { data: string };
      const data = JSON.parse(row.data);
      // What older versions stored from requests they did not check.
      data.hostConfig.NetworkMode = 5;
      data.hostConfig.Binds = '/tmp:/x';
      data.hostConfig.SecurityOpt = 'x';
      data.hostConfig.CapAdd = [5];
      data.config.Env = ['A=1', 7];
      data.config.Labels.bad = 3;
      db.prepare('UPDATE containers SET data = ? WHERE id = ?').run(JSON.stringify(data), id);
    } finally {
      db.close();
    }
    await d.restart();
    const ps = await d.docker(['ps', '-a', '--no-trunc', '--format', '{{.ID}} {{.Names}}']);
    assert.equal(ps.code, 0, ps.stderr);
    assert.ok(ps.stdout.includes(`${id2} unreadable-${tag}`), ps.stdout);
    const insp2 = await d.request('GET', `/containers/${id2}/json`);
    assert.ok(!/is not|Cannot read|undefined/.test(insp2.text()), insp2.text());
    assert.equal((await d.request('DELETE', `/containers/${id2}?force=1`)).status, 204);
    const ids = await assertListAndInspectWork(d);
    assert.ok(ids.includes(id));
    const list = await d.request('GET', '/containers/json?all=1');
    assert.equal(list.status, 200, list.text());
    const insp = await d.request('GET', `/containers/${id}/json`);
    assert.equal(insp.status, 200, insp.text());
    assert.deepEqual(insp.json().Config.Labels, { poisoned: '1' });
    assert.ok(d.logTail().includes('stored container has values of the wrong type'));
    const start = await d.request('POST', `/containers/${id}/start`);
    assert.equal(start.status, 204, start.text());
    assert.equal((await d.request('POST', `/containers/${id}/wait`)).json().StatusCode, 0);
  });
});
