/**
 * GET /containers/json keeps each container's entry as cached JSON: every change to a container
 * (rename, pause, stop, start, network connect and disconnect, health, removal) must show in the
 * next list, in dockerd's order and wording, with and without filters, limit and size.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';

interface Entry {
  Id: string;
  Names: string[];
  State: string;
  Status: string;
  Ports: { PrivatePort: number; Type: string; IP?: string; PublicPort?: number }[];
  HostConfig: { NetworkMode: string };
  NetworkSettings: { Networks: Record<string, { IPAddress: string; NetworkID: string }> };
  SizeRw?: number;
}

let image = '';
const tag = randomBytes(3).toString('hex');

async function list(d: TestDaemon, query = ''): Promise<Entry[]> {
  const r = await d.request('GET', `/v1.47/containers/json${query}`);
  assert.equal(r.status, 200, r.text());
  assert.equal(r.headers['content-length'], String(r.body.length));
  return r.json() as Entry[];
}

async function entry(d: TestDaemon, id: string, query = '?all=1'): Promise<Entry | undefined> {
  return (await list(d, query)).find((e) => e.Id === id);
}

async function ok(d: TestDaemon, method: string, path: string, body?: unknown): Promise<void> {
  const r = await d.request(method, path, body === undefined ? {} : { body });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path}: ${r.status} ${r.text()}`);
}

async function run(d: TestDaemon, name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await d.request('POST', `/containers/create?name=${name}`, { body: { Image: image, Cmd: ['sleep', '600'], ...extra } });
  assert.equal(r.status, 201, r.text());
  const id = r.json().Id as string;
  await ok(d, 'POST', `/containers/${id}/start`);
  return id;
}

describe('the container list', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  before(async () => {
    const d = daemon();
    image = reg().seeded.refs.busybox;
    const pull = await d.docker(['pull', image]);
    assert.equal(pull.code, 0, pull.stderr);
  });

  it('follows rename, pause, stop, start and removal', async () => {
    const d = daemon();
    const id = await run(d, `ls-a-${tag}`, { ExposedPorts: { '80/tcp': {} } });
    let e = await entry(d, id, '');
    assert.deepEqual(e?.Names, [`/ls-a-${tag}`]);
    assert.equal(e?.State, 'running');
    assert.match(e!.Status, /^Up /);
    assert.deepEqual(e?.Ports, [{ PrivatePort: 80, Type: 'tcp' }]);
    // The same list twice: the same bytes.
    const again = await d.request('GET', '/v1.47/containers/json?all=1');
    assert.deepEqual((await d.request('GET', '/v1.47/containers/json?all=1')).body, again.body);

    await ok(d, 'POST', `/containers/${id}/rename?name=ls-b-${tag}`);
    assert.deepEqual((await entry(d, id))?.Names, [`/ls-b-${tag}`]);

    await ok(d, 'POST', `/containers/${id}/pause`);
    e = await entry(d, id, '');
    assert.equal(e?.State, 'paused');
    assert.match(e!.Status, /^Up .* \(Paused\)$/);
    await ok(d, 'POST', `/containers/${id}/unpause`);
    e = await entry(d, id, '');
    assert.equal(e?.State, 'running');
    assert.doesNotMatch(e!.Status, /Paused/);

    await ok(d, 'POST', `/containers/${id}/stop?t=0`);
    assert.equal(await entry(d, id, ''), undefined, 'a stopped container leaves the default list');
    e = await entry(d, id);
    assert.equal(e?.State, 'exited');
    assert.match(e!.Status, /^Exited \(\d+\) /);
    assert.equal(e?.NetworkSettings.Networks.bridge?.IPAddress, '');

    await ok(d, 'POST', `/containers/${id}/start`);
    e = await entry(d, id, '');
    assert.equal(e?.State, 'running');
    assert.match(e!.Status, /^Up (Less than a second|\d+ seconds?)$/);
    assert.notEqual(e?.NetworkSettings.Networks.bridge?.IPAddress, '');

    await ok(d, 'DELETE', `/containers/${id}?force=1`);
    assert.equal(await entry(d, id), undefined);
  });

  it('follows network connect and disconnect, on running and stopped containers', async () => {
    const d = daemon();
    const net = `ls-net-${tag}`;
    const nr = await d.request('POST', '/networks/create', { body: { Name: net } });
    assert.equal(nr.status, 201, nr.text());
    const id = await run(d, `ls-n-${tag}`);
    assert.deepEqual(Object.keys((await entry(d, id))!.NetworkSettings.Networks), ['bridge']);

    await ok(d, 'POST', `/networks/${net}/connect`, { Container: id });
    let e = await entry(d, id);
    assert.deepEqual(Object.keys(e!.NetworkSettings.Networks).sort(), ['bridge', net].sort());
    assert.notEqual(e!.NetworkSettings.Networks[net]!.IPAddress, '');
    assert.equal(e!.NetworkSettings.Networks[net]!.NetworkID, nr.json().Id);

    await ok(d, 'POST', `/networks/bridge/disconnect`, { Container: id });
    e = await entry(d, id);
    assert.deepEqual(Object.keys(e!.NetworkSettings.Networks), [net]);

    await ok(d, 'POST', `/containers/${id}/stop?t=0`);
    await ok(d, 'POST', `/networks/${net}/disconnect`, { Container: id });
    e = await entry(d, id);
    assert.equal(e?.State, 'exited');
    // As in dockerd: NetworkMode stays as created, and no network is left to show.
    assert.equal(e?.HostConfig.NetworkMode, 'bridge');
    assert.deepEqual(Object.keys(e!.NetworkSettings.Networks), []);
    await ok(d, 'DELETE', `/containers/${id}?force=1`);
    await ok(d, 'DELETE', `/networks/${net}`);
  });

  it('shows health as it changes', async () => {
    const d = daemon();
    const id = await run(d, `ls-h-${tag}`, { Healthcheck: { Test: ['CMD-SHELL', 'test -f /ok'], Interval: 300e6, Retries: 1, StartPeriod: 60e9, StartInterval: 300e6 } });
    assert.match((await entry(d, id))!.Status, /^Up .*\(health: starting\)$/);
    const ex = await d.request('POST', `/containers/${id}/exec`, { body: { Cmd: ['touch', '/ok'] } });
    assert.equal(ex.status, 201, ex.text());
    await ok(d, 'POST', `/exec/${ex.json().Id}/start`, { Detach: true });
    let status = '';
    for (let i = 0; i < 100 && !/\(healthy\)$/.test(status); i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await entry(d, id))!.Status;
    }
    assert.match(status, /^Up .*\(healthy\)$/);
    assert.deepEqual((await list(d, `?filters=${encodeURIComponent(JSON.stringify({ health: ['healthy'] }))}`)).map((x) => x.Id), [id]);
    await ok(d, 'DELETE', `/containers/${id}?force=1`);
  });

  it('lists newest first, with limit, filters and size', async () => {
    const d = daemon();
    const older = await run(d, `ls-o-${tag}`, { Labels: { list: tag } });
    const newer = await run(d, `ls-y-${tag}`, { Labels: { list: tag } });
    const mine = (es: Entry[]) => es.map((e) => e.Id).filter((x) => x === older || x === newer);
    assert.deepEqual(mine(await list(d)), [newer, older]);
    assert.deepEqual((await list(d, '?limit=1')).map((e) => e.Id), [newer]);
    const byLabel = `?filters=${encodeURIComponent(JSON.stringify({ label: [`list=${tag}`] }))}`;
    assert.deepEqual((await list(d, byLabel)).map((e) => e.Id), [newer, older]);
    const sized = await list(d, `${byLabel}&size=1`);
    assert.equal(typeof sized[0]?.SizeRw, 'number');
    assert.deepEqual(Object.keys(sized[0]!).slice(-2), ['SizeRw', 'SizeRootFs']);
    await ok(d, 'POST', `/containers/${newer}/stop?t=0`);
    assert.deepEqual((await list(d, byLabel)).map((e) => e.Id), [older]);
    assert.deepEqual((await list(d, `${byLabel}&all=1`)).map((e) => e.Id), [newer, older]);
    await ok(d, 'DELETE', `/containers/${older}?force=1`);
    assert.deepEqual((await list(d, `${byLabel}&all=1`)).map((e) => e.Id), [newer]);
    await ok(d, 'DELETE', `/containers/${newer}?force=1`);
    assert.deepEqual(await list(d, byLabel), []);
  });
});
