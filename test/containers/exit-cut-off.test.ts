/**
 * berthd killed between recording a container's exit and releasing its network: the next daemon finds
 * an exited container that still holds endpoints, a published port and a namespace. It releases them
 * at start-up, so `docker start` works again and the address and port are free for others.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { useDaemon, useSeededRegistry } from '../harness/index.js';

describe('an exit whose network release was cut off', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  it('the next daemon releases the network of an exited container; it starts again', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    assert.equal((await d.docker(['pull', '-q', image])).code, 0);
    const id = (await d.docker(['run', '-d', '--name', 'cut', '-p', '127.0.0.1::80', image, 'sleep', '600'])).stdout.trim();
    assert.match(id, /^[0-9a-f]{64}$/);
    const pid = (await d.request('GET', `/containers/${id}/json`)).json().State.Pid as number;

    // The state a kill -9 right after the exit was recorded leaves: the record says exited, the
    // network is still held.
    await d.kill9();
    process.kill(pid, 'SIGKILL');
    const db = new Database(join(d.dataRoot, 'berth.db'));
    try {
      const row = db.prepare('SELECT data FROM containers WHERE id = ?').get(id) as { data: string };
      const data = JSON.parse(row.data);
      data.state = { ...data.state, status: 'exited', pid: 0, exitCode: 137, finishedAt: new Date().toISOString() };
      db.prepare('UPDATE containers SET data = ? WHERE id = ?').run(JSON.stringify(data), id);
    } finally {
      db.close();
    }
    await d.restart();

    const again = await d.docker(['start', 'cut']);
    assert.equal(again.code, 0, again.stderr);
    const c = (await d.request('GET', `/containers/${id}/json`)).json();
    assert.equal(c.State.Status, 'running');
    assert.ok(c.NetworkSettings.Networks.bridge.IPAddress, 'it has an address again');
    assert.equal(c.NetworkSettings.Ports['80/tcp'].length, 1, 'and its published port');
    assert.equal((await d.docker(['rm', '-f', 'cut'])).code, 0);
    assert.ok(!existsSync(join(d.dataRoot, 'containers', id)), 'removed');
  });
});
