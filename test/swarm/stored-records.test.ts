/**
 * Swarm rows damaged in a stopped daemon's database: the daemon starts and the rest of the swarm
 * loads. A service, task, secret or config row that does not read is left out (kept on disk, its
 * service's tasks left running) until etcd's snapshot gives the whole document again
 * (src/engine/swarm/swarm-record-repair.test.ts covers a row nothing restores). A damaged cluster row
 * leaves the node outside any swarm, says so on every swarm call, refuses init until `swarm leave --force`.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { useDaemon, useSeededRegistry, isAlive } from '../harness/index.js';
import { eventually, runningTasks } from './support.js';

const LOOP = ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 0.2; done'];

describe('stored swarm records', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  after(async () => {
    await daemon().request('POST', '/swarm/leave?force=1').catch(() => undefined);
  });

  const edit = (dataRoot: string, fn: (db: Database.Database) => void) => {
    const db = new Database(join(dataRoot, 'berth.db'));
    try {
      fn(db);
    } finally {
      db.close();
    }
  };

  it('a damaged service, task, secret or config row is left out with a clear error; the rest loads', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    const init = await d.request('POST', '/swarm/init', { body: { ListenAddr: '127.0.0.1:0', AdvertiseAddr: '127.0.0.1' } });
    assert.equal(init.status, 200, init.text());
    const create = async (path: string, body: object) => {
      const r = await d.request('POST', path, { body });
      assert.equal(r.status, 201, r.text());
      return r.json().ID as string;
    };
    const data = Buffer.from('s').toString('base64');
    await create('/secrets/create', { Name: 'kept', Data: data });
    const lostSecret = await create('/secrets/create', { Name: 'lost', Data: data });
    const lostConfig = await create('/configs/create', { Name: 'conf', Data: data });
    for (const name of ['good', 'bad']) await create('/services/create', { Name: name, TaskTemplate: { ContainerSpec: { Image: image, Args: LOOP } }, Mode: { Replicated: { Replicas: 1 } } });
    const [goodTask] = await runningTasks(d, 'good', 1);
    const [badTask] = await runningTasks(d, 'bad', 1);
    const badService = (await d.request('GET', '/services/bad')).json().ID as string;
    const badPid = badTask!.Status.ContainerStatus!.PID;
    await d.stop();

    edit(d.dataRoot, (db) => {
      const set = (table: string, id: string, text: string) => assert.equal(db.prepare(`UPDATE ${table} SET data = ? WHERE id = ?`).run(text, id).changes, 1, `${table} ${id}`);
      set('swarm_services', badService, '{"id": "truncated');
      const task = JSON.parse((db.prepare('SELECT data FROM swarm_tasks WHERE id = ?').get(goodTask!.ID) as { data: string }).data);
      delete task.status;
      set('swarm_tasks', goodTask!.ID, JSON.stringify(task));
      set('swarm_secrets', lostSecret, 'x');
      set('swarm_configs', lostConfig, '{"spec": 5}');
    });
    await d.restart();

    // Left out at load, kept on disk, then read whole again from the cluster's etcd.
    assert.equal((await d.request('GET', '/swarm')).status, 200);
    const names = async (path: string) => ((await d.request('GET', path)).json() as { Spec: { Name: string } }[]).map((s) => s.Spec.Name).sort();
    assert.ok((await names('/services')).includes('good'));
    assert.ok((await names('/secrets')).includes('kept'));
    for (const w of ['service', 'task', 'secret', 'config']) assert.ok(d.logs().includes(`stored swarm ${w} is damaged; left out, its row kept`), w);
    await eventually('the damaged rows restored from etcd', async () => {
      const ok = await Promise.all([`/services/${badService}`, `/tasks/${goodTask!.ID}`, `/secrets/${lostSecret}`, `/configs/${lostConfig}`].map(async (p) => (await d.request('GET', p)).status === 200));
      return ok.every(Boolean);
    });
    assert.deepEqual(await names('/services'), ['bad', 'good']);
    assert.deepEqual(await names('/secrets'), ['kept', 'lost']);
    assert.deepEqual(await names('/configs'), ['conf']);
    edit(d.dataRoot, (db) => {
      const read = (table: string, id: string) => JSON.parse((db.prepare(`SELECT data FROM ${table} WHERE id = ?`).get(id) as { data: string }).data);
      assert.equal(read('swarm_services', badService).spec.Name, 'bad');
      assert.equal(read('swarm_secrets', lostSecret).spec.Name, 'lost');
      assert.equal(read('swarm_configs', lostConfig).spec.Name, 'conf');
    });
    // Both services run: the damaged service's task was never stopped; the damaged task is running or replaced.
    const [bad] = await runningTasks(d, 'bad', 1);
    assert.equal(bad!.Status.ContainerStatus!.PID, badPid, "the damaged service's container ran on");
    assert.ok(isAlive(badPid));
    await runningTasks(d, 'good', 1);
  });

  it('a damaged cluster row: the daemon runs outside any swarm, says why, and `swarm leave --force` starts over', async () => {
    const d = daemon();
    await d.stop();
    edit(d.dataRoot, (db) => assert.equal(db.prepare('UPDATE swarm_cluster SET data = ?').run('{"spec": {}, "node": 1').changes, 1));
    await d.restart();

    assert.equal((await d.request('GET', '/_ping')).status, 200);
    assert.equal((await d.docker(['ps', '-a'])).code, 0);
    const swarm = await d.request('GET', '/swarm');
    assert.equal(swarm.status, 503);
    assert.match(swarm.json().message, /^the stored swarm state of this node is damaged \(unreadable JSON: .+\): "docker swarm leave --force" forgets it$/);
    const init = await d.request('POST', '/swarm/init', { body: { ListenAddr: '127.0.0.1:0', AdvertiseAddr: '127.0.0.1' } });
    assert.equal(init.status, 503);
    assert.match(init.json().message, /stored swarm state of this node is damaged/);
    assert.equal((await d.request('POST', '/swarm/leave')).status, 503);

    const leave = await d.request('POST', '/swarm/leave?force=1');
    assert.equal(leave.status, 200, leave.text());
    edit(d.dataRoot, (db) => assert.equal((db.prepare('SELECT count(*) AS n FROM swarm_cluster').get() as { n: number }).n, 0));
    const again = await d.request('POST', '/swarm/init', { body: { ListenAddr: '127.0.0.1:0', AdvertiseAddr: '127.0.0.1' } });
    assert.equal(again.status, 200, again.text());
  });
});
