import { handleSignalsManually, runExitCleanupNow } from '../../test/harness/exit-cleanup.js';

/**
 * Everything the suite starts registers its undo here; the undos run newest first at the end of the
 * run, and also on SIGINT/SIGTERM, so an interrupted run still stops what it started (by pid) and
 * removes its dirs, bridges and firewall chains.
 */

type Undo = { what: string; fn: () => Promise<void> | void };

const undos: Undo[] = [];
let running: Promise<void> | undefined;

export function onCleanup(what: string, fn: () => Promise<void> | void): () => void {
  const u = { what, fn };
  undos.push(u);
  return () => {
    const i = undos.indexOf(u);
    if (i >= 0) undos.splice(i, 1);
  };
}

export function cleanupAll(): Promise<void> {
  running ??= (async () => {
    while (undos.length) {
      const u = undos.pop()!;
      try {
        await u.fn();
      } catch (err) {
        process.stderr.write(`bench: cleanup of ${u.what} failed: ${(err as Error).message}\n`);
      }
    }
    // The harness's own last-resort undos (registry, berthd), for anything not stopped above.
    runExitCleanupNow();
  })();
  return running;
}

/** Takes over SIGINT/SIGTERM from the harness: an orderly async cleanup, then exit. */
export function installSignalCleanup(): void {
  handleSignalsManually();
  let signalled = false;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      if (signalled) return;
      signalled = true;
      process.stderr.write(`\nbench: ${sig}, stopping everything it started...\n`);
      void cleanupAll().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
    });
  }
}

/**
 * An engine's start with several steps: `teardown` is registered as an undo, `start` gets a `stop` that
 * tears down and unregisters (for the engine's own stop), and a start that throws is torn down at once.
 */
export async function startOrTeardown<T>(what: string, teardown: () => Promise<void>, start: (stop: () => Promise<void>) => Promise<T>): Promise<T> {
  const undo = onCleanup(what, teardown);
  const stop = async () => {
    await teardown();
    undo();
  };
  try {
    return await start(stop);
  } catch (err) {
    await teardown().catch(() => undefined);
    undo();
    throw err;
  }
}
