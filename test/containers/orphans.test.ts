/**
 * A restart reconciles what berthd made on the host against its records: a running container whose
 * record is gone (its database restored from an older copy while berthd was down) leaves no process,
 * conmon, cgroup, overlay mount, namespace, veth or runtime state behind.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { isAlive, mountsUnder, useDaemon, useSeededRegistry } from '../harness/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('orphans after kill -9', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');

  it('removes what a container without a record left on the host', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    const prefix = /--network-prefix (\S+)/.exec(d.logs())?.[1]!;
    const links = () =>
      execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' })
        .split('\n')
        .map((l) => l.split(':')[1]?.trim().split('@')[0] ?? '')
        .filter((n) => n.startsWith(prefix) && n !== `${prefix}0`);
    assert.equal((await d.docker(['pull', '-q', image])).code, 0);
    const kept = (await d.docker(['run', '-d', '--name', 'kept', image, 'sleep', '1000'])).stdout.trim();
    const run = await d.docker(['run', '-d', '--name', 'orphan', image, 'sleep', '1000']);
    assert.equal(run.code, 0, run.stderr);
    const id = run.stdout.trim();
    const pid = (await d.request('GET', `/containers/${id}/json`)).json().State.Pid as number;
    const runtimeDir = join(d.execRoot, 'runtime', 'containers', id);
    const conmonPid = Number(readFileSync(join(runtimeDir, 'conmon.pid'), 'utf8').trim());
    const cgroups = readdirSync('/sys/fs/cgroup').map((m) => join('/sys/fs/cgroup', m, 'berth', id)).filter((p) => existsSync(p));
    assert.ok(isAlive(pid) && isAlive(conmonPid));
    assert.ok(cgroups.length > 0, 'the container has a cgroup');
    assert.ok(mountsUnder(d.dir).some((m) => m.includes(id)), 'its rootfs and namespace are mounted');

    const vethsBefore = links(); // kept's and orphan's veths, and the ready pool's
    await d.kill9();
    const db = new Database(join(d.dataRoot, 'berth.db'));
    try {
      assert.equal(db.prepare('DELETE FROM containers WHERE id = ?').run(id).changes, 1);
    } finally {
      db.close();
    }
    await d.restart();

    assert.equal((await d.request('GET', `/containers/${id}/json`)).status, 404);
    // The restart removes the old ready pool's veths and keeps kept's: of the old veths only one may stay.
    const oldVeths = () => links().filter((n) => vethsBefore.includes(n));
    for (let k = 0; k < 40 && (isAlive(pid) || isAlive(conmonPid) || mountsUnder(d.dir).some((m) => m.includes(id)) || oldVeths().length > 1); k++) await sleep(250);
    assert.ok(!isAlive(pid), 'the container process is gone');
    assert.ok(!isAlive(conmonPid), 'its conmon is gone');
    assert.deepEqual(mountsUnder(d.dir).filter((m) => m.includes(id)), []);
    assert.deepEqual(cgroups.filter((p) => existsSync(p)), []);
    assert.ok(!existsSync(runtimeDir), 'the runtime state is gone');
    assert.ok(!existsSync(join(d.dataRoot, 'containers', id)), 'the container dir is gone');
    assert.equal(oldVeths().length, 1, `only kept's veth stays of ${vethsBefore.join(', ')}`);
    // The other container was left alone.
    const other = (await d.request('GET', `/containers/${kept}/json`)).json().State;
    assert.equal(other.Status, 'running');
    assert.equal((await d.docker(['exec', 'kept', 'true'])).code, 0);
    // The name is free again.
    assert.equal((await d.docker(['run', '--rm', '--name', 'orphan', image, 'true'])).code, 0);
    assert.equal((await d.docker(['rm', '-f', 'kept'])).code, 0);
  });
});
