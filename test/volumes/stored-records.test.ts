/**
 * Stored volume rows are checked at load: a row of a stopped daemon's database whose JSON does not
 * parse, or whose fields have the wrong types, still gives a volume under its name, with its data,
 * usable and removable; `docker volume ls` keeps working.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { dockerOk as ok, useDaemon, useSeededRegistry } from '../harness/index.js';

describe('stored volume records', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');


  it('a damaged row keeps its volume and its data; wrong types read as unset', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    await ok(d, ['pull', '-q', image]);
    for (const name of ['good', 'typed', 'garbage']) {
      await ok(d, ['volume', 'create', '--label', 'k=v', name]);
      await ok(d, ['run', '--rm', '-v', `${name}:/data`, image, 'sh', '-c', `echo kept-${name} > /data/f`]);
    }
    await d.stop();

    const db = new Database(join(d.dataRoot, 'berth.db'));
    try {
      const set = (name: string, data: string) => assert.equal(db.prepare('UPDATE volumes SET data = ? WHERE name = ?').run(data, name).changes, 1);
      const typed = JSON.parse((db.prepare('SELECT data FROM volumes WHERE name = ?').get('typed') as { data: string }).data);
      set('typed', JSON.stringify({ ...typed, labels: ['k'], options: 7, createdAt: 'yesterday' }));
      set('garbage', '{"name": "garbage", "labels": ');
    } finally {
      db.close();
    }
    await d.restart();

    const names = (await ok(d, ['volume', 'ls', '--format', '{{.Name}}'])).trim().split('\n').sort();
    assert.deepEqual(names, ['garbage', 'good', 'typed']);
    const good = (await d.request('GET', '/volumes/good')).json();
    assert.deepEqual(good.Labels, { k: 'v' });
    for (const name of ['typed', 'garbage']) {
      const r = await d.request('GET', `/volumes/${name}`);
      assert.equal(r.status, 200, r.text());
      const v = r.json();
      assert.equal(v.Name, name);
      assert.equal(v.Driver, 'local');
      assert.equal(v.Labels, null, 'labels that cannot be read are none');
      assert.ok(!Number.isNaN(Date.parse(v.CreatedAt)), v.CreatedAt);
      // Its data is still there and the volume still mounts.
      assert.equal((await ok(d, ['run', '--rm', '-v', `${name}:/data`, image, 'cat', '/data/f'])).trim(), `kept-${name}`);
    }
    // Nothing is created over a damaged row, and it can be removed.
    assert.equal((await ok(d, ['volume', 'create', 'garbage'])).trim(), 'garbage');
    await ok(d, ['volume', 'rm', 'garbage']);
    assert.equal((await d.request('GET', '/volumes/garbage')).status, 404);
  });
});
