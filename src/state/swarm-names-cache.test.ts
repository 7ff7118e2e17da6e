/**
 * Migration 9: the swarm tables are a cache of etcd, so two records of one name (an older cluster's
 * duplicates) must both fit; the rows a database had before the migration are kept.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openDatabase } from './db.js';
import { MIGRATIONS } from './migrations.js';
import { SwarmRecords } from './swarm-records.js';
import { SwarmObjectRecords } from './swarm-object-records.js';
import { tempDir } from '../../test/fixtures/tar.js';

it('a database from before migration 9 keeps its swarm rows, and then takes two records of one name', async (t) => {
  const path = join(await tempDir(t), 'berth.db');
  const old = new Database(path);
  for (const m of MIGRATIONS.slice(0, 8)) old.exec(m);
  old.pragma('user_version = 8');
  old.prepare("INSERT INTO swarm_services(id, name, data, created_at) VALUES ('s1', 'web', '{}', 1)").run();
  old.prepare("INSERT INTO swarm_secrets(id, name, data, created_at) VALUES ('k1', 'pw', '{}', 1)").run();
  assert.throws(() => old.prepare("INSERT INTO swarm_services(id, name, data, created_at) VALUES ('s2', 'web', '{}', 2)").run(), /UNIQUE/);
  old.close();

  const db = openDatabase(path);
  t.after(() => db.close());
  assert.equal(db.pragma('user_version', { simple: true }), MIGRATIONS.length);
  const services = new SwarmRecords(db);
  services.saveService('s2', 'web', 2, { id: 's2' });
  assert.deepEqual(services.services().map((s) => s.id), ['s1', 's2']);
  const secrets = new SwarmObjectRecords(db, 'swarm_secrets');
  secrets.save('k2', 'pw', 2, { id: 'k2' });
  const configs = new SwarmObjectRecords(db, 'swarm_configs');
  configs.save('c1', 'conf', 1, { id: 'c1' });
  configs.save('c2', 'conf', 2, { id: 'c2' });
  const count = (table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  assert.deepEqual([count('swarm_services'), count('swarm_secrets'), count('swarm_configs')], [2, 2, 2]);
});
