/** log-opts max-size and max-file: old output rotates away, the newest stays readable in order. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { useDaemon, useSeededRegistry } from '../harness/index.js';

describe('log rotation', () => {
  const daemon = useDaemon({ args: ['--log-opt', 'max-file=2'] });
  const reg = useSeededRegistry('open');

  it('keeps at most max-file files of about max-size, and logs shows the newest lines in order', async () => {
    const d = daemon();
    const image = reg().seeded.refs.busybox;
    assert.equal((await d.docker(['pull', '-q', image])).code, 0);
    // 3000 numbered lines of ~100 bytes, slowly enough for rotation to keep up.
    const script = 'i=0; while [ $i -lt 3000 ]; do printf "%05d %s\\n" $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); [ $((i % 100)) -eq 0 ] && sleep 0.05; done';
    const run = await d.docker(['run', '-d', '--log-opt', 'max-size=20k', image, 'sh', '-c', script]);
    assert.equal(run.code, 0, run.stderr);
    const id = run.stdout.trim();
    assert.equal((await d.docker(['wait', id], { timeoutMs: 60_000 })).stdout.trim(), '0');
    const logPath = (await d.request('GET', `/containers/${id}/json`)).json().LogPath as string;
    assert.ok(existsSync(`${logPath}.1`), 'rotated once at least');
    assert.ok(!existsSync(`${logPath}.2`), 'max-file=2 (daemon default) keeps one rotated file');
    assert.ok(statSync(logPath).size < 20 * 1024 * 4, 'the live file stays bounded');
    const logs = await d.docker(['logs', id]);
    const lines = logs.stdout.trim().split('\n');
    assert.ok(lines.length < 3000, `old lines are gone (${lines.length} left)`);
    assert.equal(lines[lines.length - 1]!.slice(0, 5), '02999');
    const nums = lines.map((l) => Number(l.slice(0, 5)));
    for (let i = 1; i < nums.length; i++) assert.equal(nums[i], nums[i - 1]! + 1, `line ${i} follows line ${i - 1}`);
  });
});
