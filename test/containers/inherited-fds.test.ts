/**
 * A descriptor berthd inherited without close-on-exec (here a FIFO its starter opened as fd 99, as a
 * shell's pipe would be) reaches nothing berthd starts: not conmon, not the container's process, and
 * berthd itself lets go of it, so the starter sees the pipe close while containers live on.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { makeTempDir, removeDirSync, useDaemon, useSeededRegistry } from '../harness/index.js';

/** Pids (among the given) with a descriptor open on `path`. */
function holders(pids: number[], path: string): number[] {
  return pids.filter((pid) => {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      return false; // gone
    }
    return fds.some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === path;
      } catch {
        return false;
      }
    });
  });
}

/** Every process on the host, to find any other holder (etcd, aardvark-dns, the shells). */
const allPids = () => readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number);

describe('descriptors berthd inherited', () => {
  const dir = makeTempDir('inherited-fd');
  const fifo = join(dir, 'starter.fifo');
  execFileSync('mkfifo', [fifo]);
  after(() => removeDirSync(dir));
  // The wrapper opens the FIFO (read-write: no wait for a peer) on fd 99, without close-on-exec, and
  // becomes berthd: what a session's shell hands a daemon it starts.
  const daemon = useDaemon({ wrap: ['bash', '-c', 'exec "$@" 99<>"$0"', fifo] });
  const reg = useSeededRegistry('open');

  it('are closed at start-up: conmon, the container and berthd hold none, and berthd answers', async () => {
    const d = daemon();
    assert.equal((await d.request('GET', '/_ping')).status, 200);
    const image = reg().seeded.refs.busybox;
    assert.equal((await d.docker(['pull', '-q', image])).code, 0);
    const run = await d.docker(['run', '-d', image, 'sleep', '1000']);
    assert.equal(run.code, 0, run.stderr);
    const id = run.stdout.trim();
    try {
      const pid = (await d.request('GET', `/containers/${id}/json`)).json().State.Pid as number;
      const conmonPid = Number(readFileSync(join(d.execRoot, 'runtime', 'containers', id, 'conmon.pid'), 'utf8').trim());
      assert.ok(pid > 0 && conmonPid > 0);
      assert.deepEqual(holders([d.pid, conmonPid, pid], fifo), [], 'berthd, conmon and the container hold no link to the FIFO');
      assert.deepEqual(holders(allPids(), fifo), [], 'no process on the host holds it');
      assert.equal((await d.request('GET', '/_ping')).status, 200);
      assert.match(d.logs(), /closed inherited descriptors.*99 .*starter\.fifo/);
    } finally {
      assert.equal((await d.docker(['rm', '-f', id])).code, 0);
    }
  });
});
