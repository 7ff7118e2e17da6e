/**
 * Last-resort cleanup for a test process: every resource the harness starts registers a synchronous
 * undo here, so processes, mounts and temp dirs go away even when a test forgets its teardown,
 * throws in a hook, or the runner interrupts the file with SIGINT/SIGTERM.
 */

type SyncCleanup = () => void;

const pending = new Map<number, SyncCleanup>();
let nextId = 1;
let installed = false;
let signalMode: 'exit' | 'manual' = 'exit';

function runAll(): void {
  // Newest first: a daemon registered after its registry goes away before it.
  const fns = [...pending.entries()].reverse();
  pending.clear();
  for (const [, fn] of fns) {
    try {
      fn();
    } catch {
      // Best effort: one failed undo must not keep the others from running.
    }
  }
}

function onSignal(signal: NodeJS.Signals): void {
  runAll();
  process.exit(signal === 'SIGINT' ? 130 : 143);
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', runAll);
  if (signalMode === 'exit') {
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  }
}

/** Registers a synchronous undo to run at process exit; the returned function unregisters it. */
export function onExitCleanup(fn: SyncCleanup): () => void {
  install();
  const id = nextId++;
  pending.set(id, fn);
  return () => {
    pending.delete(id);
  };
}

/**
 * The harness CLI handles SIGINT/SIGTERM itself (with an orderly async teardown); it calls this
 * before starting anything so the synchronous handlers are not installed.
 */
export function handleSignalsManually(): void {
  signalMode = 'manual';
  if (installed) {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

/** Runs every pending undo now (used by the CLI after its async teardown as a final sweep). */
export function runExitCleanupNow(): void {
  runAll();
}
