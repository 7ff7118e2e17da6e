/**
 * Stored network rows are checked at load (issue 21): a row of a stopped daemon's database given
 * values of the wrong type reads as if they were unset, and a row that cannot be used at all (JSON
 * that does not parse, a driver Berth does not have) is skipped; `docker network ls` keeps working.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { dockerOk as ok, useDaemon, useSeededRegistry } from '../harness/index.js';

describe('stored network records', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');


  it('a corrupt row does not break listing, inspect or start; wrong types read as unset', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    await ok(d, ['pull', '-q', image]);
    for (const name of ['good', 'typed', 'garbage', 'alien']) await ok(d, ['network', 'create', '--label', 'k=v', name]);
    const typedId = (await ok(d, ['network', 'inspect', '-f', '{{.Id}}', 'typed'])).trim();
    await d.stop();

    const db = new Database(join(d.dataRoot, 'berth.db'));
    try {
      const row = (name: string) => db.prepare('SELECT data FROM networks WHERE name = ?').get(name) as { data: string };
      const set = (name: string, data: string) => assert.equal(db.prepare('UPDATE networks SET data = ? WHERE name = ?').run(data, name).changes, 1);
      const typed = JSON.parse(row('typed').data);
      set('typed', JSON.stringify({ ...typed, labels: 5, internal: 'yes', options: { 'com.docker.network.driver.mtu': 'abc', 'x.keep': 'me' }, created: 7 }));
      set('garbage', '{"name": "garbage", "driver": ');
      set('alien', JSON.stringify({ ...JSON.parse(row('alien').data), driver: 'macvlan' }));
    } finally {
      db.close();
    }
    await d.restart();

    const names = (await ok(d, ['network', 'ls', '--format', '{{.Name}}'])).trim().split('\n').sort();
    assert.deepEqual(names, ['bridge', 'good', 'host', 'none', 'typed']);
    const list = await d.request('GET', '/networks');
    assert.equal(list.status, 200);

    const inspected = (await d.request('GET', `/networks/${typedId}`)).json();
    assert.equal(inspected.Name, 'typed');
    assert.deepEqual(inspected.Labels, {}, 'labels of the wrong type read as none');
    assert.equal(inspected.Internal, false);
    assert.deepEqual(inspected.Options, { 'x.keep': 'me' }, 'an option whose value cannot work is dropped, others stay');
    assert.ok(!Number.isNaN(Date.parse(inspected.Created)));

    // The repaired network still works: a container on it gets an address of its subnet.
    const subnet = inspected.IPAM.Config[0].Subnet as string;
    const addr = (await ok(d, ['run', '--rm', '--network', 'typed', image, 'sh', '-c', "ip -4 -o addr show eth0 | awk '{print $4}'"])).trim();
    assert.equal(addr.split('.').slice(0, 2).join('.'), subnet.split('.').slice(0, 2).join('.'), `${addr} in ${subnet}`);

    // The unreadable rows keep their names: nothing is created over them.
    const again = await d.docker(['network', 'create', 'garbage']);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /already exists/);
    assert.equal((await d.request('GET', '/networks/alien')).status, 404);
  });
});
