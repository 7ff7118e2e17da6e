/** A daemon per suite with the seeded registry's busybox already pulled: the set-up most container suites share. */
import { useDaemon, usePulledBusybox, useSeededRegistry, type SeededRegistry } from './hooks.js';
import type { TestDaemon } from './daemon.js';

export function useDaemonWithBusybox(): { daemon: () => TestDaemon; reg: () => SeededRegistry; image: () => string } {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  return { daemon, reg, image: usePulledBusybox(daemon, reg) };
}
