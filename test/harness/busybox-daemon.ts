/** A daemon per suite with the seeded registry's busybox already pulled: the set-up most container suites share. */
import { before } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, type SeededRegistry } from './hooks.js';
import type { TestDaemon } from './daemon.js';

export function useDaemonWithBusybox(): { daemon: () => TestDaemon; reg: () => SeededRegistry; image: () => string } {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  before(async () => {
    image = reg().seeded.refs.busybox;
    const pull = await daemon().docker(['pull', '-q', image]);
    assert.equal(pull.code, 0, pull.stderr);
  });
  return { daemon, reg, image: () => image };
}
