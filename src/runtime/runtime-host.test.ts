/**
 * What the driver's init() does to the host: the cgroup layout crun needs, and the favordynmods
 * hierarchy it holds while it runs. Needs root.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { controllersOnUnified } from './cgroups.js';
import { RuntimeDriver } from './runtime-driver.js';
import { DriverFixture } from '../../test/fixtures/runtime.js';

let fx: DriverFixture;

before(async () => {
  fx = await DriverFixture.start();
});

after(() => fx?.stop());

describe('runtime host', () => {
  test('after init, no controller is left on a hybrid cgroup2 tree (crun needs that)', async () => {
    assert.deepEqual(await controllersOnUnified(fx.driver.host.cgroupLayout), []);
  });

  test('while a driver runs it holds a controller-less cgroup hierarchy with favordynmods, mounted nowhere; close lets it go', async (t) => {
    const [major = 0] = (await readFile('/proc/sys/kernel/osrelease', 'utf8')).split('.').map(Number);
    if (major < 6) return t.skip('favordynmods needs Linux 6.0');
    const dir = join(fx.base, 'state-dynmods');
    const d = new RuntimeDriver({ stateDir: dir, defaultRuntime: 'crun' });
    const mountsUnder = async () => (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.split(' ')[4]?.startsWith(dir));
    // The suite's own driver holds one already.
    const held = await cgroupV1Fds();
    await d.init();
    try {
      assert.equal(await cgroupV1Fds(), held + 1, 'one more descriptor on a v1 cgroup hierarchy');
      assert.match(await readFile('/proc/self/cgroup', 'utf8'), /^\d+:name=berth-dynmods:\/$/m);
      assert.deepEqual(await mountsUnder(), [], 'nothing left in the mount table');
      // A second mount of the named hierarchy shows the options it was created with.
      const view = join(fx.base, 'dynmods-view');
      await mkdir(view, { recursive: true });
      await exec('mount', ['-t', 'cgroup', '-o', 'none,name=berth-dynmods', 'cgroup', view]);
      try {
        const line = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').find((l) => l.split(' ')[4] === view);
        assert.match(line ?? '', / - cgroup cgroup \S*favordynmods/);
      } finally {
        await exec('umount', [view]);
      }
    } finally {
      await d.close();
    }
    assert.equal(await cgroupV1Fds(), held, 'the descriptor is closed');
    assert.equal(existsSync(join(dir, 'cgroup-dynmods')), false);
  });
});

const exec = promisify(execFile);
const CGROUP_SUPER_MAGIC = 0x27e0eb;

/** How many of this process's descriptors are open on a cgroup v1 filesystem. */
async function cgroupV1Fds(): Promise<number> {
  let n = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    const type = await statfs(`/proc/self/fd/${fd}`).then((s) => s.type, () => 0);
    if (type === CGROUP_SUPER_MAGIC) n++;
  }
  return n;
}
