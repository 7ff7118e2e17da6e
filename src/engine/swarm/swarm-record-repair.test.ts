/**
 * Damaged swarm rows with nothing to restore them (no etcd): the store loads the rest, leaves the
 * damaged ones out with their rows on disk, names them in errors, and a removal deletes the row.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { openDatabase } from '../../state/db.js';
import { SwarmRecords } from '../../state/swarm-records.js';
import { SwarmObjectRecords } from '../../state/swarm-object-records.js';
import { SwarmStore } from './swarm-store.js';
import { SwarmBlobs } from './secrets.js';
import { tempDir } from '../../../test/fixtures/tar.js';

const meta = (id: string) => ({ id, version: 1, createdAt: '2026-01-01T00:00:00Z', updatedAt: '2026-01-01T00:00:00Z' });
const service = (id: string, name: string) => ({ ...meta(id), spec: { Name: name, TaskTemplate: { ContainerSpec: { Image: 'x' } } }, templateVersion: 0 });
const task = (id: string, serviceId: string) => ({
  ...meta(id),
  serviceId,
  serviceName: 's',
  slot: 1,
  nodeId: 'n1',
  spec: {},
  templateVersion: 0,
  desiredState: 'running',
  status: { timestamp: '', state: 'running', message: '', err: '', containerId: `c-${id}`, pid: 1 },
  restarts: [],
});

it('damaged swarm rows are left out, kept on disk, named in errors, and deleted by a removal', async (t) => {
  const db = openDatabase(join(await tempDir(t), 'berth.db'));
  t.after(() => db.close());
  const records = new SwarmRecords(db);
  const secrets = new SwarmObjectRecords(db, 'swarm_secrets');
  records.saveService('s1', 'good', 1, service('s1', 'good'));
  records.saveService('s2', 'bad', 2, service('s2', 'bad'));
  records.saveTask('t1', 's1', 1, task('t1', 's1'));
  records.saveTask('t2', 's1', 2, task('t2', 's1'));
  records.saveTask('t3', 's2', 3, task('t3', 's2'));
  secrets.save('k1', 'kept', 1, { ...meta('k1'), spec: { Name: 'kept', Labels: {} } });
  secrets.save('k2', 'lost', 2, { ...meta('k2'), spec: { Name: 'lost', Labels: {} } });
  db.prepare("UPDATE swarm_services SET data = '{\"id\": ' WHERE id = 's2'").run();
  db.prepare(`UPDATE swarm_tasks SET data = ? WHERE id = 't2'`).run(JSON.stringify({ ...task('t2', 's1'), status: null }));
  db.prepare("UPDATE swarm_secrets SET data = '[]' WHERE id = 'k2'").run();

  const store = new SwarmStore(records);
  store.load();
  assert.deepEqual([...store.services.keys()], ['s1']);
  assert.deepEqual([...store.tasks.keys()].sort(), ['t1', 't3'], "a damaged service's tasks stay; a damaged task is left out");
  assert.ok(store.unreadable.has('service', 's2'));
  assert.match(store.unreadable.error('service', 'bad')!.message, /^the stored record of service bad \(s2\) is damaged \(unreadable JSON: .+\); removing the service deletes it$/);
  assert.match(store.unreadable.error('task', 't2')!.message, /\(status, status\.state missing or of the wrong type\); its service gets a new task in its place$/);
  assert.equal(store.unreadable.error('service', 'good'), undefined);
  assert.equal((db.prepare('SELECT count(*) AS n FROM swarm_services').get() as { n: number }).n, 2, 'the damaged row stays on disk');

  const blobs = new SwarmBlobs('secret', secrets, () => 5, store.unreadable);
  blobs.load();
  assert.deepEqual(blobs.ids(), ['k1']);
  assert.throws(() => blobs.get('lost'), /^BerthError: the stored record of secret lost \(k2\) is damaged \(not an object\)/);
  assert.throws(() => blobs.get('nothing'), /secret nothing not found/);
  await assert.rejects(blobs.create({ Name: 'lost', Data: 'eA==' }), /secret lost already exists/, 'the damaged row keeps its name');
  await blobs.remove('lost', []);
  assert.equal((await blobs.create({ Name: 'lost', Data: 'eA==' })).spec.Name, 'lost', 'removed, the name is free');
  assert.equal((db.prepare("SELECT count(*) AS n FROM swarm_secrets WHERE id = 'k2'").get() as { n: number }).n, 0);

  // A damaged cluster row: outside any swarm, with the reason kept for every swarm call.
  records.saveCluster({ broken: true });
  store.load();
  assert.equal(store.cluster, undefined);
  assert.match(store.unreadable.clusterError()!.message, /^the stored swarm state of this node is damaged \(version, spec, joinTokens, node, node\.id, node\.version, node\.spec missing or of the wrong type\)/);
});
