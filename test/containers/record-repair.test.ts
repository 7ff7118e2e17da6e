/**
 * Stored container records damaged while the daemon was stopped (Berth's own fields of the wrong
 * type, a lost state, JSON that does not parse): the daemon starts, repairs what it can, shows a
 * container whose state is lost as dead with an error naming it, and lets `docker rm` remove it.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { useDaemonWithBusybox } from '../harness/busybox-daemon.js';

const tag = randomBytes(3).toString('hex');

describe('damaged container records', () => {
  const { daemon, image: pulled } = useDaemonWithBusybox();
  let image = '';
  before(() => {
    image = pulled();
  });

  it('are repaired at start-up: inspect, list, start and rm work; a lost state reads as dead with an error naming the container', async () => {
    const d = daemon();
    const ids: Record<string, string> = {};
    for (const name of ['netless', 'stateless', 'garbled']) {
      const r = await d.docker(['run', '--name', `${name}-${tag}`, image, 'echo', name]);
      assert.equal(r.code, 0, r.stderr);
      ids[name] = (await d.docker(['inspect', '--format', '{{.Id}}', `${name}-${tag}`])).stdout.trim();
    }
    await d.stop();
    const db = new Database(join(d.dataRoot, 'berth.db'));
    try {
      const read = (id: string) => JSON.parse((db.prepare('SELECT data FROM containers WHERE id = ?').get(id) as { data: string }).data);
      const write = (id: string, data: string) => db.prepare('UPDATE containers SET data = ? WHERE id = ?').run(data, id);
      write(ids.netless!, JSON.stringify({ ...read(ids.netless!), network: null, logPath: 5, restartCount: 'x', mountPoints: {} }));
      write(ids.stateless!, JSON.stringify({ ...read(ids.stateless!), state: { status: 'sleeping' }, created: 7 }));
      write(ids.garbled!, read(ids.garbled!) && '{"id": "truncat');
    } finally {
      db.close();
    }
    await d.restart();

    const ps = await d.docker(['ps', '-a', '--no-trunc', '--format', '{{.ID}} {{.Status}}']);
    assert.equal(ps.code, 0, ps.stderr);
    for (const id of Object.values(ids)) assert.ok(ps.stdout.includes(id), ps.stdout);
    const insp = await d.docker(['inspect', ...Object.values(ids)]);
    assert.equal(insp.code, 0, insp.stderr);
    const [netless, stateless, garbled] = JSON.parse(insp.stdout) as Record<string, any>[];

    // Only Berth's own fields were damaged: the container keeps its state, logs and can run again.
    assert.equal(netless!.State.Status, 'exited');
    assert.equal(netless!.LogPath, join(d.dataRoot, 'containers', ids.netless!, 'ctr.log'));
    assert.equal((await d.docker(['logs', ids.netless!])).stdout, 'netless\n');
    const start = await d.docker(['start', '-a', ids.netless!]);
    assert.equal(start.code, 0, start.stderr);
    assert.equal(start.stdout, 'netless\n');

    // The state is lost: dead, with an error naming the container; the name is kept.
    assert.equal(stateless!.State.Status, 'dead');
    assert.equal(stateless!.State.Dead, true);
    assert.equal(stateless!.State.Error, `the stored state of container ${ids.stateless} was unreadable`);
    assert.equal(stateless!.Name, `/stateless-${tag}`);
    assert.ok(!Number.isNaN(Date.parse(stateless!.Created)));

    // Nothing of the JSON is readable: dead, under its stored name, with the parse error.
    assert.equal(garbled!.State.Status, 'dead');
    assert.equal(garbled!.Name, `/garbled-${tag}`);
    assert.match(garbled!.State.Error, new RegExp(`^the stored record of container ${ids.garbled} was unreadable \\(.+\\)$`));
    assert.ok(d.logTail().includes('stored container record was damaged; repaired'));

    for (const name of ['stateless', 'garbled']) {
      const rm = await d.docker(['rm', `${name}-${tag}`]);
      assert.equal(rm.code, 0, rm.stderr);
      const again = await d.docker(['run', '--rm', '--name', `${name}-${tag}`, image, 'true']);
      assert.equal(again.code, 0, `the name is free again: ${again.stderr}`);
    }
    assert.equal((await d.docker(['rm', ids.netless!])).code, 0);
  });
});
