/**
 * Non-tty exec output while the daemon is busy: many `docker exec` at once and containers starting
 * meanwhile. Quick commands end (conmon too) before the daemon has handled their start; their
 * output must still reach the client and the health log, whole, every time.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDaemon } from '../harness/daemon.js';
import { eventually, inspect, runShell, uniqueName, useBusyboxDaemon } from './support.js';

const EXECS = 20;
const STARTS = 6;

describe('exec output under load', () => {
  const { daemon, image, containers } = useBusyboxDaemon();

  /** Containers that start and exit at once, named so that cleanup finds them. */
  const startLoad = (d: TestDaemon) =>
    Promise.all(
      Array.from({ length: STARTS }, async () => {
        const name = uniqueName('load');
        containers.push(name);
        const r = await d.docker(['run', '-d', '--name', name, image(), 'true']);
        assert.equal(r.code, 0, r.stderr);
      }),
    );

  it(`${EXECS} overlapping docker exec during container starts each print their output`, async () => {
    const d = daemon();
    const target = await runShell(d, image(), 'exec sleep 600');
    containers.push(target);
    const [results] = await Promise.all([
      Promise.all(Array.from({ length: EXECS }, (_, i) => d.docker(['exec', target, 'sh', '-c', `echo out-${i}; echo err-${i} >&2`]))),
      startLoad(d),
    ]);
    const wrong = results.map((r, i) => ({ i, r })).filter(({ i, r }) => r.code !== 0 || r.stdout !== `out-${i}\n` || r.stderr !== `err-${i}\n`);
    assert.deepEqual(wrong.map(({ i, r }) => `#${i} code ${r.code} stdout ${JSON.stringify(r.stdout)} stderr ${JSON.stringify(r.stderr)}`), []);
  });

  it('every health probe result logs the probe\'s output, with execs and starts under way', async () => {
    const d = daemon();
    const probed = await Promise.all(
      ['a', 'b'].map(async (tag) => {
        const id = await runShell(d, image(), 'exec sleep 600', {
          Healthcheck: { Test: ['CMD', 'echo', `probe-${tag}`], Interval: 200e6, Timeout: 10e9, Retries: 3 },
        });
        containers.push(id);
        return { id, tag };
      }),
    );
    const seen = new Map<string, { Start: string; ExitCode: number; Output: string }>();
    const record = async () => {
      for (const { id, tag } of probed) {
        const log = ((await inspect(d, 'containers', id)).State.Health?.Log ?? []) as { Start: string; ExitCode: number; Output: string }[];
        for (const e of log) seen.set(`${tag} ${e.Start}`, e);
      }
    };
    let loading = true;
    const load = (async () => {
      for (let round = 0; round < 3; round++) {
        await Promise.all([startLoad(d), ...Array.from({ length: EXECS / 2 }, () => d.docker(['exec', probed[0]!.id, 'true']))]);
      }
    })().finally(() => (loading = false));
    // Health logs keep the last 5 results: read them often while the load runs (bounded by it).
    for (let i = 0; i < 600 && loading; i++) {
      await record();
      await new Promise((r) => setTimeout(r, 100));
    }
    await load;
    await eventually(async () => {
      await record();
      return seen.size >= 10;
    }, 30_000, 'ten probe results');
    const wrong = [...seen].filter(([key, e]) => e.ExitCode !== 0 || e.Output !== `probe-${key.split(' ')[0]}\n`);
    assert.deepEqual(wrong.map(([key, e]) => `${key} exit ${e.ExitCode} output ${JSON.stringify(e.Output)}`), []);
  });
});
