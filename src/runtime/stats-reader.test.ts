/** Usage and limits read from a real container's cgroup. Needs root. */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { controllerDir } from './cgroups.js';
import { DriverFixture } from '../../test/fixtures/runtime.js';

let fx: DriverFixture;

before(async () => {
  fx = await DriverFixture.start();
});

after(() => fx?.stop());

describe('stats reader', () => {
  test('memory and pids limits reach the cgroup and stats', async () => {
    const c = await fx.create(['sleep', '100'], { resources: { memory: 64 * 1024 * 1024, pidsLimit: 50 } });
    const driver = fx.driver;
    const exited = driver.lifecycle.waitExit(c.id);
    await driver.lifecycle.start(c.id);
    const path = await driver.stats.cgroupsPath(c.id);
    const layout = driver.host.cgroupLayout;
    if (driver.host.cgroupVersion === 1) {
      const mem = controllerDir(layout, 'memory', path);
      const pids = controllerDir(layout, 'pids', path);
      assert.ok(mem && pids);
      assert.equal((await readFile(join(mem, 'memory.limit_in_bytes'), 'utf8')).trim(), String(64 * 1024 * 1024));
      assert.equal((await readFile(join(pids, 'pids.max'), 'utf8')).trim(), '50');
    } else {
      const dir = controllerDir(layout, 'memory', path);
      assert.ok(dir);
      assert.equal((await readFile(join(dir, 'memory.max'), 'utf8')).trim(), String(64 * 1024 * 1024));
      assert.equal((await readFile(join(dir, 'pids.max'), 'utf8')).trim(), '50');
    }
    const stats = await driver.stats.read(c.id);
    assert.ok(stats);
    assert.equal(stats.memoryLimit, 64 * 1024 * 1024);
    assert.equal(stats.pidsLimit, 50);
    assert.ok(stats.pids >= 1);
    assert.ok(stats.memoryUsage > 0);
    assert.ok(stats.cpuUsageNs > 0);
    await driver.lifecycle.kill(c.id, 'KILL');
    await exited;
  });
});
